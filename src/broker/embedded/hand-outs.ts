import { ackWaitFor, type BrokerPolicy } from "../policy.js";
import type { CommitQueue } from "./commit-queue.js";
import type { LoadedMessage, MessageRow, MessageTable } from "./messages.js";

/** What handing a message out and taking it back need from the broker. */
export interface HandOutHost {
  readonly policy: BrokerPolicy;
  readonly table: MessageTable;
  readonly commits: CommitQueue;
  /** Tells status watchers (`events`) that a message's status changed. */
  statusChanged(row: MessageRow): void;
}

/** A hand-out not acknowledged yet; `taken`: the consumer received it. */
export interface HandOut {
  row: LoadedMessage;
  taken: boolean;
}

/** Marks `row` handed out now (one more attempt, its ack wait running); returns that ack wait. */
export function handOut(row: LoadedMessage, now: number, host: HandOutHost): number {
  const wait = ackWaitFor(host.policy, row.attempts + 1);
  row.attempts += 1;
  row.status = "delivered";
  row.delivered_at ??= now;
  row.next_attempt_at = now + wait;
  recordDelivery(row, host);
  host.statusChanged(row);
  return wait;
}

/**
 * Written within DEFERRED_WRITE_DELAY_MS, from the row as it is then: if the ack came first, the
 * ack's own write records the delivery and this one is skipped. Losing it in a crash only means one
 * more delivery after the restart.
 */
export function recordDelivery(row: LoadedMessage, host: HandOutHost): void {
  host.commits.defer(() => row.status === "delivered" && host.table.markDelivered(row));
}

/**
 * Gives hand-outs back (`entries` in seq order), due at once. The oldest one the agent received
 * counts as an attempt, as if its ack wait had run out: it is the message the agent was working on,
 * so one that kills the agent's connection every time is dead-lettered after `maxDeliver` tries.
 * The others were only queued behind it: uncounted, they come back with the same attempt number,
 * so a flapping connection costs at most one attempt per drop, on a message the agent has not got
 * past.
 */
export function giveBackRows(entries: readonly HandOut[], host: HandOutHost): void {
  const now = Date.now();
  let counted = false;
  for (const { row, taken } of entries) {
    if (row.status !== "delivered" || row.next_attempt_at === null) continue;
    if (taken && !counted) {
      counted = true;
      row.next_attempt_at = Math.min(row.next_attempt_at, now);
    } else if (row.next_attempt_at > now) {
      row.attempts -= 1;
      row.next_attempt_at = null;
    } else {
      continue; // its ack wait has run out: counted already, and due
    }
    recordDelivery(row, host);
  }
}
