import type { Socket } from "node:net";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { beforeEach, expect, it, vi } from "vitest";
import { type Broker, type Delivery, type DeliveryOptions, openBroker } from "../../src/broker/index.js";
import { consumerName, INBOX_STREAM } from "../../src/broker/nats/layout.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { closedAfterEach, deliveredBefore, eventually, message, reader, sleep } from "./support.js";

/**
 * A NATS inbox from its open to its close: the backlog it finds waiting, the consumer leaving its
 * loop or being deleted under it, a delivery settled while it waits in the queue, keeping a
 * delivery's ack wait going while the agent works on it wherever the agent's inboxes are open (and
 * a warning when NATS does not answer the extension), and the close: what the server sent as it
 * began and what the inbox held for a route go back at once, and a server that does not answer is
 * not waited for.
 */
const startNats = useNatsServer();
const { opened, client } = closedAfterEach();
const warnings: string[] = [];
beforeEach(() => {
  warnings.length = 0;
});

/** Long enough that a delivery arriving within a reader's timeout (10 s) did not wait for it. */
const LONG_ACK_WAIT_MS = 30_000;

async function open(servers: string, delivery: DeliveryOptions = { ackWaitMs: LONG_ACK_WAIT_MS }) {
  const broker = await openBroker({ nats: { servers }, delivery, onWarning: (w) => warnings.push(w) });
  opened.push(broker);
  return broker;
}

/** The broker's socket to nats-server, to stop reading from it for a while. */
function socketOf(broker: Broker): Socket {
  return (broker as unknown as { nc: { protocol: { transport: { socket: Socket } } } }).nc.protocol.transport
    .socket;
}

/** Calls `working()` on `delivery` every `everyMs` for `forMs`, as an agent busy with it would. */
async function keepWorking(broker: Broker, delivery: Delivery, everyMs: number, forMs: number) {
  for (const until = Date.now() + forMs; Date.now() < until; ) {
    await broker.working("bob", delivery);
    await sleep(everyMs);
  }
}

