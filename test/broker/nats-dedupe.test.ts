import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { type Broker, openBroker, type SubmitInput } from "../../src/broker/index.js";
import {
  Header,
  INBOX_STREAM,
  INDEX_STREAM,
  inboxSubject,
  STATUS_BUCKET,
} from "../../src/broker/nats/layout.js";
import { maxEnvelopeBytes } from "../../src/broker/nats/submission.js";
import { messageKey } from "../../src/broker/validation.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { deliveredBefore, message, reader } from "./support.js";

/**
 * Exactly once on NATS where JetStream's own dedupe does not decide alone: a submit that stopped
 * between its publish and its status record, a record the recipient's inbox wrote first, the index
 * entry's dedupe, and the payload limit the server announces.
 */
const startNats = useNatsServer();
const opened: Broker[] = [];
const connections: NatsConnection[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
  await Promise.all(connections.splice(0).map((nc) => nc.close().catch(() => undefined)));
});

async function open(servers: string): Promise<Broker> {
  const broker = await openBroker({ nats: { servers }, delivery: { ackWaitMs: 5_000 } });
  opened.push(broker);
  return broker;
}

/** A plain client of the same server, to do what a broker part would (or a crashed one did). */
async function client(servers: string): Promise<NatsConnection> {
  const nc = await connect({ servers });
  connections.push(nc);
  return nc;
}

async function streamMessages(nc: NatsConnection, stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
}

describeWithNats("NATS broker: duplicates and records", () => {
  it("a resubmission inside the window is stored once: one stream message, one index entry", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    const input = message("alice", "bob");
    expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: false });
    expect(await broker.submit(input)).toEqual({ id: input.id, status: "queued", duplicate: true });
    expect(await streamMessages(nc, INBOX_STREAM)).toBe(1);
    expect(await streamMessages(nc, INDEX_STREAM)).toBe(1);
    expect((await broker.list({ participant: "alice" })).items.map((m) => m.id)).toEqual([input.id]);
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
  });

  it("takes the payload limit from the server's INFO, and nats-server's default before it", async () => {
    const server = await startNats({ config: "max_payload: 262144\n" });
    const broker = await open(server.url);
    expect(broker.maxEnvelopeBytes).toBe(262_144 - 1_024);
    expect(maxEnvelopeBytes(undefined)).toBe(1_048_576 - 1_024);
  });
});
