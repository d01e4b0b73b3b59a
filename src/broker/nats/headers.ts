import type { JsMsg } from "@nats-io/jetstream";
import { DEFAULT_PRIORITY, type Priority, priorityOfRank } from "../../protocol/priority.js";
import type { MessageType } from "../../protocol/schemas.js";
import { refOfKey } from "../validation.js";
import { agentOfInboxSubject, Header } from "./layout.js";

/** What a stored message's headers say about it (written by submission.ts). */
export interface MessageHeaders {
  id: string;
  from: string;
  to: string;
  kind: MessageType;
  method: string;
  submittedAt: string;
  queuedAt: number;
  priority: Priority;
  route: string | undefined;
  replyTo: string | undefined;
}

/** The ack reply subject of a delivery. JsMsg does not type it, but every pulled message has one. */
export function replySubject(msg: JsMsg): string | undefined {
  const reply = (msg as unknown as { reply?: unknown }).reply;
  return typeof reply === "string" && reply.length > 0 ? reply : undefined;
}

/** The headers of an ACP message on an inbox subject; null for anything else. */
export function readHeaders(msg: JsMsg): MessageHeaders | null {
  const h = msg.headers;
  const to = agentOfInboxSubject(msg.subject);
  const key = h?.get("Nats-Msg-Id");
  const kind = h?.get(Header.Kind);
  const queuedAt = Number(h?.get(Header.QueuedAt));
  if (!h || !to || !key || !kind || !Number.isFinite(queuedAt)) return null;
  // The key is `<from>/<id>`; only messages stored before ids were per sender need `Acp-From`.
  const { id, from } = refOfKey(key, h.get(Header.From));
  return {
    id,
    from,
    to,
    kind: kind as MessageType,
    method: h.get(Header.Method),
    submittedAt: h.get(Header.SubmittedAt),
    queuedAt,
    priority: h.has(Header.Priority) ? priorityOfRank(Number(h.get(Header.Priority))) : DEFAULT_PRIORITY,
    route: h.get(Header.Route) || undefined,
    replyTo: h.get(Header.ReplyTo) || undefined,
  };
}
