import type { KvBucket } from "../../broker/index.js";
import { expire, HANDOFF_KEY, type HandoffRecord, overdue } from "../../collab/handoff.js";
import { CollabMethod, type HandoffExpiredBody } from "../../collab/messages.js";
import { AcpError, type EnvelopeHeaders, isRemoteRef, type MethodMessage } from "../../protocol/index.js";
import { settleEscrow, trackTask } from "./handoff-effects.js";
import type { Action } from "./intake.js";
import { CollabNotary } from "./notary.js";
import type { CollabServices } from "./services.js";
import { listValues, mutate } from "./store.js";

/** How often the handoffs are looked through for due work (default). */
export const DEFAULT_SWEEP_MS = 5_000;
/** How long a gateway keeps the right to tell one party of an expiry before another may retry. */
const NOTICE_LEASE_MS = 60_000;

/** Thrown inside a compare-and-set to leave the record as it is (someone else got there first). */
const UNCHANGED = new Error("unchanged");

/** A record the sweeper may have work on: open (it can fall due), queued, or with parties to tell. */
function mayNeedWork(record: HandoffRecord): boolean {
  return (
    record.status === "offered" ||
    record.status === "accepted" ||
    record.delivery === "queued" ||
    (record.toTell ?? []).length > 0
  );
}

/**
 * The gateway's own work on handoffs, from their records in the broker's KV (so it survives a
 * restart and runs the same on NATS): it expires offers nobody answered by their `respondBy` and
 * accepted tasks not completed by their `deadline` (refunding the escrow, telling both parties,
 * auditing), and delivers offers queued for an offline delegate once the pair's handshake is done.
 * It keeps the records that may need work in memory, from one listing at start and a watch of
 * the bucket after (a listing per sweep would cost more, and on NATS a listing that races a
 * write can stall).
 *
 * Every gateway on one NATS sweeps; each change is a compare-and-set on the record, so exactly
 * one gateway expires (or marks delivered) a given handoff and only it refunds, audits and tells.
 * Telling a party takes a lease on it first, so a gateway that stops mid-way leaves the notice to
 * the next sweep of any gateway; a party is told once it is online (the notice follows a handshake).
 */
export class HandoffExpiry {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private stopped = false;
  private unwatch: (() => void) | undefined;
  /** The records that may need work, by key, as the watch last told. */
  private readonly open = new Map<string, HandoffRecord>();
  /** The gateway's agent that signs the notices. */
  private readonly notary: CollabNotary;

  constructor(
    private readonly services: CollabServices,
    private readonly bucket: KvBucket<HandoffRecord>,
    private readonly sweepMs = DEFAULT_SWEEP_MS,
  ) {
    this.notary = new CollabNotary(services.ctx);
  }

  /** Watches the records, then sweeps at once (what fell due while no gateway ran expires now) and every `sweepMs`. */
  async start(): Promise<void> {
    this.unwatch = await this.bucket.watch((change) => this.note(change.key, change.value), { prefix: "h." });
    for (const record of await listValues(this.bucket, "h.")) {
      // A change the watch delivered meanwhile is newer than the listing.
      if (!this.open.has(HANDOFF_KEY(record.handoffId))) this.note(HANDOFF_KEY(record.handoffId), record);
    }
    void this.sweep();
    this.timer = setInterval(() => void this.sweep(), this.sweepMs);
    this.timer.unref();
  }

  private note(key: string, record: HandoffRecord | null): void {
    if (record && mayNeedWork(record)) this.open.set(key, record);
    else this.open.delete(key);
  }

  /** Stops sweeping; notices still waiting for a handshake are given up (a later run tells). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unwatch?.();
    await this.notary.close();
    await this.sweeping;
  }

  /** One pass over the handoffs; a pass already under way is joined, not doubled. */
  sweep(): Promise<void> {
    this.sweeping ??= this.pass()
      .catch((err: unknown) => this.warn(err, "handoff sweep failed"))
      .finally(() => {
        this.sweeping = undefined;
      });
    return this.sweeping;
  }

  private async pass(): Promise<void> {
    const records = [...this.open.values()];
    const toTell: string[] = [];
    for (const record of records) {
      if (this.stopped) return;
      try {
        if (overdue(record, this.services.now())) {
          if (await this.expire(record.handoffId)) toTell.push(record.handoffId);
        } else if (record.delivery === "queued") await this.deliver(record);
        else if ((record.toTell ?? []).length > 0) toTell.push(record.handoffId);
      } catch (err) {
        this.warn(err, `handoff ${record.handoffId}`);
      }
    }
    // Notices wait for handshakes: they go out together, after every expiry of this pass is done.
    await Promise.all(
      toTell.map((id) =>
        this.tell(id).catch((err: unknown) => this.warn(err, `telling the parties of ${id}`)),
      ),
    );
  }

