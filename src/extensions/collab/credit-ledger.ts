import type { Balance, Escrow, Movement, MovementKind } from "../../collab/contracts.js";
import { randomUUID } from "node:crypto";
import type { Broker, KvBucket } from "../../broker/index.js";
import { AcpError } from "../../protocol/index.js";
import type { CollabAudit } from "./audit.js";
import { bucketOf, listValues, mutate } from "./store.js";

interface LedgerState {
  accounts: Record<string, number>;
  escrows: Record<string, Escrow>;
  /** Movements so far: the next one's sequence number, taken in the same compare-and-set. */
  seq: number;
}

const STATE_KEY = "state";
const EMPTY: LedgerState = { accounts: {}, escrows: {}, seq: 0 };

/** Escrow credits: every principal's account, the escrows holding credits, and each movement between them. */
export class CreditLedger {
  private readonly bucket: KvBucket<LedgerState | Movement>;

  constructor(
    broker: Broker,
    private readonly audit: CollabAudit,
    private readonly principalOf: (agentId: string) => Promise<string | null>,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.bucket = bucketOf<LedgerState | Movement>(broker, "ledger");
  }

  async balance(agentId: string): Promise<Balance> {
    const state = await this.state();
    const escrows = Object.values(state.escrows);
    return {
      agentId,
      balance: state.accounts[agentId] ?? 0,
      escrowed: escrows.filter((e) => e.from === agentId).reduce((n, e) => n + e.amount, 0),
      incoming: escrows
        .filter((e) => e.to === agentId && e.state === "held")
        .reduce((n, e) => n + e.amount, 0),
    };
  }

  async escrow(escrowId: string): Promise<Escrow | undefined> {
    return (await this.state()).escrows[escrowId];
  }

  /** Adds credits to an account (the admin's grant; knowledge rewards are points, not credits). */
  async grant(agentId: string, amount: number, note?: string): Promise<Movement> {
    checkAmount(amount);
    return this.move("grant", agentId, (s) => {
      s.accounts[agentId] = (s.accounts[agentId] ?? 0) + amount;
      return { amount, agent: agentId, touched: [agentId], ...(note ? { note } : {}) };
    });
  }

  /** Moves `amount` from the delegator's balance into a new escrow; Conflict if the balance is short. */
  async reserve(escrowId: string, from: string, to: string, amount: number): Promise<Movement> {
    checkAmount(amount);
    return this.move("reserve", from, (s) => {
      if (s.escrows[escrowId]) throw new AcpError("Conflict", `escrow ${escrowId} already exists`);
      const available = s.accounts[from] ?? 0;
      if (available < amount) {
        throw new AcpError("Conflict", `${from} has ${available} credits; the escrow needs ${amount}`, {
          problems: [{ path: "/params/body/task/escrow", message: `exceeds the balance of ${available}` }],
          balance: available,
        });
      }
      s.accounts[from] = available - amount;
      s.escrows[escrowId] = { from, to, amount, state: "reserved" };
      return { amount, agent: from, escrowId, from, to, touched: [from] };
    });
  }

  /** Reserved → held (the delegate accepted). Null when there is no reserved escrow (nothing moves). */
  hold(escrowId: string): Promise<Movement | null> {
    return this.settle("hold", escrowId, (s, e) => {
      if (e.state !== "reserved") return false;
      s.escrows[escrowId] = { ...e, state: "held" };
      return true;
    });
  }

  /** Held → the delegate's balance (completed). */
  release(escrowId: string): Promise<Movement | null> {
    return this.settle("release", escrowId, (s, e) => {
      if (e.state !== "held") return false;
      s.accounts[e.to] = (s.accounts[e.to] ?? 0) + e.amount;
      delete s.escrows[escrowId];
      return true;
    });
  }

  /** Reserved or held → back to the delegator (failed, declined, cancelled, or an offer that was not delivered). */
  refund(escrowId: string): Promise<Movement | null> {
    return this.settle("refund", escrowId, (s, e) => {
      s.accounts[e.from] = (s.accounts[e.from] ?? 0) + e.amount;
      delete s.escrows[escrowId];
      return true;
    });
  }

