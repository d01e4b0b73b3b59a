import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { beforeEach, expect, it } from "vitest";
import { type DeliveryOptions, openBroker } from "../../src/broker/index.js";
import { consumerName, INBOX_STREAM } from "../../src/broker/nats/layout.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { closedAfterEach, deliveredBefore, message, reader } from "./support.js";

/**
 * A NATS inbox from its open to its close: the consumer deleted under it.
 */
const startNats = useNatsServer();
const { opened, connections } = closedAfterEach();
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

async function client(servers: string): Promise<NatsConnection> {
  const nc = await connect({ servers });
  connections.push(nc);
  return nc;
}

describeWithNats("NATS inbox lifecycle", () => {
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
});
