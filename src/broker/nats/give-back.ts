import type { JsMsg } from "@nats-io/jetstream";
import type { MessageRef } from "../types.js";
import type { NatsInboxHost } from "./inbox.js";
import { uncounted } from "./status-store.js";

/** A hand-out being given back: what the inbox knew of it. */
export interface GivenBack {
  /** The message's `refKey` (sender and id). */
  key: string;
  message: MessageRef;
  msg: JsMsg;
  /** Its ack subject, as recorded in the status record. */
  ackSubject: string | undefined;
  /** When its ack wait ends. */
  dueAt: number;
  /** The consumer received it. */
  taken: boolean;
}

/**
 * Gives deliveries back for immediate redelivery, in stream order (with `unprepared`: what was
 * pulled and never handed out). The oldest one the agent received counts as an attempt, as if its
 * ack wait had run out: it is the message the agent was working on, so one that kills the agent's
 * connection every time is dead-lettered after `maxDeliver` tries. The others were only queued
 * behind it and are uncounted in their status record first, so they come back with the same
 * attempt number: a flapping connection costs at most one attempt per drop, on a message the agent
 * has not got past. If an uncount fails, that redelivery simply counts as the next attempt.
 */
export async function giveBackDeliveries(
  agentId: string,
  entries: readonly GivenBack[],
  unprepared: readonly JsMsg[],
  host: NatsInboxHost,
): Promise<void> {
  const handedOut = [...entries].sort((a, b) => a.msg.seq - b.msg.seq);
  let rest = handedOut;
  // The head is the oldest received one still unacknowledged: an ack already under way (its
  // status write is ahead in the record's lock) settles it first, then the next one is the head.
  while (rest.length > 0) {
    const [entry, ...after] = rest;
    rest = after;
    if (entry && (await uncount(agentId, entry, entry.taken, host)) === "head") break;
  }
  await Promise.all(rest.map((entry) => uncount(agentId, entry, false, host)));
  const back = [...handedOut.map((entry) => entry.msg), ...unprepared].sort((a, b) => a.seq - b.seq);
  if (back.length > 0) await host.redeliverNow(agentId, back);
}

/**
 * Leaves the hand-out counted if it may be the head (`asHead`), else uncounts it; past its ack
 * wait it stays counted either way. "settled": no longer this inbox's unacknowledged hand-out.
 */
async function uncount(
  agentId: string,
  entry: GivenBack,
  asHead: boolean,
  host: NatsInboxHost,
): Promise<"head" | "uncounted" | "settled"> {
  const now = Date.now();
  try {
    return await host.statuses.mutate(entry.message, (current) => {
      const value = current?.value;
      // Only the hand-out made here: another gateway may have settled the message since.
      if (value?.status !== "delivered" || value.ackSubject !== entry.ackSubject)
        return { result: "settled" };
      if (asHead) return { result: "head" };
      if (now >= entry.dueAt) return { result: "uncounted" }; // counted by its ack wait already
      return { next: uncounted(value), result: "uncounted" };
    });
  } catch (error) {
    host.warn(
      `inbox ${agentId}: could not give back ${entry.message.id}, its redelivery counts as an attempt: ${String(error)}`,
    );
    return "settled";
  }
}
