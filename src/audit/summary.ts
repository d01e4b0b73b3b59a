import type { AuditEntryInput, HandshakeStep } from "./entry.js";

/**
 * Human-readable summaries of ACP messages for the audit log and the transparency channel:
 * 1–2 short sentences, given by the sender or generated from the method and the body's shape.
 * An end-to-end encrypted body is never described: the summary only says an encrypted exchange happened.
 * Fields that look like secrets (by name or by value) are shown as [redacted].
 */

const MAX_SUMMARY_CHARS = 240;
const MAX_VALUE_CHARS = 48;
const MAX_LIST_ITEMS = 4;

const SECRET_KEY =
  /secret|token|passw|pwd|api[-_]?key|credential|private[-_]?key|^auth(orization)?$|cookie|session[-_]?id|signature|^jw[es]$|^ssn$|^otp$|^cvv$|card[-_]?number/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SECRET_VALUE = [
  /^eyJ[A-Za-z0-9_-]*\./, // JOSE compact serialisation (JWT, JWS, JWE)
  /-----BEGIN [A-Z ]*KEY-----/,
  /^(sk|pk|rk|ghp|gho|ghs|xox[abprs])[-_][A-Za-z0-9_-]{8,}/,
  /^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9+/_=-]{32,}$/, // long opaque tokens
];

export interface SummaryOptions {
  /** A summary given by the sender; used (cleaned and shortened) unless the body is encrypted. */
  summary?: string;
}