describeWithNats("NATS inbox lifecycle", () => {
  it("closes when its consumer leaves the loop early: the next open gets its deliveries at once", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const input = message("alice", "bob");
    await broker.submit(input);
    for await (const delivery of await broker.openInbox("bob")) {
      expect(delivery.id).toBe(input.id);
      break; // the agent's socket went away mid-loop
    }
    // Closed, not still holding the agent's one open inbox; well within the 30 s ack wait.
    const again = reader(await broker.openInbox("bob"));
    expect(await again.next()).toMatchObject({ id: input.id, attempt: 2 });
  });

  it("ends its iteration with a warning when its consumer is deleted on the server, and opens again", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const first = message("alice", "bob");
    await broker.submit(first);
    const inbox = reader(await broker.openInbox("bob"));
    await inbox.next();
    await broker.ack("bob", first);
    const jsm = await jetstreamManager(await client(server.url));
    await jsm.consumers.delete(INBOX_STREAM, consumerName("bob"));
    // The gateway sees the end (rather than waiting forever on a pull nobody serves) and can reopen.
    await expect(inbox.next()).rejects.toThrow("the inbox of bob closed");
    expect(warnings).toEqual([expect.stringMatching(/inbox bob: consumer stopped: .*consumer deleted/i)]);
    const second = message("alice", "bob");
    await broker.submit(second);
    // A new consumer, which starts over the stream: the acknowledged message is not delivered again.
    const again = reader(await broker.openInbox("bob"));
    expect(await again.next()).toMatchObject({ id: second.id, attempt: 1 });
    await broker.ack("bob", second);
    expect(await deliveredBefore(broker, again, "bob")).toEqual([]);
  });

  it("hands out the backlog it finds waiting once all of it arrived, highest priority first", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const queued = [
      message("alice", "bob", { priority: "low" }),
      message("alice", "bob"),
      message("alice", "bob", { priority: "critical" }),
    ];
    for (const input of queued) await broker.submit(input);
    // The clock stands still: the inbox must not wait for BACKLOG_WAIT_MS once the backlog is in.
    const realSetTimeout = globalThis.setTimeout;
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const inbox = (await broker.openInbox("bob"))[Symbol.asyncIterator]();
      const received: string[] = [];
      for (let i = 0; i < queued.length; i++) {
        const next = await Promise.race([
          inbox.next(),
          new Promise<"none">((resolve) => realSetTimeout(() => resolve("none"), 10_000)),
        ]);
        if (next === "none" || next.done) throw new Error(`no delivery after ${received.length}`);
        received.push(next.value.id);
      }
      expect(received).toEqual([queued[2]!.id, queued[1]!.id, queued[0]!.id]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("hands out what arrives of the backlog when less than reported comes: another consumer holds one", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    await (await broker.openInbox("bob", { maxInFlight: 2 })).close(); // the agent's consumer exists
    const [held, free, blocked] = [message("alice", "bob"), message("alice", "bob"), message("alice", "bob")];
    for (const input of [held, free, blocked]) await broker.submit(input);
    // Another consumer of bob (a client of the same consumer) holds the first one: the inbox opened
    // next is told of 2 pending messages, but its 2 in flight leave room for one of them.
    const js = jetstream(await client(server.url));
    const other = await (await js.consumers.get(INBOX_STREAM, consumerName("bob"))).next();
    expect(other?.seq).toBe(1);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 2 }));
    // Within the reader's 10 s, not after the held one's 30 s ack wait.
    expect(await inbox.next()).toMatchObject({ id: free.id, attempt: 1 });
  });

  it("keeps a delivery given back by a close going on working(), though JetStream would wait longer", async () => {
    const server = await startNats();
    // JetStream waits 15 s for a second delivery; the policy's first ack wait is 1.5 s.
    const broker = await open(server.url, { ackWaitMs: 1_500, backoffFactor: 10 });
    const head = message("alice", "bob");
    const behind = message("alice", "bob");
    await broker.submit(head);
    await broker.submit(behind);
    const first = await broker.openInbox("bob");
    await reader(first).next();
    await first.close();
    const again = reader(await broker.openInbox("bob"));
    expect(await again.next()).toMatchObject({ id: head.id, attempt: 2 });
    await broker.ack("bob", head);
    const delivery = await again.next();
    expect(delivery).toMatchObject({ id: behind.id, attempt: 1 });
    // Two of its ack waits long, the agent says it is working: the inbox does not redeliver it.
    await keepWorking(broker, delivery, 300, 3_000);
    expect(await broker.status(behind)).toMatchObject({ status: "delivered", retryCount: 0 });
    // Then it stops: the inbox redelivers it after the policy's ack wait, not JetStream's 15 s.
    expect(await again.next(8_000)).toMatchObject({ id: behind.id, attempt: 2 });
  });

  it("restarts the ack wait from a gateway where the agent's inbox is open but does not hold the delivery", async () => {
    const server = await startNats();
    const holder = await open(server.url, { ackWaitMs: 600 });
    const other = await open(server.url, { ackWaitMs: 600 });
    const input = message("alice", "bob");
    await holder.submit(input);
    const delivery = await reader(await holder.openInbox("bob")).next();
    // The agent has a socket at the other gateway too: its inbox there is open, empty.
    await other.openInbox("bob");
    await keepWorking(other, delivery, 200, 2_000);
    expect(await other.status(input)).toMatchObject({ status: "delivered", retryCount: 0 });
  });

  it("closes without waiting for a server that does not answer", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const inbox = await broker.openInbox("bob");
    // Nothing the server sends is read: the close's drain never hears back.
    const socket = socketOf(broker);
    socket.pause();
    try {
      await inbox.close();
    } finally {
      socket.resume();
    }
    const input = message("alice", "bob");
    await broker.submit(input);
    expect(await reader(await broker.openInbox("bob")).next()).toMatchObject({ id: input.id, attempt: 1 });
  });

  it("gives back at once what the server sent as the close began, not after its ack wait", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const [first, second] = [message("alice", "bob"), message("alice", "bob")];
    await broker.submit(first);
    await broker.submit(second);
    const inbox = await broker.openInbox("bob", { maxInFlight: 1 });
    expect(await reader(inbox).next()).toMatchObject({ id: first.id });
    // The broker reads nothing more until the close begins: its ack (written at the end of this
    // turn) makes room, and the server sends the second message to the pull before it sees the close.
    const socket = socketOf(broker);
    await broker.ack("bob", first);
    socket.pause();
    try {
      const jsm = await jetstreamManager(await client(server.url));
      await eventually(async () => {
        expect((await jsm.consumers.info(INBOX_STREAM, consumerName("bob"))).delivered.stream_seq).toBe(2);
      });
    } finally {
      const closed = inbox.close();
      socket.resume();
      await closed;
    }
    // Well within the reader's 10 s: the 30 s ack wait did not run out.
    const again = reader(await broker.openInbox("bob"));
    expect(await again.next()).toMatchObject({ id: second.id, attempt: 1 });
  });

  it("gives a message it holds for its route back at its close: the next inbox has it once the route gives up", async () => {
    const server = await startNats();
    const routeGateway = await open(server.url);
    const queueGateway = await open(server.url);
    const got: Delivery[] = [];
    const receiver = routeGateway.receiveRouted("alice", (delivery) => got.push(delivery));
    const input = message("bob", "alice", { route: `${routeGateway.instanceId}/socket-1` });
    await routeGateway.submit(input);
    await eventually(async () => expect(got.map((delivery) => delivery.id)).toEqual([input.id]));
    // The queue's copy reaches the inbox at the other gateway, which holds it while the route does.
    const first = await queueGateway.openInbox("alice");
    const jsm = await jetstreamManager(await client(server.url));
    await eventually(async () => {
      expect((await jsm.consumers.info(INBOX_STREAM, consumerName("alice"))).num_ack_pending).toBe(1);
    });
    await first.close();
    const again = reader(await queueGateway.openInbox("alice"));
    await receiver.close(); // the socket went away: the route gives it up
    // Within the reader's 10 s, not after the 30 s ack wait of the closed inbox's copy.
    expect(await again.next()).toMatchObject({ id: input.id, attempt: 1 });
  });

  it("does not hand out a delivery acknowledged while it waited in the queue, and keeps handing out", async () => {
    const server = await startNats();
    const broker = await open(server.url, { ackWaitMs: 500 });
    const input = message("alice", "bob");
    await broker.submit(input);
    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: input.id, attempt: 1 });
    // The agent is slow: its ack wait runs out and the redelivery waits in the inbox, not taken…
    await eventually(async () => expect(await broker.status(input)).toMatchObject({ retryCount: 1 }));
    // …when the agent acknowledges the first delivery.
    await broker.ack("bob", input);
    const later = message("alice", "bob");
    await broker.submit(later);
    expect(await inbox.next()).toMatchObject({ id: later.id });
    await broker.ack("bob", later);
    expect(warnings).toEqual([]);
  });

  it("drops a delivery waiting in its queue once it was acknowledged through another gateway, without a warning", async () => {
    const server = await startNats();
    const holder = await open(server.url, { ackWaitMs: 600 });
    const other = await open(server.url, { ackWaitMs: 600 });
    const [first, waiting, later] = [
      message("alice", "bob"),
      message("alice", "bob"),
      message("alice", "bob"),
    ];
    await holder.submit(first);
    await holder.submit(waiting);
    const inbox = reader(await holder.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: first.id });
    await holder.ack("bob", first);
    // `waiting` is out to the holder's inbox, not taken; the agent acknowledges it at the other gateway
    // (a process of it there had an earlier copy), which settles it through the hand-out's ack subject.
    await eventually(async () => expect(await holder.status(waiting)).toMatchObject({ status: "delivered" }));
    expect((await other.ack("bob", waiting)).status).toBe("acknowledged");
    // The holder's keep-alive (every 200 ms) finds it settled: it drops it rather than extend it or hand it out.
    await sleep(1_500);
    await holder.submit(later);
    expect(await inbox.next()).toMatchObject({ id: later.id });
    expect(warnings).toEqual([]);
  });

  it("warns when it cannot extend a delivery waiting in its queue, as NATS does not answer", async () => {
    const server = await startNats();
    const broker = await open(server.url, { ackWaitMs: 1_500 });
    const [first, waiting] = [message("alice", "bob"), message("alice", "bob")];
    await broker.submit(first);
    await broker.submit(waiting);
    const inbox = reader(await broker.openInbox("bob"));
    expect(await inbox.next()).toMatchObject({ id: first.id });
    // The second waits in the inbox, not taken: the inbox extends its ack wait, and cannot.
    const socket = socketOf(broker);
    socket.pause();
    try {
      await eventually(async () => {
        expect(warnings).toContainEqual(
          expect.stringMatching(new RegExp(`inbox bob: could not extend ${waiting.id} while it waits: .+`)),
        );
      }, 15_000);
    } finally {
      socket.resume();
    }
  });
});
