/**
 * Shared pieces of the dashboard tests: a gateway with the dashboard and a small cast (alice's and
 * bob's schedulers, carol's agent), connected SDK agents, principal tokens, the dashboard API, and
 * the Debian chromium driven by playwright-core (never a downloaded browser).
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";
import { afterEach, describe, it } from "vitest";
import { AcpAgent, type AcpAgentOptions } from "../../src/client/index.js";
import type { DefaultGatewayOptions } from "../../src/server.js";
import { api, startTestGateway, type TestAgent, type TestGateway } from "./gateway.js";

export const CHROMIUM = "/usr/bin/chromium";
const MISSING = `chromium is not installed at ${CHROMIUM} (apt-get install -y chromium): the dashboard's browser tests need it`;

function chromiumPresent(): boolean {
  try {
    accessSync(CHROMIUM, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `describe` that runs only with Debian's chromium available (and fails in CI without it). */
export function describeWithChromium(name: string, body: () => void): void {
  if (chromiumPresent()) {
    describe(name, body);
  } else if (process.env.CI === "true") {
    describe(name, () => {
      it("requires chromium", () => {
        throw new Error(`${MISSING}; CI must install it`);
      });
    });
  } else {
    console.warn(`\n  NOTE: skipping "${name}": ${MISSING}\n`);
    describe.skip(name, body);
  }
}

/** A fresh headless chromium with its own profile directory, removed on close. */
export async function launchBrowser(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), "acp-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1366, height: 860 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Bundles `web/` with Vite into `dist/web` (what `npm run build` does), so the test serves current code. */
export function buildWeb(): void {
  const result = spawnSync("node_modules/.bin/vite", ["build", "web"], { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`vite build failed:\n${result.stdout}\n${result.stderr}`);
}

export interface Cast {
  gw: TestGateway;
  dir: string;
  alice: TestAgent;
  bob: TestAgent;
  carol: TestAgent;
  /** Connected SDK agents, by agent id. */
  agents: Map<string, AcpAgent>;
  connect(who: TestAgent, options?: Partial<AcpAgentOptions>): Promise<AcpAgent>;
  close(): Promise<void>;
}

/** A gateway with the dashboard and three registered agents of three principals; nothing connected yet. */
export async function startCast(options: Partial<DefaultGatewayOptions> = {}): Promise<Cast> {
  const dir = mkdtempSync(join(tmpdir(), "acp-dash-"));
  mkdirSync(join(dir, "context"));
  const gw = await startTestGateway({
    ...options,
    dashboard: { sessionsRoot: join(dir, "context"), keepAliveMs: 500, ...options.dashboard },
  });
  const agents = new Map<string, AcpAgent>();
  const cast: Cast = {
    gw,
    dir,
    alice: await gw.register("alice-scheduler", "alice", { capabilities: ["calendar.read"] }),
    bob: await gw.register("bob-scheduler", "bob"),
    carol: await gw.register("carol-agent", "carol"),
    agents,
    async connect(who, extra = {}) {
      const agent = new AcpAgent({
        gateway: gw.url,
        identity: who.identity,
        apiKey: who.apiKey,
        announce: {
          capabilities: ["calendar-management"],
          purpose: "Coordinate scheduling between principals",
        },
        layers: [0, 1, 2],
        audit: { root: join(dir, "audit") },
        state: { root: join(dir, "state") },
        reconnect: { initialDelayMs: 50, maxDelayMs: 300 },
        requestTimeoutMs: 10_000,
        ...extra,
      });
      agent.on("error", () => undefined);
      // Every agent of the cast answers plain requests, as bob's scheduler does in the demo.
      agent.onRequest("agent.request", () => ({
        available_slots: ["2026-02-18T10:00:00Z", "2026-02-19T14:00:00Z"],
      }));
      await agent.connect();
      agents.set(who.sender.agentId, agent);
      return agent;
    },
    async close() {
      for (const agent of agents.values()) await agent.close().catch(() => undefined);
      await gw.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cast;
}

/** Starts a cast per test and closes it afterwards. */
export function useCast(options: Partial<DefaultGatewayOptions> = {}): () => Promise<Cast> {
  const started: Cast[] = [];
  afterEach(async () => {
    for (const cast of started.splice(0)) await cast.close();
  });
  return async () => {
    const cast = await startCast(options);
    started.push(cast);
    return cast;
  };
}

/** Issues a principal token through the admin API. */
export async function principalToken(gw: TestGateway, principalId: string): Promise<string> {
  const res = await api(gw.url, "/api/v1/dashboard/principals", {
    body: { principal_id: principalId },
    headers: { authorization: `Bearer ${gw.adminToken}` },
  });
  if (res.status !== 201)
    throw new Error(`principal ${principalId}: ${res.status} ${JSON.stringify(res.json)}`);
  return res.json.token as string;
}

/** A dashboard API call with a Bearer token; status and parsed JSON. */
export function dashboard(
  gw: TestGateway,
  token: string | undefined,
  path: string,
  options: { method?: string; body?: unknown } = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  return api(gw.url, `/api/v1/dashboard${path}`, {
    ...options,
    ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
  });
}

/** Polls until `predicate` holds; fails naming `what` after `timeoutMs`. */
export async function eventually(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Alice's scheduler asks bob's for availability (connecting both, handshake first); bob answers. */
export async function aliceAsksBob(
  cast: Cast,
  body: Record<string, unknown> = { action: "get-availability" },
): Promise<Record<string, unknown>> {
  const alice = cast.agents.get("alice-scheduler") ?? (await cast.connect(cast.alice));
  if (!cast.agents.has("bob-scheduler")) await cast.connect(cast.bob);
  return alice.request("bob-scheduler", body);
}

export interface StreamReader {
  /** Every event so far, with comments as `{ event: "comment", data: text }`. */
  readonly events: { event: string; data: unknown }[];
  /** The first event (already received or coming) that matches; fails after `timeoutMs`. */
  next(event: string, predicate?: (data: unknown) => boolean, timeoutMs?: number): Promise<unknown>;
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/** Follows `GET /api/v1/dashboard/stream` as a browser would (fetch, Bearer token), parsing SSE. */
export async function followStream(gw: TestGateway, token: string, query = ""): Promise<StreamReader> {
  const controller = new AbortController();
  const res = await fetch(`${gw.url}/api/v1/dashboard/stream${query}`, {
    headers: { authorization: `Bearer ${token}` },
    signal: controller.signal,
  });
  if (res.status !== 200 || !res.body) throw new Error(`stream: ${res.status} ${await res.text()}`);
  const events: { event: string; data: unknown }[] = [];
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    let buffer = "";
    let event = "message";
    let data: string[] = [];
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let newline = buffer.indexOf("\n");
        while (newline !== -1) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          if (line === "") {
            if (data.length > 0) events.push({ event, data: JSON.parse(data.join("\n")) });
            event = "message";
            data = [];
          } else if (line.startsWith(":")) events.push({ event: "comment", data: line.slice(1).trim() });
          else if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trim());
          newline = buffer.indexOf("\n");
        }
      }
    } catch {
      // aborted by close()
    }
  })();
  return {
    events,
    ended,
    async next(name, predicate = () => true, timeoutMs = 10_000) {
      let found: unknown;
      await eventually(
        () => {
          const hit = events.find((e) => e.event === name && predicate(e.data));
          found = hit?.data;
          return hit !== undefined;
        },
        `a "${name}" event on the stream (have ${events.map((e) => e.event).join(", ")})`,
        timeoutMs,
      );
      return found;
    },
    close: () => controller.abort(),
  };
}
