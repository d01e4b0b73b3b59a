import type { EnvelopeHeaders } from "../protocol/index.js";
import type { HandoffOfferBody } from "./messages.js";
import { AcpError } from "../protocol/index.js";
import { conflict, forbidden } from "./util.js";

/**
 * The lifecycle of a task handoff: offered → accepted | declined (or cancelled by the delegator
 * before acceptance); accepted → completed | failed. The gateway expires an offer nobody answered
 * by its `respondBy`, and an accepted task not completed by its `deadline`. Anything else is
 * refused. Pure functions; the routes store records through the broker and move the escrow that
 * goes with each state.
 */
export type HandoffStatus =
  | "offered"
  | "accepted"
  | "declined"
  | "completed"
  | "failed"
  | "cancelled"
  | "expired";
export type HandoffAction = "accept" | "decline" | "cancel" | "complete" | "fail";

export const HANDOFF_RULES: Record<
  HandoffAction,
  { from: HandoffStatus; to: HandoffStatus; by: "delegate" | "delegator" | "either" }
> = {
  accept: { from: "offered", to: "accepted", by: "delegate" },
  decline: { from: "offered", to: "declined", by: "delegate" },
  cancel: { from: "offered", to: "cancelled", by: "delegator" },
  complete: { from: "accepted", to: "completed", by: "delegate" },
  fail: { from: "accepted", to: "failed", by: "either" },
};

export interface HandoffEvent {
  status: HandoffStatus | "progress" | "delivered";
  /** The acting agent, or `gateway` for what the gateway did (delivering a queued offer, expiring). */
  by: string;
  at: string;
  /** The signed message behind it; none for what the gateway did by itself. */
  messageId?: string;
  reason?: string;
  progress?: number;
  note?: string;
}

export interface HandoffRecord {
  handoffId: string;
  delegator: string;
  delegate: string;
  delegatorPrincipal: string;
  delegatePrincipal: string;
  title?: string;
  requires: string[];
  /** Credits in escrow for this task (0: none). */
  escrow: number;
  status: HandoffStatus;
  /** The offer expires then unless accepted or declined. */
  respondBy: string;
  /** The accepted task expires then unless completed: the offer's, else set at acceptance. */
  deadline?: string;
  /**
   * `queued`: the offer waits at the gateway until the delegate (offline when it was made) has
   * completed the handshake with the delegator; it is delivered then. Absent: delivered.
   */
  delivery?: "queued";
  /** Set when it expired: what lapsed (the offer or the accepted task) and when it was due. */
  expiry?: { of: "offer" | "task"; due: string };
  /** The parties still to be told that the handoff expired (the gateway's notification). */
  toTell?: string[];
  /** Which gateway is telling a party right now, until when (so two gateways do not both tell it). */
  telling?: Record<string, { by: string; until: string }>;
  createdAt: string;
  updatedAt: string;
  /** The signed `agent.handoff` (completed / remaining / context) as delivered. */
  offer: { messageId: string; envelope: Record<string, unknown> };
  events: HandoffEvent[];
  progress?: { percent: number; note?: string; at: string };
  result?: unknown;
  reason?: string;
}

export const HANDOFF_KEY = (handoffId: string) => `h.${handoffId}`;

/** How long offers and accepted tasks live when the offer does not say (the gateway's options). */
export interface HandoffLimits {
  /** From the offer to its expiry. Default 24 hours. */
  offerTtlMs: number;
  /** From the acceptance to the task's expiry. Default 7 days. */
  taskTtlMs: number;
}

export const DEFAULT_HANDOFF_LIMITS: HandoffLimits = {
  offerTtlMs: 24 * 3_600_000,
  taskTtlMs: 7 * 24 * 3_600_000,
};

/** The latest respondBy or deadline an offer may name. */
const MAX_AHEAD_MS = 365 * 24 * 3_600_000;

/** The offer's respondBy and deadline, checked against `now`: each in the future, the deadline after respondBy. */
export function checkDeadlines(
  task: HandoffOfferBody["task"],
  limits: HandoffLimits,
  now: Date,
): { respondBy: string; deadline?: string } {
  const at = (field: "respondBy" | "deadline") => {
    const value = task[field];
    if (value === undefined) return undefined;
    const ms = Date.parse(value);
    if (ms <= now.getTime() || ms > now.getTime() + MAX_AHEAD_MS)
      throw badTime(field, "must be in the future, within a year");
    return ms;
  };
  const deadline = at("deadline");
  const given = at("respondBy");
  if (given !== undefined && deadline !== undefined && deadline <= given)
    throw badTime("deadline", "must be after respondBy");
  // An offer is never open longer than the task it offers.
  const respondBy =
    given ?? Math.min(now.getTime() + limits.offerTtlMs, deadline ?? Number.POSITIVE_INFINITY);
  return {
    respondBy: new Date(respondBy).toISOString(),
    ...(deadline !== undefined ? { deadline: new Date(deadline).toISOString() } : {}),
  };
}

function badTime(field: string, message: string): AcpError {
  return new AcpError("InvalidParams", `task.${field} ${message}`, {
    problems: [{ path: `/params/body/task/${field}`, message }],
  });
}

export function newHandoff(
  parties: { delegator: string; delegatorPrincipal: string; delegate: string; delegatePrincipal: string },
  body: HandoffOfferBody,
  headers: EnvelopeHeaders,
  envelope: Record<string, unknown>,
  due: { respondBy: string; deadline?: string },
  now: Date,
): HandoffRecord {
  return {
    handoffId: body.task.handoffId,
    ...parties,
    ...(body.task.title !== undefined ? { title: body.task.title } : {}),
    requires: body.task.requires,
    escrow: body.task.escrow,
    status: "offered",
    ...due,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    offer: { messageId: headers["message-id"], envelope },
    events: [
      { status: "offered", by: parties.delegator, at: headers.timestamp, messageId: headers["message-id"] },
    ],
  };
}

