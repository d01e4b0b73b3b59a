/**
 * `GET /healthz`: its shape, the relay audit log as a warning, and a NATS server that goes away.
 * The disk-full case (503 while full, 200 after) runs on a gateway child process in
 * test/reliability/storage.test.ts, because it lowers the process's file size limit.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { buildNotification } from "../../src/protocol/index.js";
import { api, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, type NatsServer, useNatsServer } from "../helpers/nats.js";
import { handshake, submit } from "../helpers/messaging.js";

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const gateways: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((gw) => gw.close()));
});

async function open(options: Parameters<typeof startTestGateway>[0] = {}): Promise<TestGateway> {
  const gw = await startTestGateway(options);
  gateways.push(gw);
  return gw;
}

describe("GET /healthz on the embedded broker", () => {
  it("answers 200 ok with the store it checked, and no warnings", async () => {
    const gw = await open();
    const health = await api(gw.url, "/healthz");
    expect(health.status).toBe(200);
    expect(health.headers.get("cache-control")).toBe("no-store");
    expect(health.json).toEqual({
      status: "ok",
      broker: "embedded",
      // Never the data directory's path: /healthz answers anyone.
      detail: { storage: "sqlite" },
    });
  });

  it("warns while a sender's relay audit log cannot be appended, stays 200, and clears when it can", async () => {
    const gw = await open();
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    // A file where agent-alpha's log directory must go: opening the log fails (a real fault).
    const blocker = join(gw.dataDir, "relay-audit", "agent-alpha");
    mkdirSync(join(gw.dataDir, "relay-audit"), { recursive: true });
    writeFileSync(blocker, "not a directory");

    await handshake(gw, alpha, beta);
    // beta's log keeps working meanwhile: its appends must not hide alpha's failing one.
    const warned = await pollHealth(gw, (json) => json.warnings !== undefined);
    expect(warned.status).toBe(200);
    expect(warned.json).toMatchObject({ status: "ok", detail: { storage: expect.any(String) } });
    expect(warned.json.warnings).toEqual({
      audit: expect.stringMatching(
        /^appends failing for 1 sender's relay audit log: \S+.*; see the gateway log$/,
      ),
      since: expect.stringMatching(ISO_TIME),
    });
    expect(JSON.stringify(warned.json)).not.toContain("agent-alpha");
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(/^acp_audit_errors_total [1-9]\d*$/m);

    rmSync(blocker);
    const sent = await submit(gw, alpha, buildNotification(alpha.sender, "agent-beta", { n: 1 }));
    expect(sent.status).toBe(202);
    const cleared = await pollHealth(gw, (json) => json.warnings === undefined);
    expect(cleared.status).toBe(200);
    expect(cleared.json).toEqual({
      status: "ok",
      broker: "embedded",
      detail: { storage: expect.any(String) },
    });
  });
});

describeWithNats("GET /healthz on NATS", () => {
  const startNats = useNatsServer();

  it("answers 503 degraded while nats-server is down, and 200 once it is back", async () => {
    const server = await startNats();
    // Closed here, before useNatsServer's clean-up stops the server under it.
    const gw = await startTestGateway({ natsUrl: server.url });
    try {
      await expectDownAndBack(gw, server);
    } finally {
      await gw.close();
    }
  }, 60_000);

  it("still shuts down cleanly while nats-server is gone (nothing left to drain)", async () => {
    const server = await startNats();
    const gw = await startTestGateway({ natsUrl: server.url });
    await server.stop("SIGKILL");
    await pollHealth(gw, (json) => json.status === "degraded");
    // Draining needs the server's answer: close gives up on it instead of failing after a long wait.
    await expect(gw.close()).resolves.toBeUndefined();
  }, 60_000);
});

async function expectDownAndBack(gw: TestGateway, server: NatsServer): Promise<void> {
  const up = await api(gw.url, "/healthz");
  expect([up.status, up.json.status, up.json.broker]).toEqual([200, "ok", "nats"]);
  expect(up.json.detail).toEqual({
    nats: expect.stringMatching(/ rtt \d+ ms$/),
    jetstream: "streams ACP_INBOX, ACP_INDEX_00 to ACP_INDEX_15, KV_acp_message_status reachable",
  });

  await server.stop();
  const down = await pollHealth(gw, (json) => json.status === "degraded");
  expect(down.status).toBe(503);
  expect(down.json.detail).toEqual({
    nats: expect.stringMatching(/^unreachable: /),
    since: expect.stringMatching(ISO_TIME),
  });

  await server.restart();
  const back = await pollHealth(gw, (json) => json.status === "ok");
  expect(back.status).toBe(200);
}

async function pollHealth(
  gw: TestGateway,
  done: (json: Record<string, unknown>) => boolean,
): Promise<{ status: number; json: Record<string, unknown> }> {
  let last: { status: number; json: Record<string, unknown> } | undefined;
  await expect
    .poll(
      async () => {
        last = await api(gw.url, "/healthz");
        return done(last.json);
      },
      { timeout: 20_000, interval: 50 },
    )
    .toBe(true);
  return last as { status: number; json: Record<string, unknown> };
}
