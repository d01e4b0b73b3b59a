/**
 * 10,000 idle WebSockets, each an authenticated agent with an open inbox, held open against one
 * gateway process: it keeps serving, every connection is counted, and its memory stays under a
 * stated bound (peak RSS, Linux VmHWM). With a lower open-files limit than 10,000 + slack the
 * test uses what the limit allows and says so.
 */
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { ADMIN_TOKEN, api } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { recordFigures } from "./support/figures.js";
import {
  type GatewayChild,
  memoryOf,
  openFilesLimit,
  setLimit,
  sleep,
  spawnGateway,
} from "./support/processes.js";

const WANTED = 10_000;
/** The stated bound: peak resident memory of the gateway holding them (measured: ~200 MB, ~8 KB each). */
const PEAK_RSS_BOUND_MB = 512;

/** Raises this process's soft open-files limit to its hard limit (no privilege needed); children inherit it. */
function raiseOpenFiles(): number {
  const hard = Number(
    /^Max open files\s+\d+\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1] ?? 0,
  );
  if (hard > openFilesLimit()) setLimit(process.pid, "nofile", String(hard), String(hard));
  return openFilesLimit();
}

/** Runs `task(i)` for i in [0, count) with `width` at a time. */
async function inParallel(count: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

describe("10,000 idle WebSockets", () => {
  const tmp = useTmpDir("acp-rel-idle-");
  let gateway: GatewayChild | undefined;
  const sockets: WebSocket[] = [];
  afterEach(async () => {
    for (const ws of sockets.splice(0)) ws.terminate();
    await gateway?.kill();
  });

  it("holds them with bounded memory and keeps serving", async () => {
    const count = Math.min(WANTED, raiseOpenFiles() - 1_000);
    gateway = await spawnGateway({ cli: ["--data", tmp()] });
    const { url, wsUrl, pid } = gateway;
    const startRss = memoryOf(pid).rssMb;

    // One key pair for all: registration does not require distinct keys, and it keeps setup cheap.
    const signing = publicIdentity(generateIdentity("idle-00000", "principal-idle")).signing;
    const keys: string[] = new Array(count);
    const registeredAt = Date.now();
    await inParallel(count, 32, async (i) => {
      const agentId = `idle-${String(i).padStart(5, "0")}`;
      const res = await api(url, "/api/v1/agents", {
        body: { agentId, principalId: "principal-idle", signing },
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      if (res.status !== 201)
        throw new Error(`register ${agentId}: ${res.status} ${JSON.stringify(res.json)}`);
      keys[i] = res.json.apiKey as string;
    });
    const registerSeconds = (Date.now() - registeredAt) / 1000;
    const registeredRss = memoryOf(pid).rssMb;

    const openedAt = Date.now();
    let refused = 0;
    await inParallel(count, 100, async (i) => {
      const ws = new WebSocket(wsUrl, { headers: { "x-api-key": keys[i] as string } });
      sockets.push(ws);
      const ready = await new Promise<boolean>((resolve) => {
        ws.once("message", (data) => resolve(data.toString().includes('"type":"ready"')));
        ws.once("error", () => resolve(false));
        ws.once("close", () => resolve(false));
      });
      if (!ready) refused++;
    });
    const openSeconds = (Date.now() - openedAt) / 1000;
    // Idle: nothing but the gateway's pings for a while.
    await sleep(3_000);
    const open = sockets.filter((ws) => ws.readyState === WebSocket.OPEN).length;
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const gauge = Number(/^acp_ws_connections (\d+)/m.exec(metrics)?.[1] ?? -1);
    const health = await api(url, "/healthz");
    const agent = await api(url, "/api/v1/agents/idle-00001", { apiKey: keys[0] });
    const held = memoryOf(pid);

    for (const ws of sockets.splice(0)) ws.close();
    await sleep(2_000);
    const afterClose = memoryOf(pid);
    recordFigures("idle-websockets", {
      connections: count,
      openFilesLimit: openFilesLimit(),
      refused,
      stillOpenAfterIdle: open,
      gaugeWhileOpen: gauge,
      registerSeconds,
      openSeconds,
      rssStartMb: startRss,
      rssRegisteredMb: registeredRss,
      rssHoldingMb: held.rssMb,
      peakRssMb: held.peakRssMb,
      kbPerConnection: Math.round(((held.rssMb - registeredRss) * 1024) / count),
      rssAfterCloseMb: afterClose.rssMb,
      peakRssBoundMb: PEAK_RSS_BOUND_MB,
    });

    expect(count).toBeGreaterThanOrEqual(Math.min(WANTED, 1_000));
    expect(refused).toBe(0);
    expect(open).toBe(count);
    expect(gauge).toBe(count);
    expect(health.status).toBe(200);
    expect(agent.status).toBe(200);
    expect(held.peakRssMb).toBeLessThan(PEAK_RSS_BOUND_MB);
    expect(gateway.child.exitCode).toBeNull();
  }, 240_000);
});
