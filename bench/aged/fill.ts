/**
 * Builds a week-old store, run as its own process (`node fill.js '<config JSON>'`) because it sets
 * the clock: `Date.now` follows the planned week, so everything the broker stamps (queued,
 * delivered, acknowledged) and every relay audit entry carries the time it would have had.
 *
 * Everything goes through the product's own write paths, nothing is written to a file directly:
 * agents are registered with the gateway's Registry, handshakes observed by its HandshakeGate, and
 * each relayed message's audit entry (the relay's own `relayedEntryFor`) appended to the sender's
 * relay audit log under `<data>/relay-audit`. Messages take one of two paths:
 * - `broker` (AGED_FILL=broker): submitted to the broker, delivered through each recipient's inbox
 *   and acknowledged (or rejected) there, as a running gateway would;
 * - `bulk` (the default): the same rows written with the broker's own statements (its MessageTable:
 *   `insert`, then `markAcknowledged` or `markFailed` as the recipient's settlement writes them), a
 *   thousand messages per commit, without inboxes; each message is delivered and settled at the
 *   moment it was queued. test/bench/aged-fill.test.ts holds the two paths' rows side by side.
 * On NATS the envelopes come from an embedded fill (fill-replay.ts), so both brokers hold the same week.
 *
 * The mix: most messages acknowledged; 1.5% rejected by their recipient (dead-lettered); ~30
 * agents go offline at some point of the week, so what reaches them afterwards stays queued (and
 * expires when retention ends); 5% of requests and their answers are end-to-end encrypted.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AuditLog } from "../../src/audit/index.js";
import type { EmbeddedBroker } from "../../src/broker/embedded/broker.js";
import {
  type Broker,
  type Delivery,
  type Inbox,
  openBroker,
  type SubmitInput,
} from "../../src/broker/index.js";
import { envelopeBytes as utf8Bytes } from "../../src/broker/quotas.js";
import { HandshakeGate } from "../../src/gateway/handshake-gate.js";
import { Registry } from "../../src/gateway/registry.js";
import {
  type EnvelopeHeaders,
  generateIdentity,
  type PrivateIdentity,
  publicIdentity,
} from "../../src/protocol/index.js";
import { AGENTS, agentId, planWeek, principalOf, WEEK_MS } from "./plan.js";
import { Progress } from "./progress.js";
import { lastSeqOf } from "./stores.js";
import { type RelayedMessage, Traffic } from "./traffic.js";

export interface FillConfig {
  data: string;
  messages: number;
  /** The week ends here (epoch ms): the fill's last message is this old when the bench starts. */
  weekEnd: number;
  /** Where the agents' identities and API keys are written (JSON). */
  manifest: string;
  /** How messages are written (see above); default "bulk". */
  path?: "broker" | "bulk";
}

export interface Manifest {
  agents: { identity: PrivateIdentity; apiKey: string }[];
  messages: number;
  envelopeBytes: number;
  fillSeconds: number;
  /** Message ids the bench looks up, spread over the week, with their two agents. */
  samples: { id: string; from: string; to: string }[];
  /**
   * The embedded store's last message sequence number when the fill ended: the week. Later
   * measurements on that store add their own traffic after it, which the NATS replay leaves out.
   */
  lastSeq: number;
}

/** Agents that go offline for good at some point of the week (their later messages stay queued). */
export const offlineAt = (index: number, weekStart: number): number | undefined =>
  index % 33 === 7 ? weekStart + ((index * 7919) % 1000) * (WEEK_MS / 1000) : undefined;

const IN_FLIGHT = 256;
const BULK_ROWS = 1000;
const SAMPLES = 2000;

async function registerAgents(broker: Broker, weekStart: number) {
  const registry = new Registry(broker);
  await registry.start();
  const agents: Manifest["agents"] = [];
  for (let index = 0; index < AGENTS; index++) {
    const identity = generateIdentity(agentId(index), principalOf(index), new Date(weekStart));
    const { apiKey } = await registry.register(publicIdentity(identity), new Date(weekStart));
    agents.push({ identity, apiKey });
  }
  registry.stop();
  return agents;
}

