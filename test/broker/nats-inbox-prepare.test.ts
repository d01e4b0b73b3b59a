import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterEach, expect, it, vi } from "vitest";
import { type Broker, type CommonBrokerOptions, openBroker } from "../../src/broker/index.js";
import { consumerName, INBOX_STREAM, STATUS_BUCKET } from "../../src/broker/nats/layout.js";
import { messageKey } from "../../src/broker/validation.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import {
  closedAfterEach,
  deliveredBefore,
  eventually,
  expectBrokerError,
  holdUntilKilled,
  message,
  reader,
} from "./support.js";

/**
 * What the NATS inbox decides when JetStream hands it a message, before anything reaches the agent
 * (NatsInbox.prepare): a message already settled or past retention is ended at JetStream, never
 * handed out; the last allowed delivery that went unanswered is dead-lettered as of the end of its
 * ack wait, and stops counting against its recipient's quota; and a message whose submit stopped
 * before its status record is recorded as the submit would have, then delivered as usual.
 */
const startNats = useNatsServer();
const { opened, client } = closedAfterEach();
afterEach(() => {
  vi.useRealTimers();
});

async function open(servers: string, options: CommonBrokerOptions = {}): Promise<Broker> {
  const broker = await openBroker({ nats: { servers }, onWarning: () => undefined, ...options });
  opened.push(broker);
  return broker;
}

/** Waits until bob's consumer holds nothing unacknowledged and nothing left to send. */
async function consumerSettled(nc: NatsConnection): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await eventually(async () => {
    const info = await jsm.consumers.info(INBOX_STREAM, consumerName("bob"));
    expect([info.num_ack_pending, info.num_pending, info.num_redelivered]).toEqual([0, 0, 0]);
  });
}

