/**
 * Guessing credentials: wrong API keys, principal tokens and admin tokens from one address, over
 * REST, the WebSocket and /mcp, share one budget per source; past it the address is refused (429,
 * -32013, Retry-After) before any credential it sends is looked at, right or wrong, while other
 * addresses are served. A weak admin token is refused at start, naming where it came from.
 */
import { existsSync, readdirSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FailedCredentialLimiter, sourceKey } from "../../src/gateway/rate-limit.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { startDefaultGateway } from "../../src/server.js";
import { runAcp } from "../helpers/cli.js";
import { FrameClient, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

const BURST = 6;

/** An HTTP request from a chosen loopback address (127.0.0.2 is another source than 127.0.0.1). */
function call(
  url: string,
  path: string,
  headers: Record<string, string>,
  options: { method?: string; body?: string; from?: string } = {},
): Promise<{ status: number; retryAfter: string | undefined; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      {
        method: options.method ?? "GET",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        localAddress: options.from ?? "127.0.0.1",
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: res.headers["retry-after"],
            json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

const errorCode = (json: Record<string, unknown>) => (json.error as { code: number }).code;
const admin = (gw: TestGateway) => ({ authorization: `Bearer ${gw.adminToken}` });

describe("failed credential checks are throttled per source address", () => {
  let gw: TestGateway;
  let alpha: TestAgent;
  beforeEach(async () => {
    // One failure a second after a burst of 6, so the test waits a Retry-After of seconds, not minutes.
    gw = await startTestGateway({ limits: { failedCredentials: { burst: BURST, perMinute: 60 } } });
    alpha = await gw.register("agent-alpha");
  });
  afterEach(() => gw.close());

  it("wrong keys and tokens over REST, the WebSocket and /mcp share one budget; then even the right one waits", async () => {
    const guesses: (() => Promise<number>)[] = [
      async () => (await call(gw.url, "/api/v1/agents", { "x-api-key": "acp_guess-1" })).status,
      async () => (await call(gw.url, "/api/v1/agents", { authorization: "Bearer acpadm_guess" })).status,
      async () =>
        (await call(gw.url, "/api/v1/dashboard/me", { authorization: "Bearer acppr_guess" })).status,
      async () =>
        (
          await call(
            gw.url,
            "/mcp",
            { authorization: "Bearer acp_guess-2" },
            { method: "POST", body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) },
          )
        ).status,
      async () => {
        const ws = await FrameClient.connect(gw.gateway.wsUrl, "acp_guess-3");
        await ws.next("error");
        await ws.next("ready").catch(() => undefined);
        return ws.closed?.code ?? 0;
      },
      async () => {
        // A browser's first-frame key counts the same.
        const ws = await FrameClient.connect(gw.gateway.wsUrl);
        ws.send({ type: "auth", apiKey: "acp_guess-4" });
        await ws.next("error");
        await ws.next("ready").catch(() => undefined);
        return ws.closed?.code ?? 0;
      },
    ];
    expect(guesses).toHaveLength(BURST);
    expect(await Promise.all(guesses.map((guess) => guess()))).toEqual([401, 401, 401, 401, 4401, 4401]);

    // The budget is spent: the admin token itself is refused, and so is a correct API key anywhere.
    const register = await call(gw.url, "/api/v1/agents", admin(gw), {
      method: "POST",
      body: JSON.stringify({ agentId: "agent-new", principalId: "p", signing: alpha.identity.signing }),
    });
    expect(register.status).toBe(429);
    expect(errorCode(register.json)).toBe(ErrorCode.RateLimited);
    expect(Number(register.retryAfter)).toBeGreaterThanOrEqual(1);
    const mcp = await call(
      gw.url,
      "/mcp",
      { "x-api-key": alpha.apiKey },
      { method: "POST", body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) },
    );
    expect(mcp.status).toBe(429);
    const ws = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    const refused = await ws.next("error");
    expect(refused.error.code).toBe(ErrorCode.RateLimited);
    await expect(ws.next("ready")).rejects.toThrow(/4429/);

    // Unchanged: nothing was registered. Another address is served meanwhile.
    const elsewhere = await call(gw.url, "/api/v1/agents", admin(gw), { from: "127.0.0.2" });
    expect(elsewhere.status).toBe(200);
    expect((elsewhere.json.agents as { agentId: string }[]).map((a) => a.agentId)).toEqual(["agent-alpha"]);

    // Healthy once the Retry-After has passed: the right key works again from the same address.
    await new Promise((resolve) => setTimeout(resolve, Number(register.retryAfter) * 1000));
    expect((await call(gw.url, "/api/v1/agents", { "x-api-key": alpha.apiKey })).status).toBe(200);
    const socket = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
    await socket.next("ready");
    await socket.close();
  });

  it("a missing credential is not a guess; a right one does not count", async () => {
    for (let i = 0; i < BURST * 2; i++) {
      expect((await call(gw.url, "/api/v1/agents", {})).status).toBe(401);
      expect((await call(gw.url, "/api/v1/agents", { "x-api-key": alpha.apiKey })).status).toBe(200);
    }
  });
});

describe("the table of failing sources", () => {
  it("stays bounded whatever the number of addresses, forgetting the oldest", () => {
    let now = 0;
    const limiter = new FailedCredentialLimiter({ burst: 1, perMinute: 1, maxSources: 1_000 }, () => now);
    for (let i = 0; i < 50_000; i++) limiter.failed(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(limiter.size).toBe(1_000);
    expect(() => limiter.check("10.0.195.79")).toThrow(/too many failed credential checks/);
    expect(() => limiter.check("10.0.0.0")).not.toThrow();
    now += 60_000;
    expect(() => limiter.check("10.0.195.79")).not.toThrow();
    expect(limiter.size).toBe(999);
  });

  it("counts an IPv6 host by its /64 and an IPv4-mapped address as IPv4", () => {
    expect(sourceKey("2001:db8:1:2:aaaa::1")).toBe(sourceKey("2001:db8:1:2:ffff:1:2:3"));
    expect(sourceKey("2001:db8:1:3::1")).not.toBe(sourceKey("2001:db8:1:2::1"));
    expect(sourceKey("::ffff:192.0.2.7")).toBe("192.0.2.7");
    expect(sourceKey("::1")).toBe("0:0:0:0::/64");
  });
});

describe("a weak admin token", () => {
  const tmp = useTmpDir("acp-admin-token-");

  it("is refused at start, naming ACP_ADMIN_TOKEN or the option, before anything is written", async () => {
    const data = join(tmp(), "data");
    const previous = process.env.ACP_ADMIN_TOKEN;
    process.env.ACP_ADMIN_TOKEN = "change-me";
    try {
      await expect(startDefaultGateway({ port: 0, data, logger: pino({ level: "silent" }) })).rejects.toThrow(
        /^ACP_ADMIN_TOKEN is too weak for the admin token \(9 characters, about 26 bits\)/,
      );
    } finally {
      if (previous === undefined) delete process.env.ACP_ADMIN_TOKEN;
      else process.env.ACP_ADMIN_TOKEN = previous;
    }
    await expect(
      startDefaultGateway({ port: 0, data, adminToken: "a".repeat(64), logger: pino({ level: "silent" }) }),
    ).rejects.toThrow(/^the adminToken option is too weak .*make one with `openssl rand -base64 32`/);
    expect(existsSync(data)).toBe(false);
  });

  it("stops `acp gateway` with an error naming the variable, without repeating the token", async () => {
    const data = join(tmp(), "data");
    const weak = await runAcp(["gateway", "--data", data, "--port", "0"], {
      env: { ACP_ADMIN_TOKEN: "correct-horse-battery-staple" },
    });
    expect(weak.code).not.toBe(0);
    expect(weak.stderr).toContain("ACP_ADMIN_TOKEN is too weak for the admin token");
    expect(weak.stderr).not.toContain("correct-horse-battery-staple");
    expect(existsSync(data) ? readdirSync(data) : []).toEqual([]);
  });
});
