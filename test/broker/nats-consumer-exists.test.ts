import { JetStreamApiError, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { expect, it, vi } from "vitest";
import { openBroker } from "../../src/broker/index.js";
import { consumerName, INBOX_STREAM } from "../../src/broker/nats/layout.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { closedAfterEach, message, reader } from "./support.js";

const startNats = useNatsServer();
const { opened, connections } = closedAfterEach();

/**
 * A newer nats-server (2.10+) refuses a consumer create whose config differs from the existing
 * consumer's with JetStream error 10148, "consumer already exists"; the broker then updates the
 * consumer in place, keeping its delivery state. Debian's nats-server (2.9) updates it on the create
 * itself and never answers 10148, so that answer is injected here: everything else is the real
 * server.
 */
describeWithNats("NATS broker: an inbox's consumer that already exists with another config", () => {
  async function open() {
    const server = await startNats();
    const broker = await openBroker({ nats: { servers: server.url }, onWarning: () => undefined });
    opened.push(broker);
    const nc = await connect({ servers: server.url });
    connections.push(nc);
    // The broker's own JetStream manager, whose consumer creates are to be refused once.
    const brokerJsm = (broker as unknown as { jsm: JetStreamManager }).jsm;
    return { broker, brokerJsm, observer: await jetstreamManager(nc) };
  }

  const refusal = (err_code: number, description: string) =>
    new JetStreamApiError({ err_code, code: 400, description });

  it("is updated to the new config on 10148, keeps what was queued, and delivers", async () => {
    const { broker, brokerJsm, observer } = await open();
    await (await broker.openInbox("bob", { maxInFlight: 4 })).close();
    const queued = message("alice", "bob");
    await broker.submit(queued);

    const add = vi
      .spyOn(brokerJsm.consumers, "add")
      .mockRejectedValueOnce(refusal(10148, "consumer already exists"));
    const update = vi.spyOn(brokerJsm.consumers, "update");
    const inbox = await broker.openInbox("bob", { maxInFlight: 8 });
    expect(add).toHaveBeenCalledTimes(1);
    expect(update).toHaveBeenCalledTimes(1);
    const info = await observer.consumers.info(INBOX_STREAM, consumerName("bob"));
    expect(info.config.max_ack_pending).toBe(8);

    const bob = reader(inbox);
    expect((await bob.next()).id).toBe(queued.id);
    await broker.ack("bob", queued);
    const later = message("alice", "bob");
    await broker.submit(later);
    expect((await bob.next()).id).toBe(later.id);
  }, 30_000);

  it("passes any other refusal on, and the inbox can be opened afterwards", async () => {
    const { broker, brokerJsm } = await open();
    vi.spyOn(brokerJsm.consumers, "add").mockRejectedValueOnce(refusal(10012, "insufficient resources"));
    const update = vi.spyOn(brokerJsm.consumers, "update");
    await expect(broker.openInbox("bob")).rejects.toThrow("insufficient resources");
    expect(update).not.toHaveBeenCalled();
    await expect(broker.openInbox("bob")).resolves.toBeDefined();
  }, 30_000);
});