/** 1.5% of deliveries (by the id's last two hex digits) are rejected: dead letters. */
const isRejected = (id: string) => Number.parseInt(id.slice(-2), 16) < 4;
const REJECTION = "not something this agent does";

/**
 * The bulk path: each message's row as the broker's write path leaves it, written with the broker's
 * own statements, BULK_ROWS messages per commit. A message to an agent gone offline stays queued;
 * the others are delivered once and settled (acknowledged, or rejected) when they were queued.
 */
class BulkWriter {
  private pending: { input: SubmitInput; at: number; delivered: boolean }[] = [];

  constructor(private readonly broker: EmbeddedBroker) {}

  async add(input: SubmitInput, at: number, delivered: boolean): Promise<void> {
    this.pending.push({ input, at, delivered });
    if (this.pending.length >= BULK_ROWS) await this.flush();
  }

  async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    const { table } = this.broker;
    await this.broker.commits.run(() => {
      for (const { input, at, delivered } of batch) {
        const row = table.insert(input, at, utf8Bytes(input.envelope));
        if (!row || !delivered) continue;
        const handedOut = { ...row, delivered_at: at, attempts: 1 };
        if (isRejected(input.id))
          table.markFailed(handedOut, at, "rejected", `rejected by recipient: ${REJECTION}`);
        else table.markAcknowledged(handedOut, at);
      }
    });
  }
}

/** Every recipient's inbox, acknowledging (1.5%: rejecting) each delivery, until it goes offline. */
class Recipients {
  private readonly inboxes = new Map<number, Inbox>();
  settled = 0;
  private failure: unknown;

  constructor(private readonly broker: Broker) {}

  async open(index: number): Promise<void> {
    const inbox = await this.broker.openInbox(agentId(index), { maxInFlight: 64 });
    this.inboxes.set(index, inbox);
    void (async () => {
      for await (const delivery of inbox as AsyncIterable<Delivery>) this.settle(delivery);
    })().catch((error: unknown) => {
      this.failure ??= error;
    });
  }

  isOpen(index: number): boolean {
    return this.inboxes.has(index);
  }

  async close(index: number): Promise<void> {
    const inbox = this.inboxes.get(index);
    this.inboxes.delete(index);
    await inbox?.close();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.inboxes.keys()].map((index) => this.close(index)));
  }

  check(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  private settle(delivery: Delivery): void {
    const settled = isRejected(delivery.id)
      ? this.broker.reject(delivery.to, delivery, REJECTION)
      : this.broker.ack(delivery.to, delivery);
    settled.then(
      () => this.settled++,
      (error: unknown) => {
        this.failure ??= error;
      },
    );
  }
}

/** The relay audit: one log per sender, stamped with the week's clock. */
class WeekAudit {
  private readonly logs = new Map<string, Promise<AuditLog>>();
  private failure: unknown;

  constructor(
    private readonly root: string,
    private readonly clock: () => Date,
  ) {}

  record(message: RelayedMessage): void {
    const sender = message.input.from;
    let log = this.logs.get(sender);
    if (!log) {
      log = AuditLog.open({ root: this.root, agent: sender, clock: this.clock });
      this.logs.set(sender, log);
    }
    log
      .then((l) => l.append(message.entry))
      .catch((error: unknown) => {
        this.failure ??= error;
      });
  }

