/**
 * Input checks shared by both brokers, so both reject the same input with the same error, and the
 * encodings both use for ids in keys and for list cursors.
 */
import { z } from "zod";
import { AgentId, MessageId, MessageType } from "../protocol/schemas.js";
import { BrokerError } from "./errors.js";
import { type ListQuery, MESSAGE_STATUSES, type MessageRef, type SubmitInput } from "./types.js";

const Method = z
  .string()
  .min(1, "must not be empty")
  .max(128, "must be at most 128 characters")
  .regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/**
 * An inbox that is no agent's: a gateway's own queue, such as a federation peer's outbound queue
 * (`_fed_b_example`). It starts with `_`, which no agent id can (they start alphanumeric), so it
 * never collides with an agent; otherwise it is a valid NATS subject token like an agent id.
 */
export const SystemInboxName = z
  .string()
  .regex(/^_[a-z0-9][a-z0-9_-]{0,126}$/, "must be _ then 1-127 characters of a-z 0-9 _ -");

/** Whom a message is from or for, as the broker names it: an agent id or a system inbox. */
const InboxName = z.union([AgentId, SystemInboxName], {
  error:
    "must be an agent id (1-128 characters of A-Z a-z 0-9 _ - starting alphanumeric) or a system inbox (_name)",
});

/** `<instanceId>/<name>`: both parts NATS subject and header safe. */
const ROUTE = /^[A-Za-z0-9_-]{1,64}\/[A-Za-z0-9_-]{1,64}$/;
const ROUTE_RULE = "must be <instance>/<name>, each 1-64 characters of A-Z a-z 0-9 _ -";

/** The broker instance a route belongs to (`<instanceId>/<name>`). */
export function instanceOfRoute(route: string): string {
  return route.slice(0, route.indexOf("/"));
}

const SubmitSchema = z.object({
  id: MessageId,
  from: InboxName,
  to: InboxName,
  kind: MessageType,
  method: Method,
  envelope: z.string().min(2, "must be the serialized envelope"),
  submittedAt: z.string().min(1, "must not be empty").max(64, "must be at most 64 characters"),
  replyTo: z.string().regex(ROUTE, ROUTE_RULE).optional(),
  inReplyTo: MessageId.optional(),
  route: z.string().regex(ROUTE, ROUTE_RULE).optional(),
});

const ListSchema = z.object({
  participant: InboxName,
  from: InboxName.optional(),
  to: InboxName.optional(),
  kind: MessageType.optional(),
  method: Method.optional(),
  status: z.enum(MESSAGE_STATUSES).optional(),
  cursor: z.string().optional(),
  limit: z
    .number()
    .int("must be an integer")
    .min(1, "must be at least 1")
    .max(500, "must be at most 500")
    .optional(),
});

const BUCKET = /^[A-Za-z0-9_-]{1,64}$/;
/** The characters NATS KV accepts in keys, so a key valid on one broker is valid on both. */
const KV_KEY = /^[A-Za-z0-9_=/.-]{1,256}$/;

function parseOrThrow<T>(schema: z.ZodType<T>, input: unknown, what: string): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue?.path.map(String).join(".") || undefined;
  throw new BrokerError(
    "invalid_argument",
    `${what}: ${field ?? "input"} ${issue?.message ?? "is invalid"}`,
    field === undefined ? {} : { field },
  );
}

export function checkSubmit(input: SubmitInput): void {
  parseOrThrow(SubmitSchema, input, "submit");
}

export function checkListQuery(query: ListQuery): void {
  parseOrThrow(ListSchema, query, "list");
}

/** An inbox's owner: an agent id, or a system inbox (SystemInboxName). */
export function checkAgentId(agentId: string, field = "agentId"): void {
  const result = InboxName.safeParse(agentId);
  if (!result.success) {
    throw new BrokerError(
      "invalid_argument",
      `${field} ${JSON.stringify(agentId)} ${result.error.issues[0]?.message ?? "is invalid"}`,
      { field },
    );
  }
}

/** Checks both parts of a MessageRef (the sender as `from`, the id as `id`). */
export function checkMessageRef(message: MessageRef): void {
  checkAgentId(message.from, "from");
  checkMessageId(message.id);
}

/**
 * The one string naming a message (MessageRef) in maps, locks and `Nats-Msg-Id`: `<from>/<id>`.
 * Unambiguous: neither agent ids nor message ids contain `/`.
 */
export function refKey(message: MessageRef): string {
  return `${message.from}/${message.id}`;
}

/** The MessageRef of a `refKey`; a key without `/` (written before ids were per sender) is `id` of `from`. */
export function refOfKey(key: string, from: string): MessageRef {
  const slash = key.indexOf("/");
  return slash === -1 ? { from, id: key } : { from: key.slice(0, slash), id: key.slice(slash + 1) };
}

export function checkMessageId(id: string): void {
  const result = MessageId.safeParse(id);
  if (!result.success) {
    throw new BrokerError(
      "invalid_argument",
      `message id ${JSON.stringify(id)} ${result.error.issues[0]?.message ?? "is invalid"}`,
      { field: "id" },
    );
  }
}

export function checkBucketName(name: string): void {
  if (typeof name !== "string" || !BUCKET.test(name)) {
    throw new BrokerError(
      "invalid_argument",
      `kv bucket ${JSON.stringify(name)} must match [A-Za-z0-9_-]{1,64}`,
      {
        field: "bucket",
      },
    );
  }
}

export function checkKvKey(key: string): void {
  if (
    typeof key !== "string" ||
    !KV_KEY.test(key) ||
    key.startsWith(".") ||
    key.endsWith(".") ||
    key.includes("..")
  ) {
    throw new BrokerError(
      "invalid_argument",
      `kv key ${JSON.stringify(key)} must be 1-256 characters of A-Z a-z 0-9 _ = / . - without leading, trailing or double dots`,
      { field: "key" },
    );
  }
}

/**
 * A KV-safe key for a message: `<from>.<id>`, ids of [A-Za-z0-9_-] readable, others base64url
 * behind `=` (agent ids are KV-safe already).
 */
export function messageKey(message: MessageRef): string {
  const { id } = message;
  return `${message.from}.${/^[A-Za-z0-9_-]+$/.test(id) ? id : `=${Buffer.from(id, "utf8").toString("base64url")}`}`;
}

/** The MessageRef of a `messageKey`; null for a key no `messageKey` makes. */
export function refOfMessageKey(key: string): MessageRef | null {
  const dot = key.indexOf(".");
  if (dot <= 0 || dot === key.length - 1) return null;
  const id = key.slice(dot + 1);
  return {
    from: key.slice(0, dot),
    id: id.startsWith("=") ? Buffer.from(id.slice(1), "base64url").toString("utf8") : id,
  };
}

/** Cursors are opaque to callers; inside they are the last listed sequence number. */
export function encodeCursor(seq: number): string {
  return Buffer.from(`c1:${seq}`, "utf8").toString("base64url");
}

export function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  const match = /^c1:(\d{1,15})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  if (!match?.[1]) {
    throw new BrokerError("invalid_argument", "list: cursor is not one returned by list()", {
      field: "cursor",
    });
  }
  return Number(match[1]);
}

/** JSON values only: anything JSON.stringify would drop or mangle is refused up front. */
export function serializeKvValue(value: unknown): string {
  const text = value === undefined ? undefined : JSON.stringify(value);
  if (text === undefined) {
    throw new BrokerError("invalid_argument", "kv value must be JSON-serializable", { field: "value" });
  }
  return text;
}
