/**
 * The message records of the gateway's REST API, in the casing the ACP messaging platform documents
 * (snake_case): GET /api/v1/messages (a page of items), /messages/:id (an item with its envelope),
 * /messages/:id/status and POST /messages/:id/acknowledge (a status). The gateway builds them and
 * the SDK parses them with these schemas.
 */
import { z } from "zod";
import { SubmitResponse } from "./api.js";

export const DeadLetterView = z.object({
  /** `max-deliveries` or `rejected`. */
  reason: z.string(),
  detail: z.string(),
  at: z.string(),
});

/** A message's delivery status, with every timestamp it has (`/messages/:id/status`). */
export const MessageStatusView = z.object({
  id: z.string(),
  from: z.string(),
  to: z.string(),
  /** `forwarded`: a message to another domain's agent that reached that agent's gateway. */
  status: z.enum([...SubmitResponse.shape.status.options, "forwarded"]),
  queued_at: z.string(),
  delivered_at: z.string().optional(),
  acknowledged_at: z.string().optional(),
  failed_at: z.string().optional(),
  expired_at: z.string().optional(),
  /** Deliveries after the first (0 after one delivery). */
  retry_count: z.number().int().nonnegative(),
  last_error: z.string().optional(),
  dead_letter: DeadLetterView.optional(),
  /** For a message to an agent of another domain: the peer gateway that holds it now. */
  peer: z.string().optional(),
  /** When the message left for that peer gateway. */
  forwarded_at: z.string().optional(),
});
export type MessageStatusView = z.infer<typeof MessageStatusView>;

/** One row of GET /api/v1/messages: routing metadata and status, never the body. */
export const MessageListItem = MessageStatusView.omit({ peer: true, forwarded_at: true }).extend({
  status: SubmitResponse.shape.status,
  kind: z.enum(["request", "response", "notification", "handoff", "error"]),
  method: z.string(),
  submitted_at: z.string(),
});
export type MessageListItem = z.infer<typeof MessageListItem>;

/** GET /api/v1/messages/:id: the item and its envelope (null once retention removed it). */
export const MessageWithEnvelope = MessageListItem.extend({
  envelope: z.record(z.string(), z.unknown()).nullable(),
});
export type MessageWithEnvelope = z.infer<typeof MessageWithEnvelope>;

/** GET /api/v1/messages: a page of items, and the cursor of the next page (null on the last). */
export const MessagePage = z.object({
  items: z.array(MessageListItem),
  next_cursor: z.string().nullable(),
});
export type MessagePage = z.infer<typeof MessagePage>;
