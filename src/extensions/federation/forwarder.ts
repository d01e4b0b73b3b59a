/**
 * One peer's forwarder: takes the messages waiting in the peer's outbound queue (a broker inbox,
 * `_fed_<domain>`, so as durable as any inbox on either broker) in order and hands them to the
 * peer in batches, one batch at a time, so a sender's messages reach it in the order they were
 * accepted here. While the peer cannot be reached it retries the same batch with exponential
 * backoff, keeping its place in the queue (and telling the broker it is still working on what it
 * holds, so nothing is redelivered or dead-lettered meanwhile) until the messages' retention ends:
 * a message past it is never sent (the broker shows it `expired`, as any message whose recipient
 * did not take it in time).
 * What the peer stored is acknowledged here (forwarded); what it refused for good ends `failed`
 * with a dead letter naming the peer's answer; what it refused for now (rate, storage) is retried.
 */
import type { Logger } from "pino";
import type { Broker, Delivery, Inbox } from "../../broker/index.js";
import { ErrorCode, type ErrorObject } from "../../protocol/index.js";
import { MAX_TRANSFER_MESSAGES, type TransferOutcome, TransferResponse } from "../../wire/federation.js";
import { peerInbox } from "./directory.js";
import type { ForwardedLog } from "./forwarded.js";
import type { PeerLinks } from "./links.js";
import type { PeerClient } from "./peer-client.js";
import type { PeerGate } from "./peer-gate.js";

/** A batch's envelopes together, at most (below the receiver's transfer limit, room for escaping). */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** Messages taken from the queue and not yet settled, at most. */
const WINDOW = 256;
/** Refusals that say "not now" rather than "never": the message waits and is sent again. */
const TRANSIENT = new Set<number>([
  ErrorCode.RateLimited,
  ErrorCode.StorageUnavailable,
  ErrorCode.InternalError,
  ErrorCode.Timeout,
]);

export interface RetryOptions {
  /** The first wait after a failure. Default 1 s. */
  initialMs?: number;
  /** The longest wait. Default 5 minutes. */
  maxMs?: number;
}

export interface ForwarderDeps {
  broker: Broker;
  gate: PeerGate;
  client: PeerClient;
  links: PeerLinks;
  forwarded: ForwardedLog;
  logger: Logger;
  retry: Required<RetryOptions>;
  /** The broker's retention: a message queued longer ago than this has expired. */
  retentionMs: number;
}

export class Forwarder {
  private readonly inboxName: string;
  private inbox: Inbox | undefined;
  /** Taken from the queue and not settled yet, in queue order. */
  private held: Delivery[] = [];
  private wakeSender: (() => void) | undefined;
  /** Failed attempts in a row, and the wait before the next one. */
  private failures = 0;
  private waitMs = 0;
  private closed = false;
  private running: Promise<void> | undefined;
  private keepAlive: NodeJS.Timeout | undefined;

  constructor(
    readonly domain: string,
    private readonly deps: ForwarderDeps,
  ) {
    this.inboxName = peerInbox(domain);
  }

  async start(): Promise<void> {
    const inbox = await this.deps.broker.openInbox(this.inboxName, { maxInFlight: WINDOW });
    if (this.closed) {
      // Closed while the inbox opened (the gateway stopping, or the peer removed): nothing runs.
      await inbox.close();
      return;
    }
    this.inbox = inbox;
    const pump = this.pump(this.inbox);
    const send = this.send();
    this.running = Promise.all([pump, send]).then(() => undefined);
    // What is held waits for the peer, not for a consumer: its ack wait must not run out meanwhile.
    this.keepAlive = setInterval(
      () => {
        for (const d of this.held) this.deps.broker.working(this.inboxName, d).catch(() => undefined);
      },
      Math.max(100, Math.floor(this.deps.broker.ackWaitMs / 3)),
    );
    this.keepAlive.unref();
  }

  /** The peer called: it is up, so whatever waits for it is sent now. */
  wake(): void {
    this.failures = 0;
    this.waitMs = 0;
    this.wakeSender?.();
  }

