/** acp-kit/audit: the tamper-evident, append-only audit log of an agent's exchanges, and their summaries. */
export {
  type AuditEntry,
  type AuditEntryInput,
  AuditEntrySchema,
  type AuditHead,
  type AuditParty,
} from "./entry.js";
export { AuditLogError, listAuditAgents, resolveAuditRoot, type TornTailRecovery } from "./files.js";
export { AuditLog, type AuditLogOptions } from "./log.js";
export {
  type AuditFilter,
  type AuditRecord,
  type FollowAuditOptions,
  followAudit,
  type ReadAuditOptions,
  readAudit,
  readAuditHead,
} from "./query.js";
export {
  type AuditEntryForOptions,
  auditEntryFor,
  type Summary,
  type SummaryContext,
  type SummaryOptions,
  summarize,
  summaryOf,
} from "./summary.js";
export {
  type AuditProblem,
  type AuditProblemReason,
  type AuditVerification,
  type VerifyOptions,
  verifyAudit,
  verifyAuditRoot,
} from "./verify.js";
