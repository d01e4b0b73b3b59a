import { BrokerError, notRecipient } from "../errors.js";
import { type BrokerPolicy, effectiveStatus } from "../policy.js";
import type { MessageRecord, MessageRef } from "../types.js";
import type { CommitQueue } from "./commit-queue.js";
import { type LoadedMessage, type MessageRow, type MessageTable, toRecord } from "./messages.js";
import { failedFields } from "./retention.js";
import type { UsageCounters } from "./usage.js";

export type Settlement = { action: "ack" } | { action: "reject"; detail: string };

/** Where an agent's hand-outs are held in memory: its inbox, its routed receiver. */
export interface HandOutHolder {
  live(message: MessageRef): LoadedMessage | undefined;
  settled(message: MessageRef): void;
  extend(message: MessageRef): boolean;
}

export interface SettlementHost {
  readonly policy: BrokerPolicy;
  readonly table: MessageTable;
  readonly commits: CommitQueue;
  readonly counters: UsageCounters | undefined;
  /** Tells status watchers (`events`) that a message's status changed. */
  statusChanged(row: MessageRow): void;
  /** The agent's inbox and routed receiver in this process that may hold a message handed out. */
  holdersOf(agentId: string): HandOutHolder[];
}

/**
 * Acknowledging, rejecting and extending a delivery. When the recipient's hand-out is held in
 * memory here, that row is the current state: it is settled at once (so its pending delivery write
 * is skipped) and one UPDATE records everything. Otherwise the row is read and checked inside the
 * commit batch, so an ack right after a submit (same tick) still finds the message.
 */
export class EmbeddedSettlement {
  constructor(private readonly host: SettlementHost) {}

  async settle(agentId: string, message: MessageRef, settlement: Settlement): Promise<MessageRecord> {
    const { host } = this;
    const { id } = message;
    const holders = host.holdersOf(agentId);
    const live = holders.map((holder) => holder.live(message)).find((row) => row !== undefined);
    const settled = (row: MessageRow) => {
      for (const holder of holders) holder.settled(message);
      host.counters?.settled(row);
      host.statusChanged(row);
    };
    if (live) {
      const now = Date.now();
      // "already": a second ack while the first one's write is still in the batch.
      if (this.checkSettleable(live, agentId, settlement, now) === "already") {
        return toRecord(live, host.policy, now);
      }
      Object.assign(live, settledFields(settlement, now));
      await host.commits.run(
        () => {
          if (!this.write(live, settlement, now)) {
            throw new BrokerError(
              "invalid_state",
              `message ${id} expired before it was ${settlement.action}ed`,
            );
          }
        },
        () => settled(live),
      );
      return toRecord(live, host.policy, Date.now());
    }
    const { row } = await host.commits.run(
      () => {
        const row = host.table.byRef(message);
        if (!row) throw new BrokerError("not_found", `no message ${id}`);
        const now = Date.now();
        if (this.checkSettleable(row, agentId, settlement, now) === "already") return { row, changed: false };
        this.write(row, settlement, now);
        return { row: { ...row, ...settledFields(settlement, now) }, changed: true };
      },
      (result) => {
        if (result.changed) settled(result.row);
      },
    );
    return toRecord(row, host.policy, Date.now());
  }

  /** Restarts the ack wait of a hand-out held here; otherwise says why not, as `ack` would. */
  working(agentId: string, message: MessageRef): void {
    if (this.host.holdersOf(agentId).some((holder) => holder.extend(message))) return;
    this.host.commits.flush();
    const row = this.host.table.byRef(message);
    if (!row) throw new BrokerError("not_found", `no message ${message.id}`);
    checkRecipient(row, agentId);
    const status = effectiveStatus(this.host.policy, row.status, row.queued_at, Date.now());
    throw new BrokerError("invalid_state", `message ${message.id} is ${status}, not out for delivery`);
  }

  /** Only the recipient settles, only unsettled messages; acknowledging twice is "already". */
  private checkSettleable(
    row: MessageRow,
    agentId: string,
    settlement: Settlement,
    now: number,
  ): "settle" | "already" {
    checkRecipient(row, agentId);
    const status = effectiveStatus(this.host.policy, row.status, row.queued_at, now);
    if (settlement.action === "ack" && status === "acknowledged") return "already";
    if (status !== "queued" && status !== "delivered") {
      throw new BrokerError(
        "invalid_state",
        `message ${row.id} is ${status}; it can no longer be ${settlement.action}ed`,
      );
    }
    return "settle";
  }

  private write(row: MessageRow, settlement: Settlement, now: number): boolean {
    return settlement.action === "ack"
      ? this.host.table.markAcknowledged(row, now)
      : this.host.table.markFailed(row, now, "rejected", settlement.detail);
  }
}

/** Only the recipient settles; to a third agent the message does not exist. */
function checkRecipient(row: MessageRow, agentId: string): void {
  if (row.recipient !== agentId) throw notRecipient(row.sender, row.id, agentId);
}

function settledFields(settlement: Settlement, now: number): Partial<MessageRow> {
  return settlement.action === "ack"
    ? { status: "acknowledged", acknowledged_at: now, next_attempt_at: null }
    : failedFields(now, "rejected", settlement.detail);
}
