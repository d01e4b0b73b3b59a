import type { ConsumerInfo, JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { expect, it } from "vitest";
import { openBroker } from "../../src/broker/index.js";
import { Orphans } from "../../src/broker/nats/orphans.js";
import type { StatusDoc, StatusStore } from "../../src/broker/nats/status-store.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { closedAfterEach, eventually, message } from "./support.js";

const startNats = useNatsServer();
const { opened, connections } = closedAfterEach();

/**
 * Which deliveries a reclaim takes back: only those whose holder no longer answers. The end to end
 * case (a gateway process killed, the recipient reconnecting elsewhere) is
 * test/reliability/orphaned-deliveries.test.ts; here the records are set as a live gateway and a
 * dead one left them, on a real nats-server, and the naks are watched on their ack subjects.
 */
describeWithNats("NATS broker: deliveries of a dead gateway", () => {
  it("are given back at once, the oldest counted; those of a live gateway are left alone", async () => {
    const server = await startNats();
    const broker = await openBroker({ nats: { servers: server.url }, onWarning: () => undefined });
    opened.push(broker);
    const internals = broker as unknown as {
      statuses: StatusStore;
      jsm: JetStreamManager;
      nc: NatsConnection;
    };
    const inputs = [message("alice", "bob"), message("alice", "bob"), message("alice", "bob")];
    for (const input of inputs) await broker.submit(input);
    // bob's first delivery held by this (live) broker, the other two by one whose process is gone.
    const holders = [broker.instanceId, "gateway-that-died", "gateway-that-died"];
    const seqs: number[] = [];
    for (const [i, input] of inputs.entries()) {
      await internals.statuses.mutate(input, (current) => {
        const value = current!.value;
        seqs.push(value.seq);
        const next: StatusDoc = {
          ...value,
          status: "delivered",
          attempts: 1,
          dueAt: Date.now() + 600_000,
          ackSubject: `test.ack.${i}`,
          holder: holders[i],
        };
        return { next, result: undefined };
      });
    }
    const watcher = await connect({ servers: server.url });
    connections.push(watcher);
    const naks: string[] = [];
    watcher.subscribe("test.ack.>", {
      callback: (_err, msg) => {
        naks.push(`${msg.subject} ${msg.string()}`);
      },
    });
    await watcher.flush();

    const orphans = new Orphans(
      internals.nc,
      internals.jsm,
      internals.statuses,
      broker.instanceId,
      () => undefined,
    );
    const consumer = {
      num_ack_pending: 3,
      ack_floor: { stream_seq: Math.min(...seqs) - 1 },
      delivered: { stream_seq: Math.max(...seqs) },
    } as unknown as ConsumerInfo;
    expect(await orphans.reclaim("bob", consumer)).toBe(2);
    orphans.stop();
    await eventually(async () => expect(naks.sort()).toEqual(["test.ack.1 -NAK", "test.ack.2 -NAK"]));
    // The oldest of the dead gateway's stays an attempt; the other is uncounted, as a close would.
    expect(await broker.status(inputs[1]!)).toMatchObject({ status: "delivered", retryCount: 0 });
    expect((await internals.statuses.read(inputs[1]!))?.value.attempts).toBe(1);
    const uncounted = (await internals.statuses.read(inputs[2]!))?.value;
    expect(uncounted?.attempts).toBe(0);
    expect(uncounted?.holder).toBeUndefined();
    // The live gateway's delivery is untouched.
    expect((await internals.statuses.read(inputs[0]!))?.value).toMatchObject({
      attempts: 1,
      holder: broker.instanceId,
      ackSubject: "test.ack.0",
    });
  });
});