  /** The oldest message held (taken from the queue, not yet at the peer), for the link's health. */
  get oldestHeld(): string | undefined {
    return this.held[0]?.queuedAt;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.keepAlive);
    this.wakeSender?.();
    await this.inbox?.close();
    await this.running?.catch(() => undefined);
  }

  private async pump(inbox: Inbox): Promise<void> {
    try {
      for await (const delivery of inbox) {
        if (this.closed) break;
        this.held.push(delivery);
        this.deps.links.holding(this.domain, this.oldestHeld);
        this.wakeSender?.();
      }
    } catch (err) {
      if (!this.closed)
        this.deps.logger.error({ peer: this.domain, err: (err as Error).message }, "federation queue failed");
    }
  }

  private async send(): Promise<void> {
    while (!this.closed) {
      if (this.held.length === 0) {
        await this.sleep(undefined);
        continue;
      }
      if (this.waitMs > 0) {
        const ms = this.waitMs;
        this.waitMs = 0;
        await this.sleep(ms);
        continue;
      }
      this.dropExpired();
      const batch = this.nextBatch();
      if (batch.length === 0) continue;
      try {
        const results = await this.transfer(batch);
        await this.settle(batch, results);
        this.failures = 0;
      } catch (err) {
        this.deps.links.failed(this.domain, (err as Error).message);
        const { initialMs, maxMs } = this.deps.retry;
        const delay = Math.min(initialMs * 2 ** Math.min(this.failures, 30), maxMs);
        this.failures++;
        // ±20% so many gateways retrying one peer do not call it in step.
        this.waitMs = Math.round(delay * (0.8 + Math.random() * 0.4));
      }
    }
  }

  /** Waits `ms` (or until woken when undefined), or until `wake`/`close`. */
  private sleep(ms: number | undefined): Promise<void> {
    return new Promise((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        if (self.wakeSender === done) self.wakeSender = undefined;
        resolve();
      }
      this.wakeSender = done;
    });
  }

  /**
   * Lets go of what expired while it waited (the peer down): the broker already reads it `expired`
   * and will not hand it out again; sending it now would deliver what its sender was told expired.
   */
  private dropExpired(): void {
    const now = Date.now();
    const expired = this.held.filter((d) => now >= Date.parse(d.queuedAt) + this.deps.retentionMs);
    if (expired.length === 0) return;
    const gone = new Set(expired);
    this.held = this.held.filter((d) => !gone.has(d));
    this.deps.links.holding(this.domain, this.oldestHeld);
    this.deps.logger.info(
      { peer: this.domain, ids: expired.slice(0, 20).map((d) => d.id), count: expired.length },
      "messages expired before the peer could take them",
    );
  }

  private nextBatch(): Delivery[] {
    const batch: Delivery[] = [];
    let bytes = 0;
    for (const delivery of this.held) {
      if (batch.length === MAX_TRANSFER_MESSAGES) break;
      if (batch.length > 0 && bytes + delivery.envelope.length > MAX_BATCH_BYTES) break;
      batch.push(delivery);
      bytes += delivery.envelope.length;
    }
    return batch;
  }

  private async transfer(batch: Delivery[]): Promise<TransferOutcome[]> {
    const peer = await this.deps.gate.admitted(this.domain);
    const body = JSON.stringify({ messages: batch.map((d) => d.envelope) });
    const answer = await this.deps.client.call(
      peer.endpoint as string,
      this.domain,
      "POST",
      "/transfers",
      body,
      TransferResponse,
    );
    if (answer.results.length !== batch.length) {
      throw new Error(
        `${this.domain} answered ${answer.results.length} results for ${batch.length} messages`,
      );
    }
    this.deps.links.contact(this.domain);
    return answer.results;
  }

  /** Acknowledges what the peer stored, dead-letters what it refused for good, keeps the rest. */
  private async settle(batch: Delivery[], results: TransferOutcome[]): Promise<void> {
    const stored: Delivery[] = [];
    const refused: { delivery: Delivery; error: ErrorObject | undefined }[] = [];
    const retry = new Set<Delivery>();
    batch.forEach((delivery, i) => {
      const result = results[i] as TransferOutcome;
      if (result.outcome !== "refused") stored.push(delivery);
      else if (result.error && TRANSIENT.has(result.error.code)) retry.add(delivery);
      else refused.push({ delivery, error: result.error });
    });
    await this.deps.forwarded.forwarded(
      this.domain,
      stored.map((d) => ({ from: d.from, id: d.id, to: recipientOf(d) })),
    );
    const { broker } = this.deps;
    await Promise.all([
      ...stored.map((d) => broker.ack(this.inboxName, d).catch(() => undefined)),
      ...refused.map(({ delivery, error }) =>
        broker
          .reject(
            this.inboxName,
            delivery,
            `${this.domain} refused it: ${error ? `${error.code} ${error.message}` : "no reason given"}`.slice(
              0,
              1000,
            ),
          )
          .catch(() => undefined),
      ),
    ]);
    const settled = new Set(batch.filter((d) => !retry.has(d)));
    this.held = this.held.filter((d) => !settled.has(d));
    this.deps.links.forwarded(this.domain, stored.length);
    for (const { delivery, error } of refused) {
      this.deps.links.refused(this.domain, `peer:${error?.code ?? "none"}`);
      this.deps.logger.info(
        { peer: this.domain, id: delivery.id, code: error?.code },
        "peer refused a message",
      );
    }
    this.deps.links.holding(this.domain, this.oldestHeld);
    if (retry.size > 0) throw new Error(`${this.domain} asked to send ${retry.size} message(s) again later`);
  }
}

function recipientOf(delivery: Delivery): string {
  try {
    type Carrier = { headers?: Record<string, unknown> };
    const parsed = JSON.parse(delivery.envelope) as {
      params?: Carrier;
      result?: Carrier;
      error?: { data?: Carrier };
    };
    const to = (parsed.params ?? parsed.result ?? parsed.error?.data)?.headers?.["recipient-id"];
    return typeof to === "string" ? to : delivery.to;
  } catch {
    return delivery.to;
  }
}
