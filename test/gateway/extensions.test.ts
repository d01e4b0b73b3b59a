/**
 * The gateway core with extensions chosen by the caller (`startGateway`), and the extension
 * lifecycle: mount (the core's services and router), start (awaited before ready), upgrade,
 * beforeDrain and close, in order.
 */
import { createConnection } from "node:net";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type Gateway, type GatewayExtension, sendJson, startGateway } from "../../src/gateway/index.js";
import { approvalsExtension } from "../../src/server.js";
import { ADMIN_TOKEN, api, registerTestAgent } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

// Registered first, so a data directory is removed after the gateway using it has closed.
const tmp = useTmpDir("acp-core-");
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function core(extensions: GatewayExtension[]): Promise<Gateway> {
  const data = tmp();
  const gateway = await startGateway({
    port: 0,
    data,
    adminToken: ADMIN_TOKEN,
    logger: pino({ level: "silent" }),
    extensions,
  });
  cleanups.push(() => gateway.close());
  return gateway;
}

/** Sends an HTTP upgrade request to `path` and says whether the socket got an answer or was dropped. */
function upgrade(url: string, path: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: hostname, port: Number(port) }, () =>
      socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n`),
    );
    let text = "";
    socket.setEncoding("utf8").on("data", (chunk: string) => {
      text += chunk;
    });
    socket.on("close", () => resolve(text === "" ? "dropped" : (text.split("\r\n")[0] ?? "")));
    socket.on("error", reject);
  });
}

describe("startGateway: the core with the caller's extensions", () => {
  it("with none, serves the core API only: no dashboard, collaboration or MCP endpoint", async () => {
    const gateway = await core([]);
    expect((await api(gateway.url, "/healthz")).status).toBe(200);
    const alice = await registerTestAgent(gateway.url, "alice", "p-alice");
    expect((await api(gateway.url, "/api/v1/agents", { apiKey: alice.apiKey })).status).toBe(200);
    for (const path of ["/api/v1/dashboard/feed", "/api/v1/handoffs", "/mcp", "/api/v1/approvals"]) {
      const res = await api(gateway.url, path, { apiKey: alice.apiKey });
      expect([path, res.status]).toEqual([path, 404]);
    }
  });

  it("with approvals alone, serves approvals and nothing else", async () => {
    const gateway = await core([approvalsExtension()]);
    const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
    const listed = await api(gateway.url, "/api/v1/approvals", admin);
    expect(listed.status).toBe(200);
    expect(listed.json).toEqual({ approvals: [] });
    expect((await api(gateway.url, "/api/v1/dashboard/approvals", admin)).status).toBe(200);
    expect((await api(gateway.url, "/api/v1/handoffs", admin)).status).toBe(404);
  });

  it("runs each extension's hooks in order, gives it the core's services, and routes its upgrades", async () => {
    const calls: string[] = [];
    let started = false;
    const probe: GatewayExtension = {
      name: "probe",
      mount(ctx, router) {
        calls.push("mount");
        router.add("GET", "/probe", async (req, res) => {
          const caller = await ctx.credentials.resolve(req, ["agent", "principal", "admin"]);
          sendJson(res, 200, { caller: caller.kind, started });
        });
        return {
          async start() {
            // The services it was mounted with are the running gateway's.
            await ctx.broker.kv("probe").put("k", { at: "start" });
            await new Promise((resolve) => setTimeout(resolve, 50));
            started = true;
            calls.push("start");
          },
          upgrade(_req, socket, _head, path) {
            if (path !== "/probe/ws") return false;
            socket.end("HTTP/1.1 418 I'm a teapot\r\n\r\n");
            return true;
          },
          beforeDrain: () => calls.push("beforeDrain"),
          async close() {
            calls.push("close");
          },
        };
      },
    };
    const gateway = await core([probe]);
    expect(calls).toEqual(["mount", "start"]);
    const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
    expect((await api(gateway.url, "/probe", admin)).json).toEqual({ caller: "admin", started: true });
    expect(
      (await api(gateway.url, "/probe", { headers: { authorization: "Bearer nope" } })).json,
    ).toMatchObject({
      error: { message: "unknown or revoked credential" },
    });
    expect(await upgrade(gateway.url, "/probe/ws")).toBe("HTTP/1.1 418 I'm a teapot");
    expect(await upgrade(gateway.url, "/elsewhere")).toBe("dropped");
    await gateway.close();
    expect(calls).toEqual(["mount", "start", "beforeDrain", "close"]);
  });

  it("refuses two extensions of one name, and a failed start stops start-up having released everything", async () => {
    const nothing = () => ({});
    await expect(
      core([
        { name: "twice", mount: nothing },
        { name: "twice", mount: nothing },
      ]),
    ).rejects.toThrow('two gateway extensions are named "twice"');
    const closed: string[] = [];
    const failing: GatewayExtension[] = [
      { name: "fine", mount: () => ({ close: async () => void closed.push("fine") }) },
      {
        name: "broken",
        mount: () => ({
          start: async () => {
            throw new Error("index unavailable");
          },
          close: async () => void closed.push("broken"),
        }),
      },
    ];
    const data = tmp();
    const options = { port: 0, data, adminToken: ADMIN_TOKEN, logger: pino({ level: "silent" }) };
    await expect(startGateway({ ...options, extensions: failing })).rejects.toThrow("index unavailable");
    expect(closed).toEqual(["fine", "broken"]);
    // The broker was closed too: the same data directory opens again at once.
    const again = await startGateway(options);
    await again.close();
  });
});
