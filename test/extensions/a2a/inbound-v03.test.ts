/**
 * A2A 0.3 clients discover a published ACP agent: the unmodified @a2a-js/sdk 0.3 (installed as the
 * alias a2a-sdk-03) finds the endpoint from the card alone, with `A2AClient.fromCardUrl` and with
 * `ClientFactory.createFromUrl`. A client that names no A2A-Version gets the 0.3 card; one that
 * names 1.0 gets the 1.0 card; one that names a version the gateway does not speak gets
 * VersionNotSupported.
 */
import { A2AClient } from "a2a-sdk-03/client";
import {
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "a2a-sdk-03/client";
import { describe, expect, it } from "vitest";
import { rawCall, useA2AGateway } from "./inbound-bed.js";

/** The 0.3 SDK's fetch, sending the API key as a bearer token. */
function authenticated(apiKey: string): typeof fetch {
  return createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ authorization: `Bearer ${apiKey}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
}

const message = (text: string) => ({
  message: {
    kind: "message" as const,
    messageId: crypto.randomUUID(),
    role: "user" as const,
    parts: [{ kind: "text" as const, text }],
  },
});

describe("A2A in: A2A 0.3 clients", () => {
  const bed = useA2AGateway();

  async function publishedHelper() {
    const helper = await bed.register("helper");
    const agent = await bed.connect(helper, "helper");
    agent.onRequest("agent.request", (body) => ({ text: `summary of: ${String(body.text)}` }));
    return bed.register("app", []);
  }

  it("A2AClient.fromCardUrl finds the endpoint in the card and sends a message", async () => {
    const app = await publishedHelper();
    const client = await A2AClient.fromCardUrl(`${bed.gw.url}/a2a/helper/.well-known/agent-card.json`, {
      fetchImpl: authenticated(app.apiKey),
    });
    const answer = await client.sendMessage(message("the report"));
    expect("error" in answer ? answer.error : undefined).toBeUndefined();
    const task = (answer as unknown as { result: Record<string, unknown> }).result;
    expect(task).toMatchObject({
      kind: "task",
      status: { state: "completed" },
      artifacts: [{ parts: [{ kind: "text", text: "summary of: the report" }] }],
    });
    const got = await client.getTask({ id: task.id as string });
    expect(got).toMatchObject({ result: { id: task.id, status: { state: "completed" } } });
  });

  it("ClientFactory.createFromUrl picks the card's JSON-RPC transport and sends a message", async () => {
    const app = await publishedHelper();
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl: authenticated(app.apiKey) })],
      }),
    );
    // Like the 1.x SDK, it resolves the card relative to the base URL: the trailing slash matters.
    const client = await factory.createFromUrl(`${bed.gw.url}/a2a/helper/`);
    const task = await client.sendMessage(message("the minutes"));
    expect(task).toMatchObject({
      kind: "task",
      status: { state: "completed" },
      artifacts: [{ parts: [{ kind: "text", text: "summary of: the minutes" }] }],
    });
  });

  it("serves the card in the shape of the version asked for, varying on A2A-Version", async () => {
    await publishedHelper();
    const cardUrl = `${bed.gw.url}/a2a/helper/.well-known/agent-card.json`;
    const endpoint = `${bed.gw.url}/a2a/helper`;

    const legacy = await fetch(cardUrl);
    expect(legacy.status).toBe(200);
    expect(legacy.headers.get("vary")).toBe("A2A-Version");
    expect(await legacy.json()).toMatchObject({
      protocolVersion: "0.3.0",
      url: endpoint,
      preferredTransport: "JSONRPC",
      securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "X-API-Key" } },
      supportedInterfaces: [{ url: endpoint, protocolVersion: "1.0" }, { protocolVersion: "0.3" }],
    });

    for (const asked of [
      ["A2A-Version", "1.0"],
      ["a2a-version", "1.0.0"],
    ] as [string, string][]) {
      const current = await fetch(cardUrl, { headers: [asked] });
      expect(current.headers.get("vary")).toBe("A2A-Version");
      const card = (await current.json()) as Record<string, unknown>;
      expect(card.url).toBeUndefined();
      expect(card.supportedInterfaces).toEqual([
        { url: endpoint, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: endpoint, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ]);
    }
    const byQuery = (await (await fetch(`${cardUrl}?A2A-Version=1.0`)).json()) as Record<string, unknown>;
    expect(byQuery.url).toBeUndefined();

    const unknown = await fetch(cardUrl, { headers: { "A2A-Version": "2.0" } });
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get("vary")).toBe("A2A-Version");
    expect(unknown.headers.get("content-type")).toBe("application/problem+json");
    expect(await unknown.json()).toMatchObject({
      type: "https://a2a-protocol.org/errors/version-not-supported",
      status: 400,
      detail: 'A2A version "2.0" is not supported here: send A2A-Version 0.3 or 1.0',
      supportedVersions: ["0.3", "1.0"],
    });
  });

  it("answers a call in a version it does not speak with VersionNotSupported, naming the header", async () => {
    const app = await publishedHelper();
    for (const version of ["2.0", "0.2", "one"]) {
      const res = await fetch(`${bed.gw.url}/a2a/helper`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": app.apiKey, "A2A-Version": version },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: "v1",
          method: "SendMessage",
          params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hello" }] } },
        }),
      });
      expect(await res.json()).toEqual({
        jsonrpc: "2.0",
        id: "v1",
        error: {
          code: -32009,
          message: `A2A version ${JSON.stringify(version)} is not supported here: send A2A-Version 0.3 or 1.0`,
          data: [
            {
              "@type": "type.googleapis.com/google.rpc.BadRequest",
              fieldViolations: [{ field: "A2A-Version", description: "must be one of 0.3, 1.0" }],
            },
          ],
        },
      });
    }
    // Without the header, a call is answered as before (0.3 assumed; the method names its shapes).
    const plain = await rawCall(
      bed,
      "helper",
      {
        jsonrpc: "2.0",
        id: 1,
        method: "tasks/get",
        params: { id: "no-such-task" },
      },
      app.apiKey,
    );
    expect(plain.json).toMatchObject({ id: 1, error: { code: -32001 } });
  });
});
