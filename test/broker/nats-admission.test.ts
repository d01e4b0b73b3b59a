import { afterEach, expect, it } from "vitest";
import { type Broker, openBroker } from "../../src/broker/index.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { message, reader, sleep } from "./support.js";

const startNats = useNatsServer();
const opened: Broker[] = [];
const paused: number[] = [];
// Declared after useNatsServer, so it runs first: the server resumes and brokers close before it stops.
afterEach(async () => {
  for (const pid of paused.splice(0)) process.kill(pid, "SIGCONT");
  await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
});

/**
 * The bound on submissions a NATS gateway has in JetStream at once, against a real nats-server that
 * is paused (SIGSTOP) so that stores stay unanswered: what is over the bound waits, and is refused
 * as unavailable (nothing stored) once it waited too long; deliveries go on meanwhile.
 */
describeWithNats("NATS broker: submissions in flight", () => {
  it("holds submissions over the bound, refuses those that wait too long, and stores none of them", async () => {
    const server = await startNats();
    const broker = await openBroker({
      nats: { servers: server.url, maxPendingSubmits: 2, submitStallMs: 400 },
      onWarning: () => undefined,
    });
    opened.push(broker);
    const inbox = await broker.openInbox("bob");
    const first = [message("alice", "bob"), message("alice", "bob")];

    process.kill(server.pid, "SIGSTOP");
    paused.push(server.pid);
    const storing = first.map((m) => broker.submit(m));
    const over = message("alice", "bob");
    const refused = broker.submit(over);
    refused.catch(() => undefined);
    await sleep(1_000);
    process.kill(server.pid, "SIGCONT");
    paused.pop();

    await expect(refused).rejects.toMatchObject({
      kind: "unavailable",
      message: expect.stringContaining("NATS is not keeping up: the message waited 0.4 s"),
    });
    await expect(Promise.all(storing)).resolves.toEqual(
      first.map((m) => ({ id: m.id, status: "queued", duplicate: false })),
    );
    expect(await broker.status(over)).toBeNull();
    // The refused one can be sent again, and everything stored arrives in order.
    await expect(broker.submit(over)).resolves.toMatchObject({ id: over.id, duplicate: false });
    const bob = reader(inbox);
    for (const m of [...first, over]) {
      const delivery = await bob.next();
      expect(delivery.id).toBe(m.id);
      await broker.ack("bob", delivery);
    }
  }, 30_000);

  it("keeps a sender's order when its submissions wait for a place", async () => {
    const server = await startNats();
    const broker = await openBroker({
      nats: { servers: server.url, maxPendingSubmits: 1 },
      onWarning: () => undefined,
    });
    opened.push(broker);
    const inbox = await broker.openInbox("bob");
    const sent = Array.from({ length: 20 }, () => message("alice", "bob"));
    const results = await Promise.all(sent.map((m) => broker.submit(m)));
    expect(results.map((r) => r.id)).toEqual(sent.map((m) => m.id));
    const bob = reader(inbox);
    for (const m of sent) {
      const delivery = await bob.next();
      expect(delivery.id).toBe(m.id);
      await broker.ack("bob", delivery);
    }
  }, 30_000);
});
