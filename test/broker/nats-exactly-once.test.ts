import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { expect, it } from "vitest";
import { type Broker, openBroker } from "../../src/broker/index.js";
import {
  consumerName,
  INBOX_STREAM,
  indexShard,
  indexStream,
  inboxSubject,
  STATUS_BUCKET,
} from "../../src/broker/nats/layout.js";
import { maxEnvelopeBytes } from "../../src/broker/nats/submission.js";
import { messageKey } from "../../src/broker/validation.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import {
  closedAfterEach,
  deliveredBefore,
  eventually,
  expectBrokerError,
  message,
  reader,
  routedTo,
  workedOnWhile,
} from "./support.js";

/**
 * Exactly once on NATS where JetStream's own dedupe does not decide alone (a submit that stopped
 * between its publish and its status record, a record the recipient's inbox wrote first, the index
 * entry's dedupe, the payload limit the server announces), and settling at another gateway than
 * the one whose consumer holds the delivery: the status record decides, and JetStream hears of it
 * through the ack subject recorded at delivery (`+WPI` restarts its ack wait, `+TERM` ends it), as
 * operators watching its advisories see it.
 */
const startNats = useNatsServer();
const { opened, client } = closedAfterEach();

async function open(servers: string, ackWaitMs = 5_000): Promise<Broker> {
  const broker = await openBroker({ nats: { servers }, delivery: { ackWaitMs } });
  opened.push(broker);
  return broker;
}

async function streamMessages(nc: NatsConnection, stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
}

/** The index entries in the shards of these agents. */
async function indexEntries(nc: NatsConnection, ...agents: string[]): Promise<number> {
  const shards = [...new Set(agents.map(indexShard))];
  const counts = await Promise.all(shards.map((shard) => streamMessages(nc, indexStream(shard))));
  return counts.reduce((sum, count) => sum + count, 0);
}

