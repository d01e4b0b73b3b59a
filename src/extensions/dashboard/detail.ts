import { basename } from "node:path";
import type { AuditEntry } from "../../audit/index.js";
import type { Broker, MessageRecord, MessageRef, MessageStatus } from "../../broker/index.js";
import type { AgentRecord, Registry } from "../../gateway/registry.js";
import {
  AcpError,
  type AcpMessage,
  headersOf,
  importPublicKey,
  isRemoteRef,
  keyId,
  localPartOf,
  signingKeyAt,
  verifyMessageSignature,
} from "../../protocol/index.js";
import { encryptedSummary, type FeedItem, feedItemOfMessage } from "./feed.js";
import type { FeedHistory } from "./history.js";
import type { Scope } from "./viewer.js";

export interface TimelineStep {
  status: MessageStatus;
  at: string;
}

export interface SignatureCheck {
  /** `verified`: the signature checks against the sender's registered key now. */
  result: "verified" | "invalid" | "unknown-key" | "unavailable";
  detail: string;
  kid?: string;
}

export interface MessageDetail {
  item: FeedItem;
  /** The identity headers, exactly as signed (never the body). */
  headers: Record<string, unknown> | null;
  status: MessageStatus;
  timeline: TimelineStep[];
  retryCount: number;
  lastError?: string;
  deadLetter?: MessageRecord["deadLetter"];
  signature: SignatureCheck;
  /** The gateway's relay audit entries for this message; `file` is relative to the relay audit root. */
  audit: (AuditEntry & { file: string; line: number })[];
}

/** queued → delivered → acknowledged (or failed / expired), each with its time. */
export function timelineOf(record: MessageRecord): TimelineStep[] {
  const steps: [MessageStatus, string | undefined][] = [
    ["queued", record.queuedAt],
    ["delivered", record.deliveredAt],
    ["acknowledged", record.acknowledgedAt],
    ["failed", record.failedAt],
    ["expired", record.expiredAt],
  ];
  return steps.flatMap(([status, at]) => (at ? [{ status, at }] : []));
}

/**
 * Re-checks the stored signature against the sender's keys as they are now (its registry entry, or
 * for an agent of another domain its home directory's record): its current key, or the earlier key
 * of its key history that was current when it signed. A revoked agent's key is still used, and said
 * so: the dashboard shows what a verifier would conclude today, not what the relay did.
 */
export async function checkSignature(registry: Registry, message: AcpMessage): Promise<SignatureCheck> {
  const sender = headersOf(message)?.["agent-id"];
  const keys = typeof sender === "string" ? await signingKeysOf(registry, sender) : undefined;
  if (!keys) return { result: "unknown-key", detail: `${String(sender)} is not registered at this gateway` };
  const agentId = localPartOf(keys.agentId);
  const current = keyId(agentId, keys.signing);
  let signedBy = current;
  try {
    verifyMessageSignature(message, (_agentId, kid, signedAt) => {
      signedBy = kid;
      const jwk = signingKeyAt(agentId, keys.signing, keys.keyHistory, kid, signedAt);
      return jwk && importPublicKey(jwk);
    });
    const earlier = keys.keyHistory?.find((entry) => entry.kid === signedBy);
    const replaced = earlier ? ` (an earlier key, replaced by ${earlier.successor} at ${earlier.until})` : "";
    const revoked = keys.revokedAt ? ` (the agent was revoked at ${keys.revokedAt})` : "";
    return {
      result: "verified",
      detail: `Ed25519 signature valid for ${signedBy}${replaced}${revoked}`,
      kid: signedBy,
    };
  } catch (err) {
    const reason = err instanceof AcpError ? err.kind : "InternalError";
    return {
      result: reason === "UnknownKey" ? "unknown-key" : "invalid",
      detail: (err as Error).message,
      kid: signedBy,
    };
  }
}

/** A sender's keys: a local agent's registry entry, or an agent of another domain's directory record. */
async function signingKeysOf(registry: Registry, sender: string): Promise<AgentKeys | undefined> {
  if (!isRemoteRef(sender, registry.remote?.domain)) return registry.get(localPartOf(sender));
  const view = await registry.remote?.view(sender);
  return (
    view && {
      agentId: view.agent_id,
      signing: view.signing,
      ...(view.key_history && { keyHistory: view.key_history }),
      ...(view.revoked_at && { revokedAt: view.revoked_at }),
    }
  );
}

type AgentKeys = Pick<AgentRecord, "agentId" | "signing" | "keyHistory" | "revokedAt">;

/** A message's detail for a viewer; a message the viewer may not see reads as not existing. */
export async function messageDetail(
  broker: Broker,
  registry: Registry,
  history: FeedHistory,
  scope: Scope,
  ref: MessageRef,
): Promise<MessageDetail> {
  const { id } = ref;
  const stored = await broker.get(ref);
  if (!stored || !scope.seesExchange(stored.from, stored.to))
    throw new AcpError("NotFound", `no message ${id}`);
  const { envelope, ...record } = stored;
  const principals = { from: scope.principalOf(record.from), to: scope.principalOf(record.to) };
  const item = feedItemOfMessage(record, envelope, principals);
  const audit = await history.auditEntries(record.from, id);
  let message: AcpMessage | undefined;
  try {
    message = envelope === null ? undefined : (JSON.parse(envelope) as AcpMessage);
  } catch {
    message = undefined;
  }
  // Only the audit knows the gateway signed it (the envelope reads like any other).
  if (audit.some((record) => record.entry.custodial)) item.custodial = true;
  // The summary made when it was relayed knew more (the request a response answers).
  const relayed = audit[0]?.entry;
  if (relayed && !item.encrypted) {
    item.summary = relayed.summary;
    item.summaryBy = relayed.summaryBy === "sender" ? "sender" : "gateway";
  }
  if (!message && audit[0]) {
    // The envelope left retention: the audit entry still tells what it was.
    const entry = audit[0].entry;
    item.summary = entry.encrypted ? encryptedSummary(record.from, record.to) : entry.summary;
    item.encrypted = entry.encrypted === true;
  }
  const signature: SignatureCheck = message
    ? await checkSignature(registry, message)
    : {
        result: "unavailable",
        detail: "the envelope is past retention; its signature can no longer be checked",
      };
  return {
    item,
    headers: message ? ((headersOf(message) as Record<string, unknown> | undefined) ?? null) : null,
    status: record.status,
    timeline: timelineOf(record),
    retryCount: record.retryCount,
    ...(record.lastError ? { lastError: record.lastError } : {}),
    ...(record.deadLetter ? { deadLetter: record.deadLetter } : {}),
    signature,
    audit: audit.map((a) => ({ ...a.entry, file: `${a.agent}/${basename(a.file)}`, line: a.line })),
  };
}
