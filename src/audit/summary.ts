import { clean, isRecord, isSecretValue, truncate } from "./describe.js";
import type { AuditEntryInput, HandshakeStep } from "./entry.js";
import { encryptedSentence, type MessageView, type SummaryContext, sentence } from "./sentences.js";

export { requestLabel, type SummaryContext } from "./sentences.js";

/**
 * Human-readable summaries of ACP messages for the audit log and the transparency channel:
 * 1–2 short sentences, given by the sender or made from the method and the body (sentences.ts).
 * An end-to-end encrypted body is never described: the summary only says an encrypted exchange happened.
 * Fields that look like secrets (by name or by value) are shown as [redacted].
 */

const MAX_SUMMARY_CHARS = 240;

export interface SummaryOptions {
  /** A summary given by the sender's own caller (the SDK's `summary` option); else the message's own. */
  summary?: string;
  /** What the summarizer knows beyond the message, for the sentence made when the sender gave none. */
  context?: SummaryContext;
}

/** A summary, and whose words it is: the sender's, or made by the summarizer (gateway or SDK). */
export interface Summary {
  text: string;
  by: "sender" | "generated";
}

/**
 * The one-line summary of a message, for people (the audit log, the dashboard, chat): `summaryOf`'s text
 * without saying whose words it is.
 */
export function summarize(message: unknown, options: SummaryOptions = {}): string {
  return summaryOf(message, options).text;
}

/**
 * The sender's own words when it gave them (the caller's `summary`, the signed `summary` header,
 * or a `summary` member of the body), else a sentence made from the message. An end-to-end
 * encrypted message is never described, whoever wrote the summary: it only says an exchange happened.
 */
export function summaryOf(message: unknown, options: SummaryOptions = {}): Summary {
  const m = inspect(message);
  if (m.encrypted) return { text: finish(encryptedSentence(m)), by: "generated" };
  const given = [options.summary, m.headerString("summary"), m.body?.["summary"]].find(
    (s) => typeof s === "string" && clean(s) !== "",
  );
  if (typeof given === "string") return { text: finish(given), by: "sender" };
  return { text: finish(sentence(m, options.context)), by: "generated" };
}

export interface AuditEntryForOptions {
  direction: "sent" | "received";
  /** Where the message went or came from, e.g. `nats:agent.agent-beta.inbox`. */
  channel: string;
  /** The logging agent; fills what the message does not say (a recipient's principal, an error's parties). */
  self?: { agent?: string; principal?: string };
  /** The other agent; fills what the message does not say (a sent message does not name the peer's principal). */
  peer?: { agent?: string; principal?: string };
  /** The sender's own summary. */
  summary?: string;
  /** What the logger knows beyond the message (the request a response answers…), for a made summary. */
  context?: SummaryContext;
  /** The handshake step this entry records; announce and capabilities messages are recognised without it. */
  step?: HandshakeStep;
  /** Set when this agent rejected the message (e.g. a bad signature during the handshake's verify step). */
  error?: { code: number; message: string };
}