/** JetStream's advisories of `kind` (e.g. MSG_TERMINATED) on bob's consumer: their stream sequences. */
async function advisories(servers: string, kind: string): Promise<number[]> {
  const nc = await client(servers);
  const seen: number[] = [];
  nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.${kind}.${INBOX_STREAM}.${consumerName("bob")}`, {
    callback: (_error, msg) => {
      seen.push(msg.json<{ stream_seq: number }>().stream_seq);
    },
  });
  await nc.flush();
  return seen;
}

describeWithNats("NATS broker: exactly once", () => {
  it("a resubmission inside the window is stored once and listed once (its second index entries are skipped)", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    const input = message("alice", "bob");
    expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: false });
    expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: true });
    expect(await streamMessages(nc, INBOX_STREAM)).toBe(1);
    // Index entries carry no Nats-Msg-Id: the record names the two `list` counts (the sender's and the recipient's).
    expect(await indexEntries(nc, "alice", "bob")).toBe(4);
    for (const participant of ["alice", "bob"])
      expect((await broker.list({ participant })).items.map((m) => m.id)).toEqual([input.id]);
  });

  it("completes a submit that stopped before its status record: the resubmission writes it, delivered once", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    const input = message("alice", "bob");
    // The first submit's gateway died between its publish and its record: the record is not there.
    const dead = await open(server.url);
    await dead.submit(input);
    await dead.close();
    await (await jetstreamManager(nc)).streams.purge(`KV_${STATUS_BUCKET}`, {
      filter: `$KV.${STATUS_BUCKET}.${messageKey(input)}`,
    });
    expect(await broker.status(input)).toBeNull();
    expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: true });
    expect(await broker.status(input)).toMatchObject({ status: "queued" });
    expect(await streamMessages(nc, INBOX_STREAM)).toBe(1);
    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: input.id, envelope: input.envelope, attempt: 1 });
    await broker.ack("bob", input);
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    expect(await broker.status(input)).toMatchObject({ status: "acknowledged" });
  });

  it("keeps a request's reply route when the recipient's inbox wrote its record before the submit did", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    const { got } = routedTo(broker, "alice");
    const request = message("alice", "bob", { kind: "request", method: "agent.request" });
    // The recipient's inbox pulls the request before its record exists (here: the submitting
    // gateway died before writing it; a slower record write looks the same to the inbox).
    const submitting = await open(server.url);
    await submitting.submit({ ...request, replyTo: `${broker.instanceId}/socket-1` });
    await submitting.close();
    await (await jetstreamManager(nc)).streams.purge(`KV_${STATUS_BUCKET}`, {
      filter: `$KV.${STATUS_BUCKET}.${messageKey(request)}`,
    });
    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: request.id });
    await broker.ack("bob", request);
    // The record the inbox wrote from the headers carries the reply route: the answer goes there.
    const answer = message("bob", "alice", { kind: "response", method: "response", inReplyTo: request.id });
    await broker.submit(answer);
    await eventually(async () => expect(got.map((d) => d.id)).toEqual([answer.id]));
  });

  it("reports a new message as new when the recipient's inbox wrote its record before the submit did", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    await broker.submit(message("alice", "carol")); // the stream exists; the next message's seq is 2
    const input = message("alice", "bob");
    const seq = (await (await jetstreamManager(nc)).streams.info(INBOX_STREAM)).state.last_seq + 1;
    // What NatsInbox.prepare writes when the delivery outruns the submit's own record.
    const kv = await new Kvm(nc).open(STATUS_BUCKET);
    const { envelope: _, ...fields } = input;
    await kv.create(
      messageKey(input),
      JSON.stringify({ ...fields, queuedAt: Date.now(), status: "queued", attempts: 0, seq }),
    );
    expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: false });
    expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: true });
    // The inbox's record named no index entries; the resubmission names its own, the first are skipped.
    expect(await indexEntries(nc, "alice", "bob", "carol")).toBe(6);
    expect((await broker.list({ participant: "bob" })).items.map((m) => m.id)).toEqual([input.id]);
  });

  it("settles what is not an ACP message on an agent's subject, and delivers what follows it", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    await broker.submit(message("alice", "carol")); // the streams exist
    await jetstream(nc).publish(inboxSubject("bob"), "no headers");
    const inbox = reader(await broker.openInbox("bob"));
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    // Ended at JetStream, not left to come back after the ack wait.
    const jsm = await jetstreamManager(nc);
    await eventually(async () => {
      const info = await jsm.consumers.info(INBOX_STREAM, consumerName("bob"));
      expect([info.num_ack_pending, info.num_pending]).toEqual([0, 0]);
    }, 3_000);
  });

  it("ends a dead-lettered message at JetStream: the inbox's only slot goes to the next message", async () => {
    const server = await startNats();
    const broker = await openBroker({
      nats: { servers: server.url },
      delivery: { ackWaitMs: 300, maxDeliver: 1 },
    });
    opened.push(broker);
    const doomed = message("alice", "bob");
    const next = message("alice", "bob");
    await broker.submit(doomed);
    await broker.submit(next);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 1 }));
    expect(await inbox.next()).toMatchObject({ id: doomed.id, attempt: 1 });
    // Not acknowledged: its one delivery's ack wait ends, JetStream sends it again, and it is dead.
    expect(await inbox.next()).toMatchObject({ id: next.id, attempt: 1 });
    expect(await broker.status(doomed)).toMatchObject({ status: "failed" });
  });

  it("moves the last allowed delivery's end on working(): it reads delivered, not dead-lettered", async () => {
    const server = await startNats();
    const broker = await openBroker({
      nats: { servers: server.url },
      delivery: { ackWaitMs: 5_000, maxDeliver: 1 },
    });
    opened.push(broker);
    const input = message("alice", "bob");
    await broker.submit(input);
    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: input.id, attempt: 1 });
    expect(await broker.status(input)).toMatchObject({ status: "delivered" });
    await broker.working("bob", input);
    expect(await broker.status(input)).toMatchObject({ status: "delivered", retryCount: 0 });
    await broker.ack("bob", input);
    const refused = await expectBrokerError(broker.working("bob", input), "invalid_state");
    expect(refused.message).toBe(`message ${input.id} is acknowledged, not out for delivery`);
  });

  it("takes the payload limit from the server's INFO, and nats-server's default before it", async () => {
    const server = await startNats({ config: "max_payload: 262144\n" });
    const broker = await open(server.url);
    expect(broker.maxEnvelopeBytes).toBe(262_144 - 1_024);
    expect(maxEnvelopeBytes(undefined)).toBe(1_048_576 - 1_024);
  });
});

describeWithNats("NATS broker: settling at another gateway", () => {
  it("restarts the holding gateway's ack wait from another gateway, and only while it is asked to", async () => {
    const server = await startNats();
    const holder = await open(server.url, 500);
    const other = await open(server.url, 500);
    const inbox = reader(await holder.openInbox("bob"));
    const input = message("alice", "bob");
    await other.submit(input);
    expect(await inbox.next()).toMatchObject({ id: input.id, attempt: 1 });
    // Three ack waits long (three later messages come again meanwhile), the recipient says it is
    // working, through the other gateway.
    const work = { agent: "bob", message: input, everyMs: 250 };
    expect(await workedOnWhile(other, work, { inbox, agent: "bob", rounds: 3 })).toEqual([]);
    expect(await other.status(input)).toMatchObject({ status: "delivered", retryCount: 0 });
    // Then it stops: JetStream's ack wait runs out and the holder delivers it again.
    expect(await inbox.next(5_000)).toMatchObject({ id: input.id, attempt: 2 });
  });

  it("terminates a rejected delivery at JetStream and acknowledges an acknowledged one, at either gateway", async () => {
    const server = await startNats();
    const holder = await open(server.url, 30_000);
    const other = await open(server.url, 30_000);
    const terminated = await advisories(server.url, "MSG_TERMINATED");
    const inbox = reader(await holder.openInbox("bob"));
    // Stream sequences 1 to 4, in this order.
    const [rejectedThere, rejectedHere, ackedThere, ackedHere] = [1, 2, 3, 4].map(() =>
      message("alice", "bob"),
    );
    for (const input of [rejectedThere, rejectedHere, ackedThere, ackedHere]) {
      await other.submit(input!);
      await inbox.next();
    }
    await other.reject("bob", rejectedThere!, "cannot do that");
    expect(await holder.status(rejectedThere!)).toMatchObject({ status: "failed" });
    await holder.reject("bob", rejectedHere!, "nor that");
    await other.ack("bob", ackedThere!);
    await holder.ack("bob", ackedHere!);
    // Well within the 30 s ack wait: told through the ack subject, not by a redelivery found settled.
    await eventually(async () => expect(terminated).toEqual([1, 2]), 5_000);
    const jsm = await jetstreamManager(await client(server.url));
    await eventually(async () => {
      expect((await jsm.consumers.info(INBOX_STREAM, consumerName("bob"))).num_ack_pending).toBe(0);
    }, 5_000);
    expect(terminated).toEqual([1, 2]);
    // Settled is settled: the other action is refused, naming the state.
    const refused = await expectBrokerError(holder.reject("bob", ackedHere!, "too late"), "invalid_state");
    expect(refused.message).toBe(`message ${ackedHere!.id} is acknowledged; it can no longer be rejected`);
    await expectBrokerError(other.ack("bob", rejectedHere!), "invalid_state");
  });
});
