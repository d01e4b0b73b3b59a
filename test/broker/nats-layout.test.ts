import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { expect, it } from "vitest";
import { type Broker, type BrokerEvent, openBroker, type SubmitInput } from "../../src/broker/index.js";
import {
  Header,
  INBOX_STREAM,
  inboxSubject,
  indexShard,
  indexStream,
  LEGACY_INDEX_STREAM,
  participantIndexSubject,
  STATUS_BUCKET,
} from "../../src/broker/nats/layout.js";
import { messageKey, refKey } from "../../src/broker/validation.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { writeEarlierMessage } from "./earlier-layout.js";
import { closedAfterEach, deliveredBefore, eventually, message, reader } from "./support.js";

/**
 * What the NATS broker stores per message (docs/brokers.md, "Layout"): a status record without
 * the sender and id its key names, and once settled without the hand-out's ack subject and holder;
 * index entries without the participant their subjects name, and without a Nats-Msg-Id; an
 * envelope whose headers name its sender once (in its Nats-Msg-Id).
 * And a store written before that (records and entries carrying them all) keeps working.
 */
const startNats = useNatsServer();
const { opened, client } = closedAfterEach();

async function open(servers: string): Promise<Broker> {
  const broker = await openBroker({ nats: { servers }, delivery: { ackWaitMs: 5_000 } });
  opened.push(broker);
  return broker;
}

async function storedRecord(nc: NatsConnection, input: SubmitInput): Promise<Record<string, unknown>> {
  const entry = await (await new Kvm(nc).open(STATUS_BUCKET)).get(messageKey(input));
  return entry?.json<Record<string, unknown>>() ?? {};
}

describeWithNats("NATS broker: the layout of what it stores", () => {
  it("stores records and index entries without what their keys and subjects say", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    const events: BrokerEvent[] = [];
    await broker.events((event) => events.push(event));
    const input = message("alice", "bob");
    await broker.submit(input);
    const queued = await storedRecord(nc, input);
    expect(queued).toMatchObject({ to: "bob", kind: "notification", status: "queued", attempts: 0 });
    expect(queued).not.toHaveProperty("id");
    expect(queued).not.toHaveProperty("from");

    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: input.id, from: "alice" });
    const delivered = await storedRecord(nc, input);
    expect(delivered).toMatchObject({ status: "delivered", holder: broker.instanceId });
    expect(delivered.ackSubject).toEqual(expect.stringMatching(/^\$JS\.ACK\./));

    await broker.ack("bob", input);
    const acknowledged = await storedRecord(nc, input);
    expect(acknowledged).toMatchObject({ to: "bob", status: "acknowledged", attempts: 1 });
    for (const gone of ["id", "from", "ackSubject", "holder", "dueAt"])
      expect(acknowledged).not.toHaveProperty(gone);
    // Everything the record leaves out is still there for whoever reads it.
    expect(await broker.status(input)).toMatchObject({
      id: input.id,
      from: "alice",
      to: "bob",
      status: "acknowledged",
    });
    await eventually(async () =>
      expect(events).toContainEqual({
        type: "message.status",
        message: expect.objectContaining({ id: input.id, from: "alice", status: "acknowledged" }),
      }),
    );

    // The sender's entry names the recipient, the recipient's the sender: their subjects say the rest.
    const jsm = await jetstreamManager(nc);
    // The envelope's headers name the sender once, in its Nats-Msg-Id.
    const stored = await jsm.direct.getMessage(INBOX_STREAM, { last_by_subj: inboxSubject("bob") });
    expect(stored?.header?.get("Nats-Msg-Id")).toBe(refKey(input));
    expect(stored?.header?.get(Header.From)).toBe("");
    for (const [agent, side, counterpart] of [
      ["alice", "sent", { to: "bob" }],
      ["bob", "received", { from: "alice" }],
    ] as const) {
      const entry = await jsm.direct.getMessage(indexStream(indexShard(agent)), {
        last_by_subj: participantIndexSubject(agent, side),
      });
      expect(entry?.header?.get("Nats-Msg-Id") ?? "").toBe("");
      expect(entry?.json()).toEqual({
        id: input.id,
        kind: "notification",
        method: "agent.notify",
        submittedAt: input.submittedAt,
        queuedAt: expect.any(Number),
        ...counterpart,
      });
    }
    expect((await broker.list({ participant: "alice" })).items).toEqual([
      expect.objectContaining({ id: input.id, from: "alice", to: "bob", status: "acknowledged" }),
    ]);
  });

  it("keeps working on a store written before: lists, reads, delivers and settles its messages", async () => {
    const server = await startNats();
    await (await open(server.url)).close(); // the streams and the bucket, as any version makes them
    const nc = await client(server.url);
    // The index stream of the versions before the shards.
    const { config } = await (await jetstreamManager(nc)).streams.info(indexStream(0));
    await (await jetstreamManager(nc)).streams.add({
      ...config,
      name: LEGACY_INDEX_STREAM,
      subjects: ["acp.index.*.*"],
    });
    const done = message("alice", "bob", { id: "settled-before" });
    const waiting = message("alice", "bob", { id: "waiting-from-before" });
    await writeEarlierMessage(nc, done, "acknowledged");
    await writeEarlierMessage(nc, waiting, "queued");

    const broker = await open(server.url);
    expect((await broker.list({ participant: "bob" })).items).toEqual([
      expect.objectContaining({ id: done.id, from: "alice", to: "bob", status: "acknowledged" }),
      expect.objectContaining({
        id: waiting.id,
        from: "alice",
        to: "bob",
        kind: "notification",
        status: "queued",
      }),
    ]);
    expect(await broker.get(waiting)).toMatchObject({ id: waiting.id, envelope: waiting.envelope });
    expect(await broker.sendersTo("bob", waiting.id)).toEqual(["alice"]);

    // The acknowledged one is acknowledged at JetStream silently; the waiting one is delivered once.
    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: waiting.id, from: "alice", attempt: 1 });
    expect(await broker.ack("bob", waiting)).toMatchObject({ status: "acknowledged" });
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    expect(await broker.status(waiting)).toMatchObject({ id: waiting.id, status: "acknowledged" });
    expect(await storedRecord(nc, waiting)).not.toHaveProperty("ackSubject");

    // A resubmission of an old message is still a duplicate, however it was stored.
    expect(await broker.submit(done)).toEqual({ id: done.id, status: "acknowledged", duplicate: true });
    expect((await broker.list({ participant: "alice" })).items.map((m) => m.id)).toEqual([
      done.id,
      waiting.id,
    ]);
  });
});
