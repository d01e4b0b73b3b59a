import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { type Broker, type BrokerHealth, openBroker } from "../../src/broker/index.js";
import { indexStream } from "../../src/broker/nats/layout.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { needing, setLimit } from "../helpers/process-limits.js";
import { eventually, expectBrokerError, message } from "./support.js";

const startNats = useNatsServer();
const opened: Broker[] = [];
// Declared after useNatsServer, so it runs first: brokers close before their server is stopped.
afterEach(async () => {
  await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
});

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const STREAMS = "streams ACP_INBOX, ACP_INDEX_00 to ACP_INDEX_15, KV_acp_message_status reachable";

async function open(servers: string): Promise<Broker> {
  const broker = await openBroker({ nats: { servers }, onWarning: () => undefined });
  opened.push(broker);
  return broker;
}

async function healthWhere(broker: Broker, ok: boolean): Promise<BrokerHealth> {
  return eventually(async () => {
    const health = await broker.health();
    if (health.ok !== ok) throw new Error(`health is still ${JSON.stringify(health)}`);
    return health;
  }, 20_000);
}

describeWithNats("NATS broker health", () => {
  it("is degraded while nats-server is down, and ok again once it is back", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    expect(await broker.health()).toEqual({
      ok: true,
      detail: { nats: expect.stringMatching(/^reachable, rtt \d+ ms$/), jetstream: STREAMS },
    });

    await server.stop();
    const down = await healthWhere(broker, false);
    expect(down.detail).toEqual({
      nats: expect.stringMatching(/^unreachable: /),
      since: expect.stringMatching(ISO_TIME),
    });
    // Still down: the problem keeps the time it was first seen.
    expect((await broker.health()).detail.since).toBe(down.detail.since);

    await server.restart();
    expect((await healthWhere(broker, true)).detail).toEqual({
      nats: expect.any(String),
      jetstream: STREAMS,
    });
  }, 60_000);

  it("is degraded when a stream a submit writes to is gone, naming it", async () => {
    const server = await startNats();
    const broker = await open(server.url);
    const nc = await connect({ servers: server.url });
    try {
      await (await jetstreamManager(nc)).streams.delete(indexStream(7));
    } finally {
      await nc.close();
    }
    const health = await broker.health();
    expect(health.ok).toBe(false);
    expect(health.detail.nats).toMatch(/ rtt \d+ ms$/);
    expect(health.detail.jetstream).toMatch(/^stream ACP_INDEX_07 unreachable: stream not found/);
    expect(health.detail.since).toMatch(ISO_TIME);
  });

  needing("prlimit").it(
    "is degraded while JetStream refuses writes for storage, and ok after a stored write",
    async () => {
      const server = await startNats();
      const broker = await open(server.url);
      await broker.submit(message("alice", "bob"));
      setLimit(server.pid, "fsize", "1");
      await expectBrokerError(broker.submit(message("alice", "bob")), "unavailable");
      // The streams still answer their info: only the refused write tells.
      const refusing = await broker.health();
      expect(refusing).toEqual({
        ok: false,
        detail: {
          nats: expect.any(String),
          jetstream: STREAMS,
          storage: expect.stringMatching(/^write failed: .*file too large \(JetStream 10077\)$/),
          since: expect.stringMatching(ISO_TIME),
        },
      });

      setLimit(server.pid, "fsize", "unlimited");
      await broker.submit(message("alice", "bob"));
      expect(await broker.health()).toMatchObject({ ok: true, detail: { jetstream: STREAMS } });
    },
    30_000,
  );
});
