import { expect, it } from "vitest";
import { type Broker, type CommonBrokerOptions, type Delivery, openBroker } from "../../src/broker/index.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { closedAfterEach, deliveredBefore, eventually, message, reader, sleep } from "./support.js";

/**
 * A message routed to one socket of its agent (SubmitInput.route) also reaches the agent's queue,
 * JetStream's durable consumer: the inbox there holds it while the route does (NatsInbox.defer)
 * and hands it out as soon as the route gives it up. What the recipient says about a routed
 * delivery (working, ack) reaches the receiver holding it, or at least its status record.
 */
const startNats = useNatsServer();
const { opened } = closedAfterEach();

async function open(servers: string, options: CommonBrokerOptions = {}): Promise<Broker> {
  const broker = await openBroker({ nats: { servers }, onWarning: () => undefined, ...options });
  opened.push(broker);
  return broker;
}

/** alice's routed deliveries at `broker`, kept as they come; and a message routed there. */
async function routedVia(broker: Broker, from: Broker) {
  const got: Delivery[] = [];
  const receiver = broker.receiveRouted("alice", (delivery) => got.push(delivery));
  const input = message("bob", "alice", { route: `${broker.instanceId}/socket-1` });
  await from.submit(input);
  await eventually(async () => expect(got.map((delivery) => delivery.id)).toEqual([input.id]));
  return { input, receiver };
}

describeWithNats("NATS inbox: a message its route holds", () => {
  it("hands a routed message out from the queue once its route gives it up, long before its ack wait", async () => {
    const server = await startNats();
    const routeGateway = await open(server.url, { delivery: { ackWaitMs: 30_000 } });
    const queueGateway = await open(server.url, { delivery: { ackWaitMs: 30_000 } });
    const { input, receiver } = await routedVia(routeGateway, routeGateway);
    // The queue's copy waits while the socket holds it (its ack wait: 30 s), looked at again each second.
    const queue = reader(await queueGateway.openInbox("alice"));
    await sleep(1_500);
    await receiver.close(); // the socket went away: the route gives its hand-out back, uncounted
    expect(await queue.next(10_000)).toMatchObject({ id: input.id, attempt: 1, envelope: input.envelope });
    await queueGateway.ack("alice", input);
    expect(await routeGateway.status(input)).toMatchObject({ status: "acknowledged", retryCount: 0 });
    expect(await deliveredBefore(queueGateway, queue, "alice")).toEqual([]);
  });

  it("restarts the ack wait of the last allowed routed delivery on working(): the ack after it is taken", async () => {
    const server = await startNats();
    const broker = await open(server.url, { delivery: { ackWaitMs: 5_000, maxDeliver: 1 } });
    const { input } = await routedVia(broker, broker);
    await broker.working("alice", input);
    await sleep(100); // the timers due by now have run: the receiver still holds it
    expect(await broker.ack("alice", input)).toMatchObject({ status: "acknowledged", retryCount: 0 });
  });

  it("moves a routed delivery's ack wait on working(): the queue hands it out only after the new end", async () => {
    const server = await startNats();
    const ackWaitMs = 3_000;
    const broker = await open(server.url, { delivery: { ackWaitMs } });
    const { input } = await routedVia(broker, broker);
    const queue = reader(await broker.openInbox("alice"));
    // Halfway through its ack wait the agent says it is working, then never answers.
    await sleep(ackWaitMs / 2);
    const workingAt = Date.now();
    await broker.working("alice", input);
    // The route gives it up when the new ack wait ends, and the queue hands it out 100 ms after
    // that (time for the route's own release to land first). A lower bound only: load makes a
    // delivery late, never early.
    expect(await queue.next(15_000)).toMatchObject({ id: input.id, attempt: 2 });
    expect(Date.now()).toBeGreaterThanOrEqual(workingAt + ackWaitMs + 90);
  });

  it("moves a routed delivery's ack wait on working() at another gateway than the one holding it", async () => {
    const server = await startNats();
    const ackWaitMs = 3_000;
    const holder = await open(server.url, { delivery: { ackWaitMs } });
    const other = await open(server.url, { delivery: { ackWaitMs } });
    const { input } = await routedVia(holder, holder);
    const queue = reader(await other.openInbox("alice"));
    await sleep(ackWaitMs / 2);
    const workingAt = Date.now();
    await other.working("alice", input);
    // The holder's receiver keeps it until the new end, then the queue has it (a lower bound only).
    expect(await queue.next(15_000)).toMatchObject({ id: input.id, attempt: 2 });
    expect(Date.now()).toBeGreaterThanOrEqual(workingAt + ackWaitMs);
  });

  it("takes working() and the ack for a routed delivery at another gateway than the one holding it", async () => {
    const server = await startNats();
    const holder = await open(server.url);
    const other = await open(server.url);
    const { input } = await routedVia(holder, other);
    await other.working("alice", input);
    expect(await other.status(input)).toMatchObject({ status: "delivered", retryCount: 0 });
    expect(await other.ack("alice", input)).toMatchObject({ status: "acknowledged", retryCount: 0 });
    expect(await holder.status(input)).toMatchObject({ status: "acknowledged" });
  });
});
