/**
 * Fuzzing the gateway's HTTP surfaces with fast-check: the envelope (POST /api/v1/messages), the
 * REST bodies, paths and credentials, and the MCP endpoint. Generated values and mutations of
 * valid requests (re-signed or not). The gateway must never crash, never answer 5xx to bad input,
 * and every refusal must be a documented JSON-RPC error with its documented HTTP status; an envelope
 * it accepts must be one an independent check (signature, sender, recipient, layers) accepts too.
 * `ACP_FUZZ_RUNS` sets the runs per surface (CI: 400; the long run: 100000).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importPublicKey, signMessage, verifyEnvelope } from "../../src/protocol/index.js";
import { ADMIN_TOKEN } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import {
  badHttpAnswer,
  badMcpAnswer,
  deeplyNested,
  hostileValue,
  mutate,
  mutationOf,
  nastyString,
} from "./support/hostile.js";
import { memoryOf } from "./support/processes.js";
import { FUZZ_TIMEOUT_MS, fuzz, SurfaceTally, startTarget, type Target } from "./support/target.js";

interface HttpCase {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

describe("fuzzing the HTTP surfaces", () => {
  const tmp = useTmpDir("acp-rel-fuzz-");
  let target: Target;
  beforeAll(async () => {
    target = await startTarget(tmp());
  });
  afterAll(async () => {
    await target.gateway.stop();
  });

  /** Sends one case; records a wrong answer (or a failed connection: the gateway died). */
  async function send(
    tally: SurfaceTally,
    c: HttpCase,
    ok: number[],
    judge: typeof badHttpAnswer = badHttpAnswer,
  ): Promise<void> {
    let url: URL;
    try {
      url = new URL(`${target.gateway.url}${c.path}`);
    } catch {
      return; // not even a URL: nothing a client could send
    }
    try {
      const res = await fetch(url, {
        method: c.method,
        headers: c.headers,
        ...(c.body === undefined ? {} : { body: c.body }),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      tally.record(res.status, judge(res.status, text, ok), () => JSON.stringify(c));
    } catch (err) {
      tally.record("network", `no answer (${(err as Error).message})`, () => JSON.stringify(c));
    }
  }

  async function expectAlive(tally: SurfaceTally, extra: Record<string, number> = {}): Promise<void> {
    const health = await fetch(`${target.gateway.url}/healthz`);
    tally.report({
      ...extra,
      gatewayAlive: target.gateway.child.exitCode === null && health.status === 200,
      ...memoryOf(target.gateway.pid),
    });
    expect(tally.failures).toEqual([]);
    expect(target.gateway.child.exitCode).toBeNull();
    expect(health.status).toBe(200);
  }

  /**
   * A 202 is right only for what the gateway must accept, judged without the gateway's code: a
   * message that verifies against agent-alpha's registered key, from agent-alpha for its registered
   * principal, to agent-beta (the one agent it handshook with), declaring the handshaken layers,
   * answered with its own message-id.
   */
  function wronglyAccepted(sent: string, answer: string): string | undefined {
    const { alpha } = target;
    try {
      const { headers } = verifyEnvelope(sent, {
        resolveKey: (agentId, kid) =>
          agentId === alpha.sender.agentId && kid === alpha.identity.signing.kid
            ? importPublicKey(alpha.identity.signing)
            : undefined,
        expectedRecipient: "agent-beta",
      });
      const wrong =
        headers["principal-id"] !== alpha.sender.principalId
          ? "another principal"
          : [...headers["skill-layers-loaded"]].sort().join() !== alpha.sender.layers.join()
            ? "other layers than the handshake's"
            : (JSON.parse(answer) as { id?: unknown }).id !== headers["message-id"]
              ? `an answer naming another id: ${answer.slice(0, 200)}`
              : undefined;
      return wrong && `accepted ${wrong}: ${sent.slice(0, 300)}`;
    } catch (err) {
      return `accepted an envelope that must be refused (${(err as Error).message}): ${sent.slice(0, 300)}`;
    }
  }

  const asAlpha = () => ({ "x-api-key": target.alpha.apiKey, "content-type": "application/json" });

  it(
    "POST /api/v1/messages: envelopes mutated, re-signed, garbled, deeply nested",
    async () => {
      const tally = new SurfaceTally("envelope");
      const sample = target.envelope();
      const mutated = fc
        .record({ mutation: mutationOf(sample), resign: fc.boolean() })
        .map(({ mutation, resign }) => {
          const changed = mutate(target.envelope(), mutation);
          if (!resign || typeof changed !== "object" || changed === null || Array.isArray(changed)) {
            return JSON.stringify(changed) ?? "";
          }
          const { signature: _old, ...unsigned } = changed as Record<string, unknown>;
          try {
            return JSON.stringify(signMessage(unsigned as never, target.alpha.signer));
          } catch {
            return JSON.stringify(changed); // not signable (malformed headers): send it as mutated
          }
        });
      const deep = fc.integer({ min: 100, max: 100_000 }).map((depth) => {
        const text = JSON.stringify(target.envelope());
        return text.replace('"body":{"n":1}', `"body":{"n":${deeplyNested(depth)}}`);
      });
      const body = fc.oneof(
        { weight: 6, arbitrary: mutated },
        { weight: 1, arbitrary: deep },
        { weight: 1, arbitrary: hostileValue.map((v) => JSON.stringify(v) ?? "") },
        { weight: 1, arbitrary: nastyString },
      );
      await fuzz(body, (text) =>
        send(
          tally,
          { method: "POST", path: "/api/v1/messages", headers: asAlpha(), body: text },
          [],
          (status, answer) =>
            status === 202 ? wronglyAccepted(text, answer) : badHttpAnswer(status, answer, []),
        ),
      );
      await expectAlive(tally);
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    "REST: registration, presence, approvals, acknowledgements, listings, paths and credentials",
    async () => {
      const tally = new SurfaceTally("rest");
      const registration = {
        agentId: "agent-fuzzed",
        principalId: "principal-fuzzed",
        signing: target.alpha.identity.signing,
        capabilities: ["x"],
        protocolVersions: ["1.0.0"],
      };
      const presence = { state: "busy", load: 10, activeTasks: 1, tasks: [{ id: "t", progress: 5 }] };
      const bodyFrom = (base: unknown) =>
        fc.oneof(
          { weight: 3, arbitrary: mutationOf(base).map((m) => JSON.stringify(mutate(base, m)) ?? "") },
          { weight: 1, arbitrary: hostileValue.map((v) => JSON.stringify(v) ?? "") },
          { weight: 1, arbitrary: nastyString },
        );
      const credentials = fc.constantFrom<Record<string, string>>(
        {},
        { "x-api-key": target.alpha.apiKey },
        { authorization: `Bearer ${ADMIN_TOKEN}` },
        { "x-api-key": "acp_not-a-key" },
        { authorization: "Bearer" },
        { "api-key": "" },
      );
      const segment = nastyString.map((s) =>
        s.includes("/") || s.includes("?") || s.includes("#") ? encodeURIComponent(s) : s,
      );
      const routes = [
        "/api/v1/agents",
        "/api/v1/agents/:x",
        "/api/v1/agents/:x/rotate",
        "/api/v1/agents/:x/revoke",
        "/api/v1/agents/:x/presence",
        "/api/v1/messages",
        "/api/v1/messages/:x",
        "/api/v1/messages/:x/status",
        "/api/v1/messages/:x/acknowledge",
        "/api/v1/approvals",
        "/api/v1/approvals/:x",
        "/api/v1/approvals/:x/approve",
        "/api/v1/:x",
        "/:x",
      ];
      const cases: fc.Arbitrary<HttpCase> = fc.oneof(
        bodyFrom(registration).map((body) => ({
          method: "POST",
          path: "/api/v1/agents",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
          body,
        })),
        bodyFrom(presence).map((body) => ({
          method: "PUT",
          path: "/api/v1/agents/agent-alpha/presence",
          headers: asAlpha(),
          body,
        })),
        bodyFrom({ reason: "r", timeoutMs: 5000, fallbacks: [] }).map((body) => ({
          method: "POST",
          path: "/api/v1/approvals",
          headers: asAlpha(),
          body,
        })),
        fc.string().map((query) => ({
          method: "GET",
          path: `/api/v1/messages?${query}`,
          headers: asAlpha(),
        })),
        fc
          .record({
            method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"),
            route: fc.constantFrom(...routes),
            value: segment,
            headers: credentials,
            body: fc.option(nastyString, { nil: undefined }),
          })
          .map(({ method, route, value, headers, body }) => ({
            method,
            path: route.replace(":x", value),
            headers,
            ...(body === undefined || method === "GET" ? {} : { body }),
          })),
      );
      // The dashboard serves `/` and static files: a 200 there is a page, not a wrong answer.
      await fuzz(cases, (c) => send(tally, c, [200, 201, 202, 204]));
      await expectAlive(tally);
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    "POST /mcp: JSON-RPC requests in a live session and outside one, mutated and garbled",
    async () => {
      const tally = new SurfaceTally("mcp");
      const mcpHeaders = (session?: string) => ({
        ...asAlpha(),
        accept: "application/json, text/event-stream",
        ...(session === undefined ? {} : { "mcp-session-id": session }),
      });
      const initialize = {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "fuzz", version: "1" },
        },
      };
      const opened = await fetch(`${target.gateway.url}/mcp`, {
        method: "POST",
        headers: mcpHeaders(),
        body: JSON.stringify(initialize),
      });
      await opened.text();
      const session = opened.headers.get("mcp-session-id") ?? "";
      expect(session).not.toBe("");
      await fetch(`${target.gateway.url}/mcp`, {
        method: "POST",
        headers: mcpHeaders(session),
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
      }).then((res) => res.text());

      // What a client may ask within a session; params are mutated, the names are the real ones.
      const requests: Record<string, unknown> = {
        "tools/list": {},
        "tools/call": { name: "decline_task", arguments: { taskId: "00000000-0000-4000-8000-000000000000" } },
        "resources/list": {},
        "resources/templates/list": {},
        "resources/read": { uri: "tasks://pending" },
        "resources/subscribe": { uri: "tasks://00000000-0000-4000-8000-000000000000" },
        "prompts/list": {},
        "prompts/get": { name: "system-prompt" },
        "agents/list": { cursor: "x" },
        "agents/run": { name: "no-such-agent", input: {} },
        ping: {},
        "logging/setLevel": { level: "debug" },
        "completion/complete": {
          ref: { type: "ref/prompt", name: "system-prompt" },
          argument: { name: "a", value: "" },
        },
      };
      const inSession = fc
        .constantFrom(...Object.entries(requests))
        .chain(([method, params]) =>
          fc.record({
            method: fc.oneof(
              { weight: 4, arbitrary: fc.constant(method) },
              { weight: 1, arbitrary: nastyString },
            ),
            params: fc.oneof(
              { weight: 3, arbitrary: mutationOf(params).map((m) => mutate(params, m)) },
              { weight: 1, arbitrary: hostileValue },
            ),
            id: fc.oneof(fc.integer(), fc.string(), fc.constant(null)),
          }),
        )
        .map(({ method, params, id }) => ({
          body: JSON.stringify({ jsonrpc: "2.0", id, method, params }) ?? "",
          session,
          accept: "application/json, text/event-stream",
        }));
      const outside = fc.record({
        body: fc.oneof(
          {
            weight: 3,
            arbitrary: mutationOf(initialize).map((m) => JSON.stringify(mutate(initialize, m)) ?? ""),
          },
          { weight: 1, arbitrary: hostileValue.map((v) => JSON.stringify(v) ?? "") },
          { weight: 1, arbitrary: nastyString },
        ),
        session: fc.option(
          nastyString.filter((v) => /^[\x21-\x7e]*$/.test(v)),
          { nil: undefined },
        ),
        accept: fc.constantFrom(
          "application/json, text/event-stream",
          "application/json",
          "*/*",
          "text/html",
        ),
      });
      const cases = fc.oneof({ weight: 3, arbitrary: inSession }, { weight: 1, arbitrary: outside });
      let invalidParams = 0;
      const judge: typeof badMcpAnswer = (status, text, ok) => {
        if (/"code":\s*-32602/.test(text)) invalidParams++;
        return badMcpAnswer(status, text, ok);
      };
      await fuzz(cases, ({ body, session: id, accept }) =>
        send(
          tally,
          { method: "POST", path: "/mcp", headers: { ...mcpHeaders(id), accept }, body },
          [200, 202],
          judge,
        ),
      );
      // Some of the mutated requests must reach the params checks, or this test checks nothing there.
      expect(invalidParams).toBeGreaterThan(0);
      await expectAlive(tally, { answeredInvalidParams: invalidParams });
    },
    FUZZ_TIMEOUT_MS,
  );
});
