import { AckPolicy, jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { connect, nanos } from "@nats-io/transport-node";
import { expect, it } from "vitest";
import { type NatsBrokerOptions, openBroker } from "../../src/broker/index.js";
import {
  consumerName,
  INBOX_STREAM,
  INDEX_SHARDS,
  indexStream,
  inboxSubject,
  STATUS_BUCKET,
} from "../../src/broker/nats/layout.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { closedAfterEach, eventually, message, reader, sleep } from "./support.js";

const startNats = useNatsServer();
const { opened, connections } = closedAfterEach();

const DAY_MS = 24 * 3_600_000;
const STATUS_STREAM = `KV_${STATUS_BUCKET}`;
/** Enough consumers that nats-server's expiry of the backlog takes a while (each removal is told to every one). */
const CONSUMERS = 500;
/** Ten steps of the lowering. */
const BACKLOG = 10_000;
/** The shorter retention the broker starts with: long enough for the test's own message to be delivered first. */
const RETENTION_MS = 6_000;

async function open(options: NatsBrokerOptions) {
  const broker = await openBroker(options);
  opened.push(broker);
  return broker;
}

/** Messages published straight to a stream (no broker records): `count` of them, `subject(i)`. */
async function publish(
  nats: { servers: string; user: string; pass: string },
  count: number,
  subject: (i: number) => string,
): Promise<number> {
  const nc = await connect(nats);
  connections.push(nc);
  const js = jetstream(nc);
  const body = new Uint8Array(1024);
  let last = 0;
  for (let sent = 0; sent < count; sent += 500) {
    const batch = [];
    for (let i = sent; i < Math.min(count, sent + 500); i++) batch.push(js.publish(subject(i), body));
    for (const ack of await Promise.all(batch)) last = Math.max(last, ack.seq);
  }
  return last;
}

async function manager(servers: string, user = "admin", pass = "admin"): Promise<JetStreamManager> {
  const nc = await connect({ servers, user, pass });
  connections.push(nc);
  return jetstreamManager(nc);
}

describeWithNats("NATS broker started with a shorter retention than its streams' max_age", () => {
  it("is usable at once; the streams' max_age comes down after start, in steps on a connection of its own", async () => {
    const server = await startNats({ user: "admin", pass: "s3cret-pass" });
    const nats = { servers: server.url, user: "admin", pass: "s3cret-pass" };
    // A week-long store: the streams at their default max_age, an inbox consumer per agent and a backlog.
    await (await open({ nats })).close();
    const jsm = await manager(server.url, "admin", "s3cret-pass");
    for (let c = 0; c < CONSUMERS; c++) {
      await jsm.consumers.add(INBOX_STREAM, {
        durable_name: consumerName(`old-${c}`),
        filter_subject: inboxSubject(`old-${c}`),
        ack_policy: AckPolicy.Explicit,
      });
    }
    const backlog = await publish(nats, BACKLOG, (i) => inboxSubject(`old-${i % CONSUMERS}`));
    const indexBacklog = await publish(nats, 1_500, (i) => `acp.index.03.old-${i % 10}.sent`);
    // Both backlogs older than the new retention (JetStream stamps its own times: they have to age).
    await sleep(RETENTION_MS + 200);

    const notices: string[] = [];
    const warnings: string[] = [];
    const broker = await open({
      nats,
      retentionMs: RETENTION_MS,
      recordRetentionMs: RETENTION_MS,
      onNotice: (line) => notices.push(line),
      onWarning: (line) => warnings.push(line),
    });
    // Open did not wait for the expiry: the backlog is still there, the max_age not yet down. The
    // other settings were applied at start (the duplicate window follows the retention).
    const atOpen = await jsm.streams.info(INBOX_STREAM);
    expect(atOpen.state.first_seq).toBeLessThanOrEqual(backlog);
    expect(atOpen.config.max_age).toBeGreaterThan(nanos(RETENTION_MS));
    expect(atOpen.config.duplicate_window).toBe(nanos(RETENTION_MS));

    // Submits and deliveries work meanwhile.
    const sent = message("alice", "bob");
    expect((await broker.submit(sent)).duplicate).toBe(false);
    const bob = reader(await broker.openInbox("bob"));
    const delivery = await bob.next();
    expect(delivery).toMatchObject({ from: "alice", id: sent.id });
    expect((await broker.ack("bob", sent)).status).toBe("acknowledged");

    await eventually(async () => {
      // The inbox stream, the index shards and the status bucket.
      expect(notices.filter((line) => line.includes("max_age lowered"))).toHaveLength(INDEX_SHARDS + 2);
    }, 120_000);
    const inbox = await jsm.streams.info(INBOX_STREAM);
    expect(inbox.config.max_age).toBe(nanos(RETENTION_MS));
    expect(inbox.state.first_seq).toBeGreaterThan(backlog);
    const index = await jsm.streams.info(indexStream(3));
    expect(index.config.max_age).toBe(nanos(RETENTION_MS));
    expect(index.state.first_seq).toBeGreaterThan(indexBacklog);
    // The status records' bucket: its TTL is the record retention too.
    expect((await jsm.streams.info(STATUS_STREAM)).config.max_age).toBe(nanos(RETENTION_MS));
    expect(notices).toContainEqual(
      expect.stringMatching(
        /^acp broker \(nats\): ACP_INBOX: lowering max_age from 7 d to 6 s \(\d+ messages held\)/,
      ),
    );
    // Steps: more than one update (nats-server's own timer also expires what ages past each step's
    // max_age), with a rest after each.
    const lowered = notices.find((line) => line.includes(`${INBOX_STREAM}: max_age lowered`));
    expect(lowered).toMatch(
      /from 7 d to 6 s in [\d.]+ s \((\d+) steps, resting ([\d.]+) s between them; (\d+) messages expired/,
    );
    expect(Number(/\((\d+) steps/.exec(lowered ?? "")?.[1])).toBeGreaterThanOrEqual(2);
    expect(Number(/resting ([\d.]+) s/.exec(lowered ?? "")?.[1])).toBeGreaterThan(0);
    expect(warnings).toEqual([]);
    for (const line of [...notices, ...warnings]) expect(line).not.toContain("s3cret");
  }, 180_000);

  it("a longer retention or record retention is applied at start, to the streams and the status bucket", async () => {
    const server = await startNats({ user: "admin", pass: "admin" });
    const nats = { servers: server.url, user: "admin", pass: "admin" };
    await (await open({ nats })).close();
    const notices: string[] = [];
    await open({
      nats,
      retentionMs: 8 * DAY_MS,
      recordRetentionMs: 40 * DAY_MS,
      onNotice: (line) => notices.push(line),
    });
    const jsm = await manager(server.url);
    expect((await jsm.streams.info(INBOX_STREAM)).config.max_age).toBe(nanos(8 * DAY_MS));
    for (let shard = 0; shard < INDEX_SHARDS; shard++) {
      expect((await jsm.streams.info(indexStream(shard))).config.max_age).toBe(nanos(40 * DAY_MS));
    }
    expect((await jsm.streams.info(STATUS_STREAM)).config.max_age).toBe(nanos(40 * DAY_MS));
    expect(notices).toEqual([]);
  });

  it("a stream made without a max_age gets the retention's, after start", async () => {
    const server = await startNats({ user: "admin", pass: "admin" });
    const nats = { servers: server.url, user: "admin", pass: "admin" };
    const jsm = await manager(server.url);
    await jsm.streams.add({ name: INBOX_STREAM, subjects: ["agent.*.inbox"], allow_direct: true });
    const notices: string[] = [];
    await open({ nats, onNotice: (line) => notices.push(line) });
    await eventually(async () => {
      expect(notices).toContainEqual(expect.stringMatching(/ACP_INBOX: max_age lowered from none to 7 d/));
    });
    expect((await jsm.streams.info(INBOX_STREAM)).config.max_age).toBe(nanos(7 * DAY_MS));
  });

  it("a lowering nats-server refuses is warned about and retried, the stream left at its max_age, the broker usable", async () => {
    const server = await startNats({
      config:
        "accounts { ACP: { jetstream: enabled, users: [" +
        "{ user: admin, password: admin }, " +
        `{ user: gateway, password: gateway, permissions: { publish: { allow: ">", deny: "$JS.API.STREAM.UPDATE.${INBOX_STREAM}" } } }` +
        "] } }\n",
    });
    await (await open({ nats: { servers: server.url, user: "admin", pass: "admin" } })).close();
    const notices: string[] = [];
    const warnings: string[] = [];
    // A day: the duplicate window stays at its 10 minutes, so nothing else needs an update at start.
    const broker = await open({
      nats: { servers: server.url, user: "gateway", pass: "gateway" },
      retentionMs: DAY_MS,
      onNotice: (line) => notices.push(line),
      onWarning: (line) => warnings.push(line),
    });
    await eventually(async () => {
      expect(warnings.length).toBeGreaterThanOrEqual(2);
    }, 30_000);
    expect(warnings[0]).toMatch(
      /^acp broker \(nats\): ACP_INBOX: lowering max_age to 1 d failed \(.*Permissions Violation.*\); it stays at 7 d, retrying in 1 s$/,
    );
    expect(warnings[1]).toMatch(/retrying in 2 s$/);
    const jsm = await manager(server.url);
    expect((await jsm.streams.info(INBOX_STREAM)).config.max_age).toBe(nanos(7 * DAY_MS));

    const sent = message("alice", "bob");
    await broker.submit(sent);
    const bob = reader(await broker.openInbox("bob"));
    expect(await bob.next()).toMatchObject({ from: "alice", id: sent.id });
    expect((await broker.health()).ok).toBe(true);

    await broker.close();
    expect(notices.at(-1)).toMatch(
      /ACP_INBOX: lowering max_age stopped at 7 d \(target 1 d\): the broker closed/,
    );
  }, 60_000);
});
