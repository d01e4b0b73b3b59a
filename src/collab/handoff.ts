import type { EnvelopeHeaders } from "../protocol/index.js";
import type { HandoffOfferBody } from "./messages.js";
import { conflict, forbidden } from "./util.js";

/**
 * The lifecycle of a task handoff: offered → accepted | declined (or cancelled by the delegator
 * before acceptance); accepted → completed | failed. Anything else is refused. Pure functions; the
 * routes store records through the broker and move the escrow that goes with each state.
 */
export type HandoffStatus = "offered" | "accepted" | "declined" | "completed" | "failed" | "cancelled";
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
  status: HandoffStatus | "progress";
  by: string;
  at: string;
  messageId: string;
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

export function newHandoff(
  parties: { delegator: string; delegatorPrincipal: string; delegate: string; delegatePrincipal: string },
  body: HandoffOfferBody,
  headers: EnvelopeHeaders,
  envelope: Record<string, unknown>,
  now: Date,
): HandoffRecord {
  return {
    handoffId: body.task.handoffId,
    ...parties,
    ...(body.task.title !== undefined ? { title: body.task.title } : {}),
    requires: body.task.requires,
    escrow: body.task.escrow,
    status: "offered",
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
export type HandoffView = Omit<HandoffRecord, "offer"> & {
  offer: { messageId: string; envelope?: Record<string, unknown> };
  escrowState: "none" | "reserved" | "held" | "released" | "refunded";
};

export function handoffView(
  record: HandoffRecord,
  escrowState: HandoffView["escrowState"],
  withEnvelope = false,
): HandoffView {
  const { offer, ...rest } = record;
  return { ...rest, offer: withEnvelope ? offer : { messageId: offer.messageId }, escrowState };
}