  check(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  async close(): Promise<void> {
    await Promise.all([...this.logs.values()].map(async (log) => (await log).close()));
    this.check();
  }
}

export async function fillEmbedded(config: FillConfig): Promise<Manifest> {
  const weekStart = config.weekEnd - WEEK_MS;
  let simNow = weekStart;
  Date.now = () => simNow;
  const broker = await openBroker({ data: config.data });
  const started = performance.now();
  const agents = await registerAgents(broker, weekStart);
  console.log(`  registered ${AGENTS} agents in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const gate = new HandshakeGate(broker);
  await gate.start();
  const traffic = new Traffic(
    agents.map((a) => a.identity),
    "embedded",
  );
  const bulk = config.path === "broker" ? undefined : new BulkWriter(broker as EmbeddedBroker);
  const recipients = new Recipients(broker);
  if (!bulk) for (let index = 0; index < AGENTS; index++) await recipients.open(index);
  const audit = new WeekAudit(join(config.data, "relay-audit"), () => new Date(simNow));
  const progress = new Progress(`fill (embedded, ${bulk ? "bulk" : "broker"} path)`, config.messages);
  const sampleEvery = Math.max(1, Math.floor(config.messages / SAMPLES));
  const samples: Manifest["samples"] = [];
  const inFlight = new Set<Promise<unknown>>();
  const handshakes = new Map<string, Promise<void>>();
  /** Keeps at most IN_FLIGHT writes outstanding. */
  const throttle = async (work: Promise<unknown>) => {
    inFlight.add(work);
    work.finally(() => inFlight.delete(work)).catch(() => undefined);
    if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight);
  };
  let envelopeBytes = 0;
  let submitted = 0;
  let expectedSettled = 0;
  for (const event of planWeek(config.messages, weekStart, WEEK_MS)) {
    simNow = Math.floor(event.at);
    const message = await traffic.relayed(event);
    if (!message) continue;
    const offline = offlineAt(message.to, weekStart);
    const gone = offline !== undefined && simNow >= offline;
    if (gone && recipients.isOpen(message.to)) await recipients.close(message.to);
    if (event.kind === "handshake") {
      // A pair's four steps are observed in order, pairs side by side.
      const signed = JSON.parse(message.input.envelope) as { params: { headers: EnvelopeHeaders } };
      const kid = agents[message.from]?.identity.signing.kid as string;
      const pair = [message.from, message.to].sort().join(".");
      const observed = (handshakes.get(pair) ?? Promise.resolve()).then(async () => {
        await gate.observe(message.input.method as "agent.announce", signed.params.headers, kid);
      });
      handshakes.set(pair, observed);
      await throttle(observed);
    }
    envelopeBytes += Buffer.byteLength(message.input.envelope);
    if (bulk) {
      await bulk.add(message.input, simNow, !gone);
      audit.record(message);
    } else {
      if (recipients.isOpen(message.to)) expectedSettled++;
      await throttle(broker.submit(message.input).then(() => audit.record(message)));
    }
    if (submitted % sampleEvery === 0 && samples.length < SAMPLES)
      samples.push({ id: message.input.id, from: message.input.from, to: message.input.to });
    submitted++;
    progress.tick(submitted);
    recipients.check();
    audit.check();
  }
  await bulk?.flush();
  await Promise.all(inFlight);
  // The last deliveries: wait until every message to an open inbox was settled (or nothing moves).
  let last = -1;
  while (recipients.settled < expectedSettled && recipients.settled !== last) {
    last = recipients.settled;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  await recipients.closeAll();
  gate.stop();
  await audit.close();
  await broker.close();
  progress.done(submitted);
  // CPU time, which a machine shared with other work does not inflate as it does the wall clock.
  const cpu = process.cpuUsage();
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  console.log(
    `  fill CPU: ${cpuSeconds.toFixed(0)} s, ${Math.round(submitted / cpuSeconds)} messages per CPU-second`,
  );
  const manifest: Manifest = {
    agents,
    messages: submitted,
    envelopeBytes,
    fillSeconds: (performance.now() - started) / 1000,
    samples,
    lastSeq: lastSeqOf(config.data),
  };
  writeFileSync(config.manifest, JSON.stringify(manifest));
  return manifest;
}

// Run as a script (`node fill.js '<config JSON>'`), not when imported (the bulk path's test).
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2]) {
  fillEmbedded(JSON.parse(process.argv[2]) as FillConfig).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
