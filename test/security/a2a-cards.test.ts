/**
 * An A2A card cannot redirect credentials. The outbound bridge sends an A2A agent's credentials and
 * every caller's text to the JSON-RPC endpoint its card names; a card served from origin X naming an
 * endpoint on origin Y would send them to Y. Replayed against real gateways: such a card is refused
 * at registration unless the admin names Y (`endpoint_origin`), a record stored without that opt-in
 * is not served, and a card fetched over https never gets an http endpoint.
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, api, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { tlsCertificate } from "../helpers/tls.js";
import { until } from "../helpers/until.js";
import { spawnGateway } from "../reliability/support/processes.js";
import { type RecordingListener, recordingListener } from "./helpers.js";

const REMOTE = "/api/v1/a2a/remote-agents";
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

function card(endpoint: string) {
  return {
    name: "Billing",
    supportedInterfaces: [{ url: endpoint, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    capabilities: { streaming: false },
    skills: [{ id: "invoices", name: "Invoices" }],
  };
}

/** Serves the card `cardFor(own origin)` at /.well-known/agent-card.json, over http or https. */
async function cardServer(
  cardFor: (origin: string) => unknown,
  tls?: { cert: string; key: string },
): Promise<string> {
  let origin = "";
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    const body = JSON.stringify(cardFor(origin));
    res.writeHead(200, { "content-type": "application/json" }).end(body);
  };
  const server = tls
    ? createHttpsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, handle)
    : createHttpServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `${tls ? "https" : "http"}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  cleanups.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return origin;
}

async function listener(host: string): Promise<RecordingListener> {
  const recording = await recordingListener(host);
  cleanups.push(() => recording.close());
  return recording;
}

function register(url: string, body: Record<string, unknown>) {
  return api(url, REMOTE, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body });
}

describe("A2A cards: the endpoint stays on the card's origin", () => {
  it("refuses a card naming another origin's endpoint, unless the admin names that origin", async () => {
    const other = await listener("127.0.0.2");
    const otherOrigin = `http://127.0.0.2:${other.port}`;
    const served = await cardServer(() => card(`${otherOrigin}/rpc`));
    // The addresses are allowed: what is refused here is the origin.
    const gw: TestGateway = await startTestGateway({ allowPrivateUrls: true });
    cleanups.push(() => gw.close());

    const refused = await register(gw.url, {
      url: served,
      agent_id: "billing",
      credentials: { headers: { "X-API-Key": "billing-secret" } },
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({
      code: -32602,
      data: { problems: [{ path: "/card/supportedInterfaces/0/url", message: "not on the card's origin" }] },
    });
    expect(String((refused.json.error as { message: string }).message)).toContain(
      `--endpoint-origin ${otherOrigin}`,
    );
    expect(
      (await register(gw.url, { url: served, agent_id: "billing", endpoint_origin: "http://elsewhere:1" }))
        .status,
    ).toBe(400);
    expect(await gw.gateway.context.registry.get("billing")).toBeUndefined();
    expect((await api(gw.url, REMOTE, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json).toEqual(
      {
        agents: [],
      },
    );
    expect(other.connections).toBe(0);

    // The admin vouches for the other origin: registered, and it says so.
    const vouched = await register(gw.url, {
      url: served,
      agent_id: "billing",
      endpoint_origin: `${otherOrigin}/`,
    });
    expect(vouched.status).toBe(201);
    expect(vouched.json).toMatchObject({ endpoint: `${otherOrigin}/rpc`, endpoint_origin: otherOrigin });
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });

  it("a stored record whose endpoint left the card's origin without the opt-in is not served", async () => {
    const other = await listener("127.0.0.2");
    const otherOrigin = `http://127.0.0.2:${other.port}`;
    const served = await cardServer(() => card(`${otherOrigin}/rpc`));
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const first = await startTestGateway({ allowPrivateUrls: true });
    const data = first.dataDir;
    expect(
      (await register(first.url, { url: served, agent_id: "billing", endpoint_origin: otherOrigin })).status,
    ).toBe(201);
    // What an earlier gateway stored: the same record, without the opt-in.
    const records = first.gateway.broker.kv<Record<string, unknown>>("a2a-outbound");
    const stored = (await records.get("billing"))?.value as Record<string, unknown>;
    const { endpointOrigin: _optIn, ...earlier } = stored;
    await records.put("billing", earlier);
    await first.gateway.close();

    const again = await startTestGateway({ dataDir: data, allowPrivateUrls: true, logger });
    cleanups.push(() => again.close());
    const refused = await until(
      () => lines.find((line) => line.agent === "billing" && line.level === 50),
      (line) => line !== undefined,
      "the gateway says it does not serve the agent",
    );
    expect(refused).toMatchObject({
      msg: "A2A bridge does not serve the agent: remove it and register it again",
    });
    expect(String(refused?.err)).toContain("on another origin");
    expect(other.connections).toBe(0);
    expect((await fetch(`${again.url}/healthz`)).status).toBe(200);
  });
});

describe("A2A cards: https never downgrades to http", () => {
  const tmp = useTmpDir("acp-sec-cards-");

  it("refuses an https card naming an http endpoint, even one the admin names; an https endpoint is fine", async () => {
    const dir = tmp();
    const tls = tlsCertificate(dir);
    // The same host and port, over http.
    const downgrading = await cardServer((origin) => card(`${origin.replace(/^https:/, "http:")}/rpc`), tls);
    const secure = await cardServer((origin) => card(`${origin}/rpc`), tls);
    // A real `acp gateway` that trusts the test certificate.
    const gw = await spawnGateway({
      cli: ["--data", join(dir, "data"), "--allow-private-urls", "127.0.0.1"],
      env: { NODE_EXTRA_CA_CERTS: tls.cert },
    });
    cleanups.push(() => gw.stop());

    for (const endpointOrigin of [undefined, downgrading.replace(/^https:/, "http:")]) {
      const refused = await register(gw.url, {
        url: downgrading,
        agent_id: "billing",
        ...(endpointOrigin && { endpoint_origin: endpointOrigin }),
      });
      expect(refused.status).toBe(400);
      expect(refused.json.error).toMatchObject({
        code: -32602,
        data: {
          problems: [{ path: "/card/supportedInterfaces/0/url", message: "https card, http endpoint" }],
        },
      });
    }
    const accepted = await register(gw.url, { url: secure, agent_id: "billing" });
    expect(accepted.status).toBe(201);
    expect(accepted.json).toMatchObject({ endpoint: `${secure}/rpc` });
  });
});
