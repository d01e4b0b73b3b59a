/** acp-kit/audit: the tamper-evident, append-only audit log of an agent's exchanges, and their summaries. */
export { canonicalJson } from "./canonical.js";
export {
  type AuditEntry,
  type AuditEntryInput,
  AuditEntryInputSchema,
  AuditEntrySchema,
  type AuditHead,
  type AuditParty,
  computeEntryHash,
  GENESIS_HASH,
  type HandshakeStep,
  peerOf,
  signedInCustody,
} from "./entry.js";
export {
  AuditLogError,
  agentDir,
  listAuditAgents,
  listMonthFiles,
  resolveAuditRoot,
  type TornTailRecovery,
} from "./files.js";
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
  requestLabel,
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