export function counterpartOf(record: HandoffRecord, agentId: string): string {
  return record.delegator === agentId ? record.delegate : record.delegator;
}

export function transition(
  record: HandoffRecord,
  action: HandoffAction,
  by: string,
  details: { reason?: string; result?: unknown; messageId: string; at: string },
  now: Date,
  limits: HandoffLimits = DEFAULT_HANDOFF_LIMITS,
): HandoffRecord {
  const rule = HANDOFF_RULES[action];
  const role = by === record.delegate ? "delegate" : by === record.delegator ? "delegator" : undefined;
  if (!role) throw forbidden(`${by} is neither delegator nor delegate of handoff ${record.handoffId}`);
  if (rule.by !== "either" && rule.by !== role) {
    throw forbidden(`only the ${rule.by} may ${action} handoff ${record.handoffId}; ${by} is the ${role}`);
  }
  if (record.status !== rule.from) {
    throw conflict(
      `cannot ${action} handoff ${record.handoffId}: it is ${record.status}, and ${action} is allowed only when ${rule.from}`,
      { status: record.status },
    );
  }
  return {
    ...record,
    status: rule.to,
    updatedAt: now.toISOString(),
    // An accepted task is due by the offer's deadline, else the gateway's time after acceptance.
    ...(rule.to === "accepted" && record.deadline === undefined
      ? { deadline: new Date(now.getTime() + limits.taskTtlMs).toISOString() }
      : {}),
    ...(details.reason !== undefined ? { reason: details.reason } : {}),
    ...(details.result !== undefined ? { result: details.result } : {}),
    events: [
      ...record.events,
      {
        status: rule.to,
        by,
        at: details.at,
        messageId: details.messageId,
        ...(details.reason !== undefined ? { reason: details.reason } : {}),
      },
    ],
  };
}

/** What is overdue at `now`: an offer past its respondBy, an accepted task past its deadline. */
export function overdue(record: HandoffRecord, now: Date): HandoffRecord["expiry"] {
  const past = (iso: string | undefined) => iso !== undefined && Date.parse(iso) <= now.getTime();
  if (record.status === "offered" && past(record.respondBy)) return { of: "offer", due: record.respondBy };
  if (record.status === "accepted" && record.deadline !== undefined && past(record.deadline))
    return { of: "task", due: record.deadline };
  return undefined;
}

/**
 * The gateway expires an overdue handoff. Both parties are to be told, except the delegate of an
 * offer still queued (it never received it).
 */
export function expire(record: HandoffRecord, now: Date): HandoffRecord {
  const expiry = overdue(record, now);
  if (!expiry) throw conflict(`handoff ${record.handoffId} is ${record.status} and not overdue`);
  const { delivery, ...rest } = record;
  const expired: HandoffRecord = { ...rest, status: "expired", expiry, updatedAt: now.toISOString() };
  const reason = expiryReason(expired);
  return {
    ...expired,
    reason,
    toTell: delivery === "queued" ? [record.delegator] : [record.delegator, record.delegate],
    events: [...record.events, { status: "expired", by: "gateway", at: now.toISOString(), reason }],
  };
}

/** One sentence for people: what expired, when it was due, and where the escrow went. */
export function expiryReason(record: HandoffRecord): string {
  const task = record.title ? `the task "${record.title}"` : "the task";
  const refund = record.escrow > 0 ? `; ${record.escrow} credits went back to ${record.delegator}` : "";
  return record.expiry?.of === "task"
    ? `${record.delegate} did not complete ${task} for ${record.delegator} by its deadline ${record.expiry.due}${refund}`
    : `${record.delegator}'s offer of ${task} to ${record.delegate} was not answered by ${record.expiry?.due ?? record.respondBy}${refund}`;
}

export function withProgress(
  record: HandoffRecord,
  by: string,
  progress: { percent: number; note?: string; messageId: string; at: string },
  now: Date,
): HandoffRecord {
  if (by !== record.delegate)
    throw forbidden(`only the delegate reports progress on handoff ${record.handoffId}`);
  if (record.status !== "accepted") {
    throw conflict(
      `handoff ${record.handoffId} is ${record.status}; progress is reported only while accepted`,
    );
  }
  const note = progress.note !== undefined ? { note: progress.note } : {};
  return {
    ...record,
    updatedAt: now.toISOString(),
    progress: { percent: progress.percent, ...note, at: progress.at },
    events: [
      ...record.events,
      {
        status: "progress",
        by,
        at: progress.at,
        messageId: progress.messageId,
        progress: progress.percent,
        ...note,
      },
    ],
  };
}

/** What the API shows: the record (the offer's envelope only on request) and where its escrow stands. */
export type HandoffView = Omit<HandoffRecord, "offer" | "telling"> & {
  offer: { messageId: string; envelope?: Record<string, unknown> };
  escrowState: "none" | "reserved" | "held" | "released" | "refunded";
};

export function handoffView(
  record: HandoffRecord,
  escrowState: HandoffView["escrowState"],
  withEnvelope = false,
): HandoffView {
  const { offer, telling: _leases, ...rest } = record;
  return { ...rest, offer: withEnvelope ? offer : { messageId: offer.messageId }, escrowState };
}