describeWithNats("NATS inbox: what a delivery finds in its status record", () => {
  it("never hands out a message rejected before its delivery, and ends it at JetStream", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await client(server.url);
    const declined = message("alice", "bob");
    await broker.submit(declined);
    // Rejected while still queued (over REST, say): JetStream is not told, nothing was handed out.
    await broker.reject("bob", declined, "not for me");
    const inbox = reader(await broker.openInbox("bob"));
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    await consumerSettled(nc);
    expect(await broker.status(declined)).toMatchObject({
      status: "failed",
      retryCount: 0,
      deadLetter: { reason: "rejected" },
    });
  });

  it("takes a dead-lettered message out of its recipient's pending quota usage", async () => {
    const server = await startNats();
    const broker = await open(server.url, {
      delivery: { ackWaitMs: 300, maxDeliver: 1 },
      quotas: { recipientPendingMessages: 100 },
    });
    const doomed = message("alice", "bob");
    await broker.submit(doomed);
    expect(await broker.usage("bob")).toMatchObject({ pendingMessages: 1 });
    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: doomed.id, attempt: 1 });
    // Not acknowledged: JetStream sends it again after its ack wait, and the inbox dead-letters it.
    await consumerSettled(await client(server.url));
    expect(await broker.status(doomed)).toMatchObject({ status: "failed" });
    expect(await broker.usage("bob")).toMatchObject({ pendingMessages: 0, pendingBytes: 0 });
  });

  it("dates a dead letter at the end of its last ack wait, also when found long after (its gateway died)", async () => {
    const server = await startNats();
    const delivery = { ackWaitMs: 1_000, maxDeliver: 1 };
    const broker = await open(server.url, { delivery });
    const input = message("alice", "bob");
    await broker.submit(input);
    // A gateway hands out bob's last allowed delivery and dies before anyone answers it.
    await holdUntilKilled(
      { nats: { servers: server.url }, delivery },
      "bob",
      (handed) => handed.length === 1,
    );
    // Nobody is there to write it, but from the end of that ack wait it reads failed, dated then.
    const readFailed = await eventually(async () => {
      const record = await broker.status(input);
      expect(record?.status).toBe("failed");
      return record!;
    });
    expect(Date.parse(readFailed.failedAt!)).toBe(Date.parse(readFailed.deliveredAt!) + 1_000);
    // bob comes back later: the inbox meets the delivery again and writes the dead letter.
    const inbox = reader(await broker.openInbox("bob"));
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    await consumerSettled(await client(server.url));
    const written = await broker.status(input);
    expect(written).toMatchObject({ status: "failed", deadLetter: { reason: "max-deliveries" } });
    expect(written?.failedAt).toBe(readFailed.failedAt);
    expect(written?.deadLetter?.at).toBe(readFailed.failedAt);
  });

  it("delivers a message whose submit stopped before its record, recording it as the submit would have", async () => {
    const server = await startNats();
    const quotas = { recipientPendingMessages: 100 };
    const broker = await open(server.url, { quotas });
    const nc = await client(server.url);
    const input = message("alice", "bob");
    const seen: string[] = [];
    await broker.events((event) => {
      if (event.type === "message.status" && event.message.id === input.id) seen.push(event.message.status);
    });
    // The submitting gateway published the message and died before writing its status record.
    const dead = await open(server.url, { quotas });
    await dead.submit(input);
    await dead.close();
    await (await jetstreamManager(nc)).streams.purge(`KV_${STATUS_BUCKET}`, {
      filter: `$KV.${STATUS_BUCKET}.${messageKey(input)}`,
    });
    expect(await broker.status(input)).toBeNull();
    await eventually(async () => expect(await broker.usage("bob")).toMatchObject({ pendingMessages: 1 }));
    seen.length = 0;

    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: input.id, envelope: input.envelope, attempt: 1 });
    expect(await broker.status(input)).toMatchObject({ status: "delivered", retryCount: 0 });
    await broker.ack("bob", input);
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    // Watchers saw its life as for any message; its quota usage ended with the acknowledgement.
    await eventually(async () => expect(seen).toEqual(["queued", "delivered", "acknowledged"]));
    expect(await broker.usage("bob")).toMatchObject({ pendingMessages: 0, pendingBytes: 0 });
  });

  it("expires a message from the millisecond its retention ends: never handed out, read expired", async () => {
    const server = await startNats();
    const retentionMs = 60 * 60 * 1_000;
    const broker = await open(server.url, { retentionMs });
    const nc = await client(server.url);
    const old = message("alice", "bob");
    await broker.submit(old);
    const queuedAt = Date.parse((await broker.status(old))!.queuedAt);
    // The gateway's clock reaches the end of its retention; JetStream's own max age is still far.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(queuedAt + retentionMs);
    expect(await broker.status(old)).toMatchObject({ status: "expired" });
    const inbox = reader(await broker.openInbox("bob"));
    expect(await deliveredBefore(broker, inbox, "bob")).toEqual([]);
    await consumerSettled(nc);
    expect(await broker.status(old)).toMatchObject({ status: "expired", retryCount: 0 });
    await expectBrokerError(broker.ack("bob", old), "invalid_state");
  });
});

describeWithNats("NATS inbox: working() then a close", () => {
  it("gives a delivery the agent said it works on back uncounted, unless it is the oldest", async () => {
    const server = await startNats();
    const broker = await open(server.url, { delivery: { ackWaitMs: 30_000 } });
    const [head, behind] = [message("alice", "bob"), message("alice", "bob")];
    await broker.submit(head);
    await broker.submit(behind);
    const first = await broker.openInbox("bob");
    const firstReader = reader(first);
    await firstReader.next();
    await firstReader.next();
    // Its ack wait starts again; the close a moment later is well within it.
    await broker.working("bob", behind);
    await first.close();
    const again = reader(await broker.openInbox("bob"));
    expect(await again.next()).toMatchObject({ id: head.id, attempt: 2 });
    expect(await again.next()).toMatchObject({ id: behind.id, attempt: 1 });
  });
});
