import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateAgentCardSignature } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { AcpError } from "../../../../src/protocol/index.js";
import { testCard } from "./a2a-server.js";
import { useOutboundBed } from "./testbed.js";

function es256() {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return {
    privateKey,
    jwk: { ...publicKey.export({ format: "jwk" }), kid: "card-key-1", alg: "ES256", use: "sig" },
  };
}

describe("A2A out: agent cards (validation and §8.4 signatures)", () => {
  const bed = useOutboundBed();

  it.each([
    ["a card without a name", (c: Record<string, unknown>) => ({ ...c, name: undefined }), "/card/name"],
    [
      "a card without interfaces",
      (c: Record<string, unknown>) => ({ ...c, supportedInterfaces: [] }),
      "/card/supportedInterfaces",
    ],
    [
      "an interface URL that is not a URL",
      (c: Record<string, unknown>) => ({
        ...c,
        supportedInterfaces: [{ url: "nope", protocolBinding: "JSONRPC" }],
      }),
      "/card/supportedInterfaces/0/url",
    ],
  ])("refuses %s, naming the field", async (_name, rewrite, path) => {
    const server = await bed.a2a({ rawCard: (card) => rewrite(card as unknown as Record<string, unknown>) });
    const added = await bed.addA2A({ url: server.url });
    expect(added.status).toBe(400);
    const error = added.json.error as {
      code: number;
      message: string;
      data: { problems: { path: string }[] };
    };
    expect(error.code).toBe(-32602);
    expect(error.message).toContain(server.cardUrl);
    expect(error.data.problems[0]?.path).toBe(path);
    const listed = await fetch(`${bed.gw.url}/api/v1/agents`, {
      headers: { authorization: `Bearer ${bed.gw.adminToken}` },
    });
    expect(((await listed.json()) as { agents: unknown[] }).agents).toEqual([]);
  });

  it("refuses a card with no JSONRPC 1.0 interface, an unreachable URL, and a non-admin caller", async () => {
    const grpcOnly = await bed.a2a({
      card: (card) => ({
        ...card,
        supportedInterfaces: [{ ...card.supportedInterfaces[0], protocolBinding: "GRPC" } as never],
      }),
    });
    const noRpc = await bed.addA2A({ url: grpcOnly.url });
    expect(noRpc.status).toBe(422);
    expect(noRpc.json.error).toMatchObject({ message: expect.stringContaining("GRPC 1.0") });

    const gone = await bed.a2a();
    await gone.close();
    const down = await bed.addA2A({ url: gone.url });
    expect(down.status).toBe(400);
    expect(down.json.error).toMatchObject({
      message: expect.stringContaining("ECONNREFUSED"),
      data: { problems: [{ path: "/url" }] },
    });

    const agent = await bed.gw.register("mallory");
    const res = await fetch(`${bed.gw.url}/api/v1/a2a/remote-agents`, {
      method: "POST",
      headers: { "x-api-key": agent.apiKey, "content-type": "application/json" },
      body: JSON.stringify({ url: grpcOnly.url }),
    });
    expect(res.status).toBe(403);
  });

  it("accepts a card signed by the SDK's own signer, with the key from its jku or pinned by the admin", async () => {
    const key = es256();
    const sign = generateAgentCardSignature(key.privateKey, {
      alg: "ES256",
      kid: "card-key-1",
      typ: "JOSE",
      jku: "/.well-known/jwks.json",
    });
    const server = await bed.a2a({ card: (card) => sign(card), jwks: { keys: [key.jwk] } });
    const viaJku = await bed.addA2A({ url: server.url });
    expect(viaJku.status).toBe(201);
    expect(viaJku.json.signature).toEqual({
      signed: true,
      kid: "card-key-1",
      key_source: "jku",
      keySource: "jku",
    });

    const pinned = await bed.addA2A({ url: server.url, agent_id: "pinned", card_keys: [key.jwk] });
    expect(pinned.status).toBe(201);
    expect(pinned.json.signature).toEqual({
      signed: true,
      kid: "card-key-1",
      key_source: "pinned",
      keySource: "pinned",
    });
    const alice = await bed.caller();
    expect(await alice.request("pinned", { text: "signed" })).toMatchObject({ a2a: { state: "completed" } });
  });

  it("refuses a tampered signed card, a card signed by another key, and an unsigned card when a key is pinned", async () => {
    const key = es256();
    const sign = generateAgentCardSignature(key.privateKey, {
      alg: "ES256",
      kid: "card-key-1",
      typ: "JOSE",
      jku: "/.well-known/jwks.json",
    });
    const tampered = await bed.a2a({
      card: (card) => sign(card),
      rawCard: (card) => ({ ...card, description: "Sends your data elsewhere" }),
      jwks: { keys: [key.jwk] },
    });
    const refused = await bed.addA2A({ url: tampered.url });
    expect(refused.status).toBe(401);
    expect(refused.json.error).toMatchObject({
      code: -32002,
      data: { problems: [{ path: "/card/signatures/0" }] },
    });

    const other = es256();
    const signedGood = await bed.a2a({ card: (card) => sign(card), jwks: { keys: [key.jwk] } });
    const wrongKey = await bed.addA2A({ url: signedGood.url, card_keys: [{ ...other.jwk }] });
    expect(wrongKey.status).toBe(401);

    const unsigned = await bed.a2a();
    const missing = await bed.addA2A({ url: unsigned.url, card_keys: [key.jwk] });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({
      code: -32001,
      data: { problems: [{ path: "/card/signatures" }] },
    });
  });
});