export function summarize(message: unknown, options: SummaryOptions = {}): string {
  const m = inspect(message);
  if (m.encrypted) return finish(encryptedSummary(m));
  const given = [options.summary, m.body?.["summary"]].find((s) => typeof s === "string" && clean(s) !== "");
  return finish(typeof given === "string" ? given : generate(m));
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
    summary: summarize(message, { summary: options.summary }),
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

interface MessageView {
  method: string | undefined;
  type: MessageType | undefined;
  id: string | number | undefined;
  sender: string | undefined;
  body: Record<string, unknown> | undefined;
  encrypted: boolean;
  isResponse: boolean;
  error: { code: number; message: string } | undefined;
  headerString(name: string): string | undefined;
}

function inspect(message: unknown): MessageView {
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

function encryptedSummary(m: MessageView): string {
  const what = m.isResponse ? "response" : (m.type ?? "message");
  const reply = m.isResponse && m.id !== undefined ? ` in reply to ${short(String(m.id))}` : "";
  return `${who(m)} sent an end-to-end encrypted ${what}${reply}; the payload is not shown.`;
}

function generate(m: MessageView): string {
  const body = m.body ?? {};
  const sender = who(m);
  if (m.error) {
    const ref = m.id !== undefined ? ` to ${short(String(m.id))}` : "";
    return `Error response${ref}: ${m.error.code} ${short(clean(m.error.message), 120)}.`;
  }
  if (m.isResponse) {
    const ref = m.id !== undefined ? ` to ${short(String(m.id))}` : "";
    const fields = describeFields(body);
    return `${sender} responded${ref}${fields ? ` with ${fields}` : ""}.`;
  }
  switch (m.method) {
    case "agent.announce": {
      const purpose =
        typeof body["purpose"] === "string" ? ` to "${short(clean(body["purpose"]), 100)}"` : "";
      const caps = describeList(body["capabilities"]);
      return `${sender} announced itself${purpose}${caps ? `; capabilities: ${caps}` : ""}.`;
    }
    case "agent.capabilities": {
      const parts = (["tools", "domains", "limits", "requests"] as const)
        .map((key) => [key, key === "limits" ? describeValue(body[key]) : describeList(body[key])] as const)
        .filter(([, text]) => text !== "")
        .map(([key, text]) => `${key} ${text}`);
      return `${sender} shared its capabilities${parts.length > 0 ? `: ${parts.join("; ")}` : ""}.`;
    }
    case "agent.handoff": {
      const parts = [`completed ${describeValue(body["completed"]) || "nothing stated"}`];
      parts.push(`remaining ${describeValue(body["remaining"]) || "nothing stated"}`);
      return `${sender} handed off a task: ${parts.join("; ")}.`;
    }
    case "agent.notification": {
      const text = firstString(body, ["message", "text", "status", "event"]);
      const fields = describeFields(body);
      return `${sender} sent a notification${text ? `: ${short(text, 120)}` : fields ? ` (${fields})` : ""}.`;
    }
    default: {
      const action = typeof body["action"] === "string" ? short(clean(body["action"])) : undefined;
      const params = body["parameters"] ?? body["params"] ?? body["arguments"];
      if (action !== undefined) {
        const detail = isRecord(params) ? describeFields(params) : "";
        return `${sender} requested ${action}${detail ? ` (${detail})` : ""}.`;
      }
      const fields = describeFields(body);
      const what = m.method === "agent.request" ? "a request" : (m.method ?? "a message");
      return `${sender} sent ${what}${fields ? ` (${fields})` : ""}.`;
    }
  }
}

function who(m: MessageView): string {
  return m.sender !== undefined ? short(clean(m.sender), 64) : "The sender";
}

function firstString(record: Record<string, unknown>, keys: string[]): string | undefined {
  for (const key of keys) {
    const value = record[key];
    if (typeof value === "string" && clean(value) !== "" && !isSecretValue(value)) return clean(value);
  }
  return undefined;
}

/** `key: value, key: value (+2 more)`, secrets redacted, each value short. */
function describeFields(record: Record<string, unknown>): string {
  const keys = Object.keys(record).filter((key) => key !== "summary");
  const shown = keys.slice(0, MAX_LIST_ITEMS).map((key) => {
    const name = short(clean(key), 32);
    return SECRET_KEY.test(key) ? `${name}: [redacted]` : `${name}: ${describeValue(record[key])}`;
  });
  return shown.join(", ") + (keys.length > MAX_LIST_ITEMS ? ` (+${keys.length - MAX_LIST_ITEMS} more)` : "");
}

/** A list as `a, b, c (+2 more)`; tool descriptors by name. */
function describeList(value: unknown): string {
  if (!Array.isArray(value)) return describeValue(value);
  const names = value.map((item) =>
    isRecord(item) && typeof item["name"] === "string" ? describeValue(item["name"]) : describeValue(item),
  );
  const shown = names.slice(0, MAX_LIST_ITEMS).join(", ");
  return shown + (names.length > MAX_LIST_ITEMS ? ` (+${names.length - MAX_LIST_ITEMS} more)` : "");
}

function describeValue(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") return isSecretValue(value) ? "[redacted]" : short(clean(value));
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  if (Array.isArray(value)) {
    if (value.length > 0 && value.every((item) => typeof item === "string")) return describeList(value);
    return `${value.length} item${value.length === 1 ? "" : "s"}`;
  }
  if (isRecord(value)) {
    const keys = Object.keys(value).filter((key) => !SECRET_KEY.test(key));
    return keys.length === 0 ? "{}" : `{${short(keys.map((key) => clean(key)).join(", "))}}`;
  }
  return "";
}

/** Shorter than any SECRET_VALUE can match, except a JOSE value (`eyJ` and a dot). */
const SHORTEST_SECRET = 11;

function isSecretValue(value: string): boolean {
  if (value.length < SHORTEST_SECRET && !value.startsWith("eyJ")) return false;
  return !UUID.test(value) && SECRET_VALUE.some((pattern) => pattern.test(value));
}

/** What `clean` would change: a lone surrogate, a control or separator character, or whitespace other than single inner spaces. */
const UNCLEAN =
  /[\uD800-\uDFFF\p{Cc}\p{Zl}\p{Zp}\t\n\v\f\r\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000\uFEFF]| {2}|^ | $/u;

/** One line of plain text: control characters and runs of whitespace become one space, lone surrogates U+FFFD. */
function clean(text: string): string {
  // Most text is clean already; the test is much cheaper than the two replaces (one per message field).
  if (!UNCLEAN.test(text)) return text;
  return text
    .replace(/[\uD800-\uDFFF]/gu, "\uFFFD")
    .replace(/[\p{Cc}\p{Zl}\p{Zp}\s]+/gu, " ")
    .trim();
}

/** Shortens by code points, so a surrogate pair is never split. */
function truncate(text: string, max: number): string {
  // A string has at least as many UTF-16 units as code points.
  if (text.length <= max) return text;
  const chars = Array.from(text);
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join("")}…`;
}

function short(text: string, max = MAX_VALUE_CHARS): string {
  return truncate(text, max);
}

/** The last pass over every summary, sender-given ones included: one clean line, no token-like words. */
function finish(text: string): string {
  const redacted = clean(text)
    .split(" ")
    .map((word) => (isSecretValue(word.replace(/^["'(]+|["'),.;:]+$/g, "")) ? "[redacted]" : word))
    .join(" ");
  return truncate(redacted, MAX_SUMMARY_CHARS);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
