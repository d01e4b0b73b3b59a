import { connect } from "@nats-io/transport-node";
import { expect, it } from "vitest";
import { openBroker } from "../../src/broker/index.js";
import { consumerName } from "../../src/broker/nats/layout.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import {
  closedAfterEach,
  deliveredBefore,
  eventually,
  exchange,
  reader,
  routedTo,
  sleep,
} from "./support.js";

/**
 * Routed deliveries given back on NATS: the agent's inbox holds each routed message it is sent
 * while its route holds it, looking at its record again within a second (NatsInbox.defer). What
 * the route gives up together must still go out in the queue's order, however those looks fall.
 */
const startNats = useNatsServer();
const { opened, connections } = closedAfterEach();

describeWithNats("NATS broker: routed deliveries given back", () => {
  it("go out oldest first when the give-back falls between the inbox's looks at them", async () => {
    const server = await startNats();
    const broker = await openBroker({ nats: { servers: server.url }, delivery: { ackWaitMs: 30_000 } });
    opened.push(broker);
    const watcher = await connect({ servers: server.url });
    connections.push(watcher);
    // The inbox tells JetStream it still works on a held message (+WPI) as it looks at it again.
    const looks: string[] = [];
    const firstLook = new Promise<void>((resolve) => {
      watcher.subscribe("$JS.ACK.>", {
        callback: (_error, msg) => {
          if (!msg.subject.includes(`.${consumerName("alice")}.`) || msg.string() !== "+WPI") return;
          looks.push(msg.subject);
          resolve();
        },
      });
    });
    await watcher.flush();
    const { got, receiver } = routedTo(broker, "alice");
    const inbox = reader(await broker.openInbox("alice"));
    const route = `${broker.instanceId}/socket-1`;
    const older = (await exchange(broker, route)).answer;
    await eventually(async () => expect(got).toHaveLength(1));
    await sleep(500); // the inbox's looks at the two half a second apart
    const newer = (await exchange(broker, route)).answer;
    await eventually(async () => expect(got).toHaveLength(2));
    // Just after the inbox looked at the older one (still held), before it looks at the newer one.
    await firstLook;
    const next = inbox.next();
    await receiver.giveBack([older, newer]);
    expect(looks).toHaveLength(1); // given back before the inbox looked at the newer one again
    expect([await next, await inbox.next()]).toMatchObject([
      { id: older.id, attempt: 1 },
      { id: newer.id, attempt: 1 },
    ]);
    // Each once: the older one's own look, due within a second, was called off when it went out.
    await sleep(1_200);
    expect(await deliveredBefore(broker, inbox, "alice")).toEqual([]);
  });
});