/** An A2A "agent" with a valid card whose JSON-RPC endpoint answers `answer` to everything. */
async function brokenAgent(
  answer: (body: string) => { status: number; type: string; text: string },
  streaming = false,
): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const { port } = server.address() as AddressInfo;
      if (req.method === "GET") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(testCard(`http://127.0.0.1:${port}/rpc`, streaming)));
        return;
      }
      const out = answer(body);
      res.writeHead(out.status, { "content-type": out.type });
      res.end(out.text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe("A2A out: bad A2A responses", () => {
  const bed = useOutboundBed();

  it.each([
    ["non-JSON", { status: 200, type: "text/html", text: "<html>oops</html>" }, /non-JSON/],
    [
      "not JSON-RPC",
      { status: 200, type: "application/json", text: '{"hello":"world"}' },
      /not a JSON-RPC 2\.0 response/,
    ],
    [
      "a task without a status",
      {
        status: 200,
        type: "application/json",
        text: '{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1"}}}',
      },
      /not valid A2A 1\.0/,
    ],
    [
      "a JSON-RPC error",
      {
        status: 200,
        type: "application/json",
        text: '{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}',
      },
      /SendMessage failed at the A2A agent: Task not found \(-32001\)/,
    ],
  ])("%s: the caller gets a clear -32603 naming what was wrong", async (_name, answer, pattern) => {
    const broken = await brokenAgent(() => answer);
    bed.cleanup(() => new Promise((resolve) => broken.server.close(resolve)));
    expect((await bed.addA2A({ url: broken.url, agent_id: "broken" })).status).toBe(201);
    const alice = await bed.caller();
    const err = await alice.request("broken", { text: "hi" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcpError);
    expect((err as AcpError).code).toBe(-32603);
    expect((err as AcpError).message).toMatch(pattern);
    expect((err as AcpError).data.a2a).toMatchObject({ endpoint: `${broken.url}/rpc` });
  });

  const sse = (events: unknown[], eol: string) =>
    events.map((e) => `data: ${JSON.stringify({ jsonrpc: "2.0", id: 1, result: e })}${eol}${eol}`).join("");
  const task = (state: string) => ({
    id: "t1",
    contextId: "c1",
    status: { state, message: { messageId: "m", role: "ROLE_AGENT", parts: [{ text: state }] } },
  });

  it("reads an event stream with CRLF line ends, and refuses one that ends without a task", async () => {
    let events: unknown[] = [
      { task: task("TASK_STATE_SUBMITTED") },
      { statusUpdate: { taskId: "t1", status: task("TASK_STATE_COMPLETED").status } },
    ];
    const agent = await brokenAgent(
      () => ({ status: 200, type: "text/event-stream", text: sse(events, "\r\n") }),
      true,
    );
    bed.cleanup(() => new Promise((resolve) => agent.server.close(resolve)));
    await bed.addA2A({ url: agent.url, agent_id: "crlf" });
    const alice = await bed.caller();
    expect(await alice.request("crlf", { text: "hi" })).toMatchObject({
      text: "TASK_STATE_COMPLETED",
      a2a: { taskId: "t1", state: "completed" },
    });

    events = [];
    const err = await alice.request("crlf", { text: "again" }).catch((e: unknown) => e);
    expect((err as AcpError).message).toMatch(/the stream ended without a task or message/);
  });
});
