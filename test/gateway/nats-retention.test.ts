import { jetstreamManager } from "@nats-io/jetstream";
import { connect, nanos } from "@nats-io/transport-node";
import pino from "pino";
import { afterEach, expect, it } from "vitest";
import { INBOX_STREAM } from "../../src/broker/nats/layout.js";
import { api, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

const startNats = useNatsServer();
const gateways: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((gw) => gw.close()));
});

const DAY_MS = 24 * 3_600_000;

describeWithNats("a gateway on NATS started with a shorter retention than its streams'", () => {
  it("is ready at once and logs the inbox stream's max_age lowered after start, without the NATS credentials", async () => {
    const server = await startNats({ user: "acp", pass: "nats-s3cret" });
    const nats = { servers: server.url, user: "acp", pass: "nats-s3cret" };
    await (await startTestGateway({ nats })).close();

    const lines: Array<{ level: number; msg: string }> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const gw = await startTestGateway({ nats, retentionMs: DAY_MS, logger });
    gateways.push(gw);
    expect((await api(gw.url, "/healthz")).status).toBe(200);

    await until(
      () => lines.filter((line) => line.msg.includes(INBOX_STREAM)).map((line) => line.msg),
      (messages) => messages.some((msg) => msg.includes("max_age lowered")),
      "the gateway logged the inbox stream's max_age lowered",
    );
    const logged = lines.filter((line) => line.msg.includes(`${INBOX_STREAM}: `));
    expect(logged.map((line) => line.level)).toEqual([30, 30]);
    expect(logged[0]?.msg).toMatch(/ACP_INBOX: lowering max_age from 7 d to 1 d/);
    expect(logged[1]?.msg).toMatch(/ACP_INBOX: max_age lowered from 7 d to 1 d in [\d.]+ s/);
    expect(JSON.stringify(lines)).not.toContain("nats-s3cret");

    const nc = await connect(nats);
    try {
      const jsm = await jetstreamManager(nc);
      expect((await jsm.streams.info(INBOX_STREAM)).config.max_age).toBe(nanos(DAY_MS));
    } finally {
      await nc.close();
    }
  });
});
