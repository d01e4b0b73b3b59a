import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { BrokerHealth } from "../types.js";
import type { WriteFailures } from "../write-failures.js";
import { INBOX_STREAM, INDEX_SHARDS, indexStream, STATUS_BUCKET } from "./layout.js";

/** A load balancer's health check must get an answer, even from a server that stopped answering. */
const PROBE_TIMEOUT_MS = 2_000;

/** Submits write to these streams: if one is not reachable, some or all cannot be accepted. */
const STREAMS = [
  INBOX_STREAM,
  ...Array.from({ length: INDEX_SHARDS }, (_, shard) => indexStream(shard)),
  `KV_${STATUS_BUCKET}`,
];
/** How the detail names them all. */
const ALL_STREAMS = `${INBOX_STREAM}, ${indexStream(0)} to ${indexStream(INDEX_SHARDS - 1)}, KV_${STATUS_BUCKET}`;

/**
 * The NATS broker's health, checked live on every call: the connection (a round trip to the
 * server), then JetStream (the info of each stream a submit writes to: JetStream disabled, a stream
 * deleted or without a leader all fail here), and finally the storage refusals the publisher has
 * seen recently (JetStream answers those writes while its streams still look fine).
 */
export class NatsHealth {
  private jsm: Promise<JetStreamManager> | undefined;
  /** When the probes first failed, for `since`; cleared when they pass. */
  private failingSince: number | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly writes: WriteFailures,
  ) {}

  async check(): Promise<BrokerHealth> {
    const now = Date.now();
    const problems = await this.probe();
    const refusal = this.writes.current(now);
    if (!problems.failed) this.failingSince = undefined;
    else this.failingSince ??= now;
    if (!problems.failed && !refusal) return { ok: true, detail: problems.detail };
    const since = Math.min(this.failingSince ?? now, refusal?.since ?? now);
    return {
      ok: false,
      detail: {
        ...problems.detail,
        ...(refusal ? { storage: refusal.cause } : {}),
        since: new Date(since).toISOString(),
      },
    };
  }

  private async probe(): Promise<{ failed: boolean; detail: Record<string, string> }> {
    let rtt: number;
    try {
      rtt = await withTimeout(this.nc.rtt(), "the server");
    } catch (error) {
      return { failed: true, detail: { nats: `unreachable: ${messageOf(error)}` } };
    }
    // Not which server: /healthz answers anyone, and the NATS servers' addresses are the operator's.
    const nats = `reachable, rtt ${rtt} ms`;
    // A separate manager with a short timeout: the broker's waits 5 s, longer than a check may take.
    this.jsm ??= jetstreamManager(this.nc, { timeout: PROBE_TIMEOUT_MS, checkAPI: false });
    const jsm = await this.jsm;
    const results = await Promise.allSettled(
      STREAMS.map((stream) => withTimeout(jsm.streams.info(stream), `stream ${stream}`)),
    );
    const unreachable = results.flatMap((result, index) =>
      result.status === "rejected"
        ? [`stream ${STREAMS[index]} unreachable: ${messageOf(result.reason)}`]
        : [],
    );
    if (unreachable.length > 0) return { failed: true, detail: { nats, jetstream: unreachable.join("; ") } };
    return { failed: false, detail: { nats, jetstream: `streams ${ALL_STREAMS} reachable` } };
  }
}

function withTimeout<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer from ${what} within ${PROBE_TIMEOUT_MS} ms`)),
      PROBE_TIMEOUT_MS,
    );
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