  /** Expires it if it is still overdue; the gateway whose write wins refunds, audits and untracks. */
  private async expire(handoffId: string): Promise<boolean> {
    const domain = this.services.ctx.registry.remote?.domain;
    const expired = await this.change(handoffId, (current) => {
      if (!overdue(current, this.services.now())) return undefined;
      const next = expire(current, this.services.now());
      // A party of another domain is told by its own gateway, whose copy expires on the same dates.
      return { ...next, toTell: (next.toTell ?? []).filter((party) => !isRemoteRef(party, domain)) };
    });
    if (!expired) return false;
    await settleEscrow(this.services, expired);
    await trackTask(this.services, expired);
    this.services.audit.record({
      method: "collab.handoff.expired",
      from: { agent: "gateway", principal: null },
      to: {
        agent: `${expired.delegator},${expired.delegate}`,
        principal: `${expired.delegatorPrincipal},${expired.delegatePrincipal}`,
      },
      id: handoffId,
      summary: expired.reason ?? `handoff ${handoffId} expired`,
    });
    return true;
  }

  /** A queued offer goes to the delegate once their handshake is complete (until then the relay refuses it). */
  private async deliver(record: HandoffRecord): Promise<void> {
    const delegator = await this.services.ctx.registry.resolve(record.delegator);
    if (!delegator || record.status !== "offered") return;
    const message = record.offer.envelope as unknown as MethodMessage;
    const action: Action<unknown> = {
      message,
      headers: message.params.headers as EnvelopeHeaders,
      body: message.params.body,
      size: Buffer.byteLength(JSON.stringify(message)),
      // It was fresh when the gateway took it in; it has waited here since.
      receivedAt: Date.parse(record.createdAt),
    };
    try {
      await this.services.intake.relay(delegator, action);
    } catch (err) {
      if (err instanceof AcpError && err.kind === "HandshakeRequired") return;
      throw err;
    }
    // Relayed twice (two gateways at once) is stored once: the broker dedups the message id.
    const delivered = await this.change(record.handoffId, (current) => {
      if (current.delivery !== "queued") return undefined;
      const { delivery: _queued, ...rest } = current;
      const at = this.services.now().toISOString();
      return { ...rest, updatedAt: at, events: [...rest.events, { status: "delivered", by: "gateway", at }] };
    });
    if (!delivered) return;
    this.services.audit.record({
      method: "collab.handoff.delivered",
      from: { agent: delivered.delegator, principal: delivered.delegatorPrincipal },
      to: { agent: delivered.delegate, principal: delivered.delegatePrincipal },
      id: delivered.handoffId,
      messageId: delivered.offer.messageId,
      summary: `${delivered.delegator}'s offer${delivered.title ? ` of "${delivered.title}"` : ""} reached ${delivered.delegate} once their handshake was complete`,
    });
  }

  /** Tells each party still to be told that is online; a lease keeps two gateways from both telling. */
  private async tell(handoffId: string): Promise<void> {
    const record = (await this.bucket.get(HANDOFF_KEY(handoffId)))?.value;
    await Promise.all((record?.toTell ?? []).map((party) => this.tellOne(handoffId, party)));
  }

  /** Takes a lease on telling `party`, tells it, then strikes it off; one that is offline waits for a later sweep. */
  private async tellOne(handoffId: string, party: string): Promise<void> {
    if ((await this.services.ctx.presence.get(party)).state === "offline") return;
    const lease = `${party}@${this.services.ctx.gatewayId}`;
    const claimed = await this.change(handoffId, (current) => {
      const now = this.services.now().getTime();
      const held = current.telling?.[party];
      if (!current.toTell?.includes(party) || (held !== undefined && Date.parse(held.until) > now))
        return undefined;
      const until = new Date(now + NOTICE_LEASE_MS).toISOString();
      return { ...current, telling: { ...current.telling, [party]: { by: lease, until } } };
    });
    if (!claimed?.expiry) return;
    const body: HandoffExpiredBody = {
      handoffId,
      ...(claimed.title !== undefined ? { title: claimed.title } : {}),
      delegator: claimed.delegator,
      delegate: claimed.delegate,
      expired: claimed.expiry.of,
      due: claimed.expiry.due,
      refunded: claimed.escrow,
    };
    try {
      await this.notary.notify(party, CollabMethod.handoffExpired, { ...body }, claimed.reason ?? "");
    } catch (err) {
      // The lease runs out and a later sweep (of any gateway) tries again.
      this.warn(err, `telling ${party} that handoff ${handoffId} expired`);
      return;
    }
    await this.change(handoffId, (current) => {
      if (current.telling?.[party]?.by !== lease) return undefined;
      const { [party]: _told, ...telling } = current.telling;
      return { ...current, toTell: (current.toTell ?? []).filter((p) => p !== party), telling };
    });
  }

  /** A compare-and-set on one record; `next` returns undefined to leave it. The new value if written. */
  private async change(
    handoffId: string,
    next: (current: HandoffRecord) => HandoffRecord | undefined,
  ): Promise<HandoffRecord | undefined> {
    try {
      const mutation = await mutate(this.bucket, HANDOFF_KEY(handoffId), (current) => {
        const value = current && next(current);
        if (!value) throw UNCHANGED;
        return value;
      });
      return mutation.value;
    } catch (err) {
      if (err === UNCHANGED) return undefined;
      throw err;
    }
  }

  private warn(err: unknown, what: string): void {
    this.services.ctx.logger.warn({ err: (err as Error).message }, what);
  }
}
