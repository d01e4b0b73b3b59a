/**
 * What the gateway tells a stranger and the operator: `/healthz` answers anyone, so it names no
 * local path and no NATS server; and plain HTTP on a non-loopback address (`--insecure`) never
 * starts silently.
 */
import { networkInterfaces } from "node:os";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { api, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function gateway(options: Parameters<typeof startTestGateway>[0] = {}): Promise<TestGateway> {
  const gw = await startTestGateway(options);
  cleanups.push(() => gw.close());
  return gw;
}

describe("public endpoints", () => {
  it("/healthz answers a stranger without the data directory's path", async () => {
    const gw = await gateway();
    const health = await api(gw.url, "/healthz");
    expect(health.status).toBe(200);
    expect(health.json).toEqual({ status: "ok", broker: "embedded", detail: { storage: "sqlite" } });
    expect(JSON.stringify(health.json)).not.toContain(gw.dataDir);
  });

  it("--insecure on a non-loopback address logs a warning at start", async () => {
    // The machine's own non-loopback IPv4 address, for the few milliseconds of the test.
    const lan = Object.values(networkInterfaces())
      .flat()
      .find((entry) => entry?.family === "IPv4" && !entry.internal)?.address;
    if (lan === undefined) throw new Error("this test needs a non-loopback IPv4 interface");
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const gw = await gateway({ host: lan, insecure: true, logger });
    const warning = lines.find((line) => line.level === 40 && String(line.msg).includes("--insecure"));
    expect(warning).toMatchObject({ url: gw.url });
    expect(String(warning?.msg)).toContain("unencrypted");

    // On loopback nothing to warn about.
    const quiet: Record<string, unknown>[] = [];
    await gateway({
      logger: pino({ level: "info" }, { write: (line: string) => void quiet.push(JSON.parse(line)) }),
    });
    expect(quiet.filter((line) => line.level === 40)).toEqual([]);
  });
});

describeWithNats("public endpoints (NATS)", () => {
  const nats = useNatsServer();

  it("/healthz answers a stranger without the NATS server's address or the data directory's path", async () => {
    const server = await nats();
    const gw = await gateway({ natsUrl: server.url });
    const health = await api(gw.url, "/healthz");
    expect(health.status).toBe(200);
    expect(health.json).toMatchObject({ status: "ok", broker: "nats" });
    const { host, port } = new URL(server.url);
    const said = JSON.stringify(health.json);
    for (const secret of [host, port, gw.dataDir]) expect(said).not.toContain(secret);
  });
});
