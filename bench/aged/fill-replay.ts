/**
 * Fills a NATS JetStream store with the week the embedded fill built (`node fill-replay.js '<config
 * JSON>'`, its own process): the same agents registered through the gateway's Registry, then every
 * message whose envelope the embedded store holds submitted through the NATS broker in the same
 * order, delivered through its recipient's inbox and settled as it was settled there (acknowledged,
 * or rejected into a dead letter); messages that stayed queued there (their recipient went offline)
 * stay queued here. JetStream stamps its own times, so the NATS week is a week's rows written now.
 * Only the week is replayed (up to the manifest's `lastSeq`), not what the embedded measurements
 * relayed on that store after it: the relay pair's own traffic, some of it still unacknowledged
 * when a window ended, would otherwise come back here as a backlog of tens of thousands queued for
 * the relay's recipient, which the first relay window on NATS would drain before its own messages.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { type Broker, type Delivery, openBroker } from "../../src/broker/index.js";
import { refKey } from "../../src/broker/validation.js";
import { Registry } from "../../src/gateway/registry.js";
import { type MessageType, publicIdentity } from "../../src/protocol/index.js";
import { priorityOfRank } from "../../src/protocol/priority.js";
import type { Manifest } from "./fill.js";
import { Progress } from "./progress.js";

export interface ReplayConfig {
  natsUrl: string;
  /** The embedded fill's data directory (read only). */
  embeddedData: string;
  /** The embedded fill's manifest (a file); the NATS one (new API keys) is written to `manifest`. */
  embeddedManifest: string;
  manifest: string;
}

const IN_FLIGHT = 256;

interface Row {
  id: string;
  sender: string;
  recipient: string;
  kind: string;
  method: string;
  submitted_at: string;
  priority: number;
  status: string;
  envelope: string;
}

async function replay(config: ReplayConfig): Promise<void> {
  const started = performance.now();
  const week = JSON.parse(readFileSync(config.embeddedManifest, "utf8")) as Manifest;
  const broker: Broker = await openBroker({ nats: { servers: config.natsUrl } });
  const registry = new Registry(broker);
  await registry.start();
  const agents: Manifest["agents"] = [];
  for (const { identity } of week.agents) {
    const { apiKey } = await registry.register(publicIdentity(identity));
    agents.push({ identity, apiKey });
  }
  registry.stop();

  const db = new Database(join(config.embeddedData, "acp.db"), { readonly: true });
  const select = `SELECT m.id, m.sender, m.recipient, m.kind, m.method, m.submitted_at, m.priority, m.status, b.envelope
     FROM messages m JOIN message_bodies b ON b.seq = m.seq WHERE m.seq <= ${Number(week.lastSeq)}`;
  const total = (
    db.prepare("SELECT count(*) AS n FROM message_bodies WHERE seq <= ?").get(week.lastSeq) as { n: number }
  ).n;
  // How each message ended in the embedded week; the recipients that still had messages waiting were offline.
  const outcome = new Map<string, "ack" | "reject">();
  const offline = new Set<string>();
  for (const row of db.prepare(`${select} AND m.status <> 'acknowledged'`).iterate() as Iterable<Row>) {
    if (row.status === "failed") outcome.set(refKey({ from: row.sender, id: row.id }), "reject");
    else offline.add(row.recipient);
  }
  let settled = 0;
  let failure: unknown;
  const settle = (recipient: string, delivery: Delivery) => {
    const reject = outcome.get(refKey(delivery)) === "reject";
    (reject
      ? broker.reject(recipient, delivery, "not something this agent does")
      : broker.ack(recipient, delivery)
    ).then(
      () => settled++,
      (error: unknown) => {
        failure ??= error;
      },
    );
  };
  const inboxes = await Promise.all(
    agents
      .map((a) => a.identity.agentId)
      .filter((agent) => !offline.has(agent))
      .map(async (agent) => {
        const inbox = await broker.openInbox(agent, { maxInFlight: 64 });
        void (async () => {
          for await (const delivery of inbox as AsyncIterable<Delivery>) settle(agent, delivery);
        })().catch((error: unknown) => {
          failure ??= error;
        });
        return inbox;
      }),
  );

  const progress = new Progress("fill (nats, replaying the embedded week)", total);
  const inFlight = new Set<Promise<unknown>>();
  let submitted = 0;
  let toSettle = 0;
  // The embedded gateways that ran on the week before dropped its oldest envelopes (past the
  // 7-day retention by then): the samples looked up here are those replayed.
  const sampled = new Set(week.samples.map((sample) => refKey(sample)));
  const replayedSamples = new Set<string>();
  for (const row of db.prepare(`${select} ORDER BY m.seq`).iterate() as Iterable<Row>) {
    const key = refKey({ from: row.sender, id: row.id });
    if (sampled.has(key)) replayedSamples.add(key);
    if (!offline.has(row.recipient)) toSettle++;
    const work = broker.submit({
      id: row.id,
      from: row.sender,
      to: row.recipient,
      kind: row.kind as MessageType,
      method: row.method,
      envelope: row.envelope,
      submittedAt: row.submitted_at,
      priority: priorityOfRank(row.priority),
    });
    inFlight.add(work);
    work.finally(() => inFlight.delete(work)).catch(() => undefined);
    if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight);
    progress.tick(++submitted);
    if (failure !== undefined) throw failure;
  }
  await Promise.all(inFlight);
  db.close();
  let last = -1;
  while (settled < toSettle && settled !== last) {
    last = settled;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  if (failure !== undefined) throw failure;
  await Promise.all(inboxes.map((inbox) => inbox.close()));
  await broker.close();
  progress.done(submitted);
  const manifest: Manifest = {
    ...week,
    agents,
    messages: submitted,
    fillSeconds: (performance.now() - started) / 1000,
    samples: week.samples.filter((sample) => replayedSamples.has(refKey(sample))),
  };
  writeFileSync(config.manifest, JSON.stringify(manifest));
}

if (process.argv[2]) {
  replay(JSON.parse(process.argv[2]) as ReplayConfig).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