/** The audit entry (before the log stamps seq, ts and the hash chain) for one sent or received message. */
export function auditEntryFor(message: unknown, options: AuditEntryForOptions): AuditEntryInput {
  const m = inspect(message);
  const sent = options.direction === "sent";
  const local = options.self ?? {};
  const peer = options.peer ?? {};
  const senderSide = sent ? local : peer;
  const recipientSide = sent ? peer : local;
  const fromAgent = m.headerString("agent-id") ?? senderSide.agent;
  const toAgent = m.headerString("recipient-id") ?? recipientSide.agent;
  if (fromAgent === undefined) {
    throw new TypeError(
      `cannot tell who sent this message: no agent-id header and no ${sent ? "self" : "peer"}.agent`,
    );
  }
  if (toAgent === undefined) {
    throw new TypeError(
      `cannot tell who received this message: no recipient-id header and no ${sent ? "peer" : "self"}.agent`,
    );
  }
  const type = m.type;
  if (type === undefined)
    throw new TypeError(`cannot tell the message type of ${m.method ?? "this message"}`);
  const id = m.id ?? m.headerString("message-id") ?? null;
  const messageId = m.headerString("message-id");
  const summary = summaryOf(message, {
    ...(options.summary !== undefined ? { summary: options.summary } : {}),
    ...(options.context ? { context: options.context } : {}),
  });
  const rpcError = m.error
    ? { code: m.error.code, message: truncate(clean(m.error.message), 200) }
    : undefined;
  return {
    direction: options.direction,
    from: { agent: fromAgent, principal: m.headerString("principal-id") ?? senderSide.principal ?? null },
    to: { agent: toAgent, principal: recipientSide.principal ?? null },
    type,
    method: m.method ?? "agent.response",
    id,
    ...(messageId !== undefined && messageId !== id ? { messageId } : {}),
    ...((options.step ?? STEPS[m.method ?? ""]) ? { step: options.step ?? STEPS[m.method ?? ""] } : {}),
    ...(m.encrypted ? { encrypted: true as const } : {}),
    ...((options.error ?? rpcError) ? { error: options.error ?? rpcError } : {}),
    summary: summary.text,
    ...(summary.by === "sender" ? { summaryBy: "sender" as const } : {}),
    channel: options.channel,
  };
}

const STEPS: Record<string, HandshakeStep> = {
  "agent.announce": "announce",
  "agent.capabilities": "capabilities",
};

type MessageType = AuditEntryInput["type"];
const TYPES: readonly string[] = ["request", "response", "notification", "handoff"];
const TYPE_OF_METHOD: Record<string, MessageType> = {
  "agent.request": "request",
  "agent.notification": "notification",
  "agent.handoff": "handoff",
  "agent.announce": "notification",
  "agent.capabilities": "notification",
};

interface InspectedMessage extends MessageView {
  type: MessageType | undefined;
  id: string | number | undefined;
  encrypted: boolean;
  headerString(name: string): string | undefined;
}

function inspect(message: unknown): InspectedMessage {
  const msg = isRecord(message) ? message : {};
  const isResponse = "result" in msg || "error" in msg;
  const carrier = isRecord(msg["params"]) ? msg["params"] : isRecord(msg["result"]) ? msg["result"] : {};
  // A signed error response carries its headers in error.data.headers (protocol.md).
  const errorData = isRecord(msg["error"]) && isRecord(msg["error"]["data"]) ? msg["error"]["data"] : {};
  const headerCarrier = isRecord(carrier["headers"]) ? carrier : errorData;
  const headers = isRecord(headerCarrier["headers"]) ? headerCarrier["headers"] : {};
  const body = isRecord(carrier["body"]) ? carrier["body"] : undefined;
  const headerString = (name: string): string | undefined =>
    typeof headers[name] === "string" && headers[name] !== "" ? (headers[name] as string) : undefined;
  const method = typeof msg["method"] === "string" ? msg["method"] : undefined;
  const declared = headerString("message-type");
  const rawError = isRecord(msg["error"]) ? msg["error"] : undefined;
  return {
    method,
    type:
      declared !== undefined && TYPES.includes(declared)
        ? (declared as MessageType)
        : isResponse
          ? "response"
          : TYPE_OF_METHOD[method ?? ""],
    id: typeof msg["id"] === "string" || typeof msg["id"] === "number" ? msg["id"] : undefined,
    sender: headerString("agent-id"),
    recipient: headerString("recipient-id"),
    body,
    encrypted: body !== undefined && "jwe" in body,
    isResponse,
    error: rawError
      ? {
          code: typeof rawError["code"] === "number" ? rawError["code"] : 0,
          message: typeof rawError["message"] === "string" ? rawError["message"] : "",
        }
      : undefined,
    headerString,
  };
}

/** The last pass over every summary, sender-given ones included: one clean line, no token-like words. */
function finish(text: string): string {
  const redacted = clean(text)
    .split(" ")
    .map((word) => (isSecretValue(word.replace(/^["'(]+|["'),.;:]+$/g, "")) ? "[redacted]" : word))
    .join(" ");
  return truncate(redacted, MAX_SUMMARY_CHARS);
}