  /** Movements touching `agentId` (all of them without), oldest first. */
  async movements(agentId?: string): Promise<Movement[]> {
    const all = (await listValues(this.bucket, "m.")) as Movement[];
    return agentId === undefined
      ? all
      : all.filter((m) => m.agent === agentId || m.from === agentId || m.to === agentId);
  }

  private async state(): Promise<LedgerState> {
    return ((await this.bucket.get(STATE_KEY))?.value as LedgerState | undefined) ?? EMPTY;
  }

  private async settle(
    kind: MovementKind,
    escrowId: string,
    apply: (state: LedgerState, escrow: Escrow) => boolean,
  ): Promise<Movement | null> {
    let moved = true;
    const movement = await this.move(kind, "", (s) => {
      const escrow = s.escrows[escrowId];
      moved = escrow !== undefined && apply(s, escrow);
      if (!escrow || !moved) return undefined;
      const agent = kind === "release" ? escrow.to : escrow.from;
      return { amount: escrow.amount, agent, escrowId, from: escrow.from, to: escrow.to, touched: [agent] };
    });
    return moved ? movement : null;
  }

  /** One compare-and-set on the ledger document, then the movement record and its audit entry. */
  private async move(
    kind: MovementKind,
    fallbackAgent: string,
    apply: (
      state: LedgerState,
    ) => (Omit<Movement, "seq" | "id" | "at" | "kind" | "balances"> & { touched: string[] }) | undefined,
  ): Promise<Movement> {
    let detail: ReturnType<typeof apply>;
    const mutation = await mutate(this.bucket, STATE_KEY, (current) => {
      const next = structuredClone((current as LedgerState | undefined) ?? EMPTY);
      detail = apply(next);
      if (detail) next.seq += 1;
      if (Object.values(next.accounts).some((balance) => balance < 0)) {
        throw new AcpError("InternalError", "a ledger movement would make a balance negative");
      }
      return next;
    });
    const state = mutation.value as LedgerState;
    const at = this.now();
    const { touched, ...rest } = detail ?? { amount: 0, agent: fallbackAgent, touched: [] };
    const movement: Movement = {
      seq: state.seq,
      id: randomUUID(),
      at: at.toISOString(),
      kind,
      ...rest,
      balances: Object.fromEntries(touched.map((agent) => [agent, state.accounts[agent] ?? 0])),
    };
    if (!detail) return movement;
    await this.bucket.put(`m.${String(movement.seq).padStart(12, "0")}`, movement);
    await this.record(movement);
    return movement;
  }

  private async record(m: Movement): Promise<void> {
    const from = m.from ?? m.agent;
    const to = m.to ?? m.agent;
    const [fromPrincipal, toPrincipal] = await Promise.all([this.principalOf(from), this.principalOf(to)]);
    const what: Record<MovementKind, string> = {
      grant: `Granted ${m.amount} credits to ${m.agent}`,
      reserve: `Reserved ${m.amount} credits of ${from} in escrow ${m.escrowId} for ${to}`,
      hold: `Held ${m.amount} credits of ${from} in escrow ${m.escrowId} for ${to}`,
      release: `Released ${m.amount} credits of escrow ${m.escrowId} to ${to}`,
      refund: `Refunded ${m.amount} credits of escrow ${m.escrowId} to ${from}`,
    };
    const balances = Object.entries(m.balances)
      .map(([agent, balance]) => `${agent} ${balance}`)
      .join(", ");
    this.audit.record({
      method: m.kind === "grant" ? "collab.ledger.grant" : `collab.escrow.${m.kind}`,
      from: { agent: from, principal: fromPrincipal },
      to: { agent: to, principal: toPrincipal },
      id: m.escrowId ?? m.id,
      summary: `${what[m.kind]}${balances ? `; balance ${balances}` : ""}.`,
    });
  }
}

function checkAmount(amount: number): void {
  if (!Number.isInteger(amount) || amount < 1 || amount > 1_000_000_000) {
    throw new AcpError(
      "InvalidParams",
      `amount must be a whole number of credits from 1 to 1e9, not ${amount}`,
      {
        problems: [{ path: "/amount", message: "must be a whole number from 1 to 1000000000" }],
      },
    );
  }
}
