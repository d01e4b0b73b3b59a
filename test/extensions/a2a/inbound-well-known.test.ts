/**
 * The agent card at the origin's `/.well-known/agent-card.json`, where A2A clients (and the A2A
 * conformance kit) look when they are given only the gateway's address: nothing there by default;
 * the operator's choice of one published agent with `wellKnownAgent` (`acp gateway
 * --a2a-well-known`), found by the unmodified 1.x and 0.3 SDK clients from the origin alone.
 */

import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { A2AClient } from "a2a-sdk-03/client";
import { afterEach, describe, expect, it } from "vitest";
import { runAcp, spawnGateway } from "../../helpers/cli.js";
import { registerTestAgent } from "../../helpers/gateway.js";
import { useTmpDir } from "../../helpers/tmp.js";
import { sendRequest, useA2AGateway } from "./inbound-bed.js";

const bearer =
  (apiKey: string): typeof fetch =>
  (input, init) =>
    fetch(input, {
      ...init,
      headers: { ...Object.fromEntries(new Headers(init?.headers)), authorization: `Bearer ${apiKey}` },
    });

describe("A2A in: the origin's agent card, by default", () => {
  const bed = useA2AGateway();

  it("is not there", async () => {
    await bed.register("helper");
    const res = await fetch(`${bed.gw.url}/.well-known/agent-card.json`);
    expect(res.status).toBe(404);
  });
});

describe("A2A in: the origin's agent card, chosen by the operator", () => {
  const bed = useA2AGateway({ wellKnownAgent: "helper" });

  async function helper() {
    const test = await bed.register("helper");
    const agent = await bed.connect(test, "helper");
    agent.onRequest((body) => ({ text: `summary of: ${String(body.text)}` }));
    return (await bed.register("app", [])).apiKey;
  }

  it("is the agent's card, in the version asked for, and 1.x and 0.3 clients reach the agent from the origin", async () => {
    const apiKey = await helper();
    const legacy = (await (await fetch(`${bed.gw.url}/.well-known/agent-card.json`)).json()) as Record<
      string,
      unknown
    >;
    expect(legacy).toMatchObject({
      name: "helper",
      url: `${bed.gw.url}/a2a/helper`,
      preferredTransport: "JSONRPC",
    });
    const current = await fetch(`${bed.gw.url}/.well-known/agent-card.json`, {
      headers: { "A2A-Version": "1.0" },
    });
    expect(current.headers.get("vary")).toBe("A2A-Version");
    expect(await current.json()).toMatchObject({
      name: "helper",
      supportedInterfaces: [
        { url: `${bed.gw.url}/a2a/helper`, protocolVersion: "1.0" },
        { protocolVersion: "0.3" },
      ],
    });

    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl: bearer(apiKey) })],
      }),
    );
    const client = await factory.createFromUrl(`${bed.gw.url}/`);
    const task = await client.sendMessage(sendRequest("from the origin"));
    expect(JSON.stringify(task)).toContain("summary of: from the origin");

    const old = await A2AClient.fromCardUrl(`${bed.gw.url}/.well-known/agent-card.json`, {
      fetchImpl: bearer(apiKey),
    });
    const answer = await old.sendMessage({
      message: {
        kind: "message",
        messageId: "m-old",
        role: "user",
        parts: [{ kind: "text", text: "old client" }],
      },
    });
    expect(JSON.stringify(answer)).toContain("summary of: old client");
  });

  it("answers 404 while the agent chosen is not published", async () => {
    await bed.register("helper", []);
    const res = await fetch(`${bed.gw.url}/.well-known/agent-card.json`);
    expect(res.status).toBe(404);
    expect(JSON.stringify(await res.json())).toContain("no agent helper is published for A2A");
  });
});

describe("acp gateway --a2a-well-known", { timeout: 60_000 }, () => {
  const tmp = useTmpDir("acp-a2a-wk-");
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
  });

  it("serves the agent's card at the origin", async () => {
    const gateway = await spawnGateway(["--data", join(tmp(), "data"), "--a2a-well-known", "helper"]);
    children.push(gateway.child);
    await registerTestAgent(gateway.url, "helper", "p-helper", { capabilities: ["a2a"] });
    const card = await fetch(`${gateway.url}/.well-known/agent-card.json`, {
      headers: { "A2A-Version": "1.0" },
    });
    expect(card.status).toBe(200);
    expect(await card.json()).toMatchObject({ name: "helper" });
  });

  it("refuses an agent id that is not one, naming the flag", async () => {
    const refused = await runAcp([
      "gateway",
      "--port",
      "0",
      "--data",
      join(tmp(), "data"),
      "--a2a-well-known",
      "not an id",
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('--a2a-well-known: "not an id" is not a valid agent id');
  });
});
