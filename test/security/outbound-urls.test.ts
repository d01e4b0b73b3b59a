/**
 * URLs others supply, which the gateway then calls: A2A push notification URLs (any agent key may
 * give one), A2A agent cards (the admin gives one; the card names the rest), summary webhooks. Each
 * bypass of the old string check is replayed against a real gateway, with a listener standing for
 * the internal service the URL points at: the call is refused naming the field, the listener hears
 * nothing, nothing is stored, and the gateway carries on.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import type { WebhookStatus } from "../../src/extensions/dashboard/index.js";
import { inProcessAgentOptions } from "../../src/orchestration/in-process-agent.js";
import type { DefaultGatewayOptions } from "../../src/server.js";
import { aliceAsksBob, dashboard, startCast } from "../helpers/dashboard.js";
import { runAcp } from "../helpers/cli.js";
import { ADMIN_TOKEN, api, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { type RecordingListener, recordingListener } from "./helpers.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function inside(host = "127.0.0.1"): Promise<RecordingListener> {
  const listener = await recordingListener(host);
  cleanups.push(() => listener.close());
  return listener;
}

/** An HTTP server on 127.0.0.1 answering every request 307 to `location`; `hits` counts requests. */
async function redirector(location: string): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    hits++;
    req.resume();
    res.writeHead(307, { location }).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits: () => hits };
}

/** The gateway's log lines, as objects. */
function capturedLog(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "debug" },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

async function gateway(options: Partial<DefaultGatewayOptions> = {}): Promise<TestGateway> {
  const gw = await startTestGateway(options);
  cleanups.push(() => gw.close());
  return gw;
}

/** A published agent answering every request, in process; `asked` counts what reached it. */
async function helper(gw: TestGateway) {
  const test = await gw.register("helper", "p-helper", { capabilities: ["a2a"] });
  const agent = new AcpAgent({
    ...inProcessAgentOptions(gw.gateway.context),
    identity: test.identity,
    apiKey: test.apiKey,
    audit: false,
    state: false,
  });
  let asked = 0;
  agent.onRequest((body) => {
    asked++;
    return { text: `echo: ${JSON.stringify(body)}` };
  });
  await agent.connect();
  cleanups.push(() => agent.close());
  return { asked: () => asked };
}

async function a2a(gw: TestGateway, apiKey: string, method: string, params: unknown) {
  const { json } = await api(gw.url, "/a2a/helper", {
    apiKey,
    body: { jsonrpc: "2.0", id: method, method, params },
  });
  return json as {
    result?: Record<string, unknown>;
    error?: { code: number; message: string; data?: unknown };
  };
}

function violatedFields(error: { data?: unknown } | undefined): string[] {
  const details = (error?.data ?? []) as { fieldViolations?: { field: string }[] }[];
  return details.flatMap((d) => (d.fieldViolations ?? []).map((v) => v.field));
}

describe("outbound URLs: A2A push notifications", () => {
  it("refuses each address bypass, in the 1.0 and the 0.3 shapes, stores nothing and posts nothing", async () => {
    const gw = await gateway();
    const target = await helper(gw);
    const { apiKey } = await gw.register("mallory");
    const listener = await inside();
    const port = listener.port;
    const message = (text: string) => ({ messageId: text, role: "ROLE_USER", parts: [{ text }] });
    const legacyMessage = (text: string) => ({
      kind: "message",
      messageId: text,
      role: "user",
      parts: [{ kind: "text", text }],
    });
    const task = (await a2a(gw, apiKey, "SendMessage", { message: message("first") })).result?.task as {
      id: string;
    };
    expect(task.id).toBeTruthy();

    const bypasses = [
      `http://localhost:${port}/hook`, // a name resolving to 127.0.0.1
      `http://127.0.0.1:${port}/hook`,
      `http://[::]:${port}/hook`,
      `http://[::ffff:127.0.0.1]:${port}/hook`, // IPv4-mapped
      `http://[64:ff9b::7f00:1]:${port}/hook`, // NAT64
      `http://100.64.0.1:${port}/hook`, // CGNAT
      `http://198.18.0.1:${port}/hook`, // benchmarking
      `http://169.254.169.254/latest/meta-data`, // cloud metadata
    ];
    for (const url of bypasses) {
      const shapes: [string, unknown, string][] = [
        [
          "SendMessage",
          { message: message(`m-${url}`), configuration: { taskPushNotificationConfig: { url } } },
          "params.configuration.taskPushNotificationConfig.url",
        ],
        ["CreateTaskPushNotificationConfig", { taskId: task.id, url }, "params.url"],
        [
          "message/send",
          { message: legacyMessage(`l-${url}`), configuration: { pushNotificationConfig: { url } } },
          "params.configuration.pushNotificationConfig.url",
        ],
        [
          "tasks/pushNotificationConfig/set",
          { taskId: task.id, pushNotificationConfig: { url } },
          "params.pushNotificationConfig.url",
        ],
      ];
      for (const [method, params, field] of shapes) {
        const answer = await a2a(gw, apiKey, method, params);
        expect(answer.error?.code, `${method} ${url}`).toBe(-32602);
        expect(violatedFields(answer.error), `${method} ${url}`).toEqual([field]);
        expect(answer.error?.message).toMatch(/which the gateway does not call/);
      }
    }

    // Nothing stored, nothing sent: the one task, no push config, one request at the agent.
    const configs = await a2a(gw, apiKey, "ListTaskPushNotificationConfigs", { taskId: task.id });
    expect(configs.result?.configs ?? []).toEqual([]);
    const tasks = await a2a(gw, apiKey, "ListTasks", {});
    expect(tasks.result?.tasks).toHaveLength(1);
    expect(target.asked()).toBe(1);
    expect(listener.connections).toBe(0);
    // And the gateway carries on.
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    const again = await a2a(gw, apiKey, "SendMessage", { message: message("after") });
    expect(again.result?.task).toMatchObject({ status: { state: "TASK_STATE_COMPLETED" } });
  });

  it("does not follow a push receiver's redirect into the network; logs it without the query, prints nothing", async () => {
    const internal = await inside("127.0.0.2");
    const hop = await redirector(`http://127.0.0.2:${internal.port}/admin`);
    const { logger, lines } = capturedLog();
    const printed = [vi.spyOn(console, "info"), vi.spyOn(console, "log"), vi.spyOn(console, "error")];
    // The operator allows the first hop's address, and only it.
    const gw = await gateway({ allowPrivateUrls: ["127.0.0.1"], logger });
    await helper(gw);
    const { apiKey } = await gw.register("alice");
    const url = `${hop.url}/push?token=s3cret`;
    const sent = await a2a(gw, apiKey, "SendMessage", {
      message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] },
      configuration: { taskPushNotificationConfig: { url } },
    });
    expect(sent.result?.task).toMatchObject({ status: { state: "TASK_STATE_COMPLETED" } });

    const refused = await until(
      () => lines.find((line) => line.msg === "A2A push notification not sent"),
      (line) => line !== undefined,
      "the gateway logs the refused redirect",
    );
    expect(refused).toMatchObject({ url: `${hop.url}/push` });
    expect(String(refused?.err)).toContain(`a redirect to http://127.0.0.2:${internal.port}/admin`);
    expect(hop.hits()).toBeGreaterThan(0);
    expect(internal.connections).toBe(0);
    expect(JSON.stringify(lines)).not.toContain("s3cret");
    for (const spy of printed) expect(JSON.stringify(spy.mock.calls)).not.toContain(hop.url);
  });

  it("a push it sends is logged without the URL's query, and nothing is printed (the A2A SDK's sender printed each URL)", async () => {
    const received: string[] = [];
    const receiver = createServer((req, res) => {
      received.push(req.url ?? "");
      req.resume();
      res.writeHead(200).end();
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise((resolve) => receiver.close(resolve)));
    const base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const { logger, lines } = capturedLog();
    const printed = (["info", "log", "warn", "error", "debug"] as const).map((name) =>
      vi.spyOn(console, name),
    );
    const gw = await gateway({ allowPrivateUrls: ["127.0.0.1"], logger });
    await helper(gw);
    const { apiKey } = await gw.register("alice");
    const sent = await a2a(gw, apiKey, "SendMessage", {
      message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] },
      configuration: { taskPushNotificationConfig: { url: `${base}/push?token=s3cret` } },
    });
    expect(sent.result?.task).toMatchObject({ status: { state: "TASK_STATE_COMPLETED" } });

    const logged = await until(
      () => lines.find((line) => line.msg === "A2A push notification sent"),
      (line) => line !== undefined,
      "the gateway logs the push",
    );
    // The receiver gets its URL whole; the log and the console never see the query.
    expect(received[0]).toBe("/push?token=s3cret");
    expect(logged).toMatchObject({ url: `${base}/push` });
    expect(JSON.stringify(lines)).not.toContain("s3cret");
    for (const spy of printed) expect(JSON.stringify(spy.mock.calls)).not.toContain(base);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });
});

describe("outbound URLs: A2A agent cards", () => {
  it("refuses a card URL that resolves into the gateway's network, and registers nothing", async () => {
    const gw = await gateway();
    const listener = await inside();
    for (const url of [
      `http://localhost:${listener.port}/`,
      `http://[::ffff:127.0.0.1]:${listener.port}/`,
      `http://100.64.0.1:${listener.port}/`,
    ]) {
      const added = await api(gw.url, "/api/v1/a2a/remote-agents", {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        body: { url, agent_id: "a2a-probe" },
      });
      expect(added.status, url).toBe(400);
      expect(added.json.error).toMatchObject({
        code: -32602,
        data: {
          problems: [{ path: "/url", message: expect.stringContaining("which the gateway does not call") }],
        },
      });
    }
    expect(listener.connections).toBe(0);
    const listed = await api(gw.url, "/api/v1/a2a/remote-agents", {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(listed.json).toEqual({ agents: [] });
    expect(await gw.gateway.context.registry.get("a2a-probe")).toBeUndefined();
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });
});

describe("outbound URLs: summary webhooks", () => {
  const tmp = useTmpDir("acp-sec-hooks-");

  it("acp gateway --allow-private-urls refuses a range that is not one, naming the flag", async () => {
    const bad = await runAcp([
      "gateway",
      "--port",
      "0",
      "--data",
      tmp(),
      "--allow-private-urls",
      "10.0.0.0/33",
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--allow-private-urls: "10.0.0.0/33" is not an address range');
  });

  it("a webhook on a private address written as such stops start-up, naming the flag", async () => {
    const listener = await inside();
    const start = startTestGateway({
      dataDir: tmp(),
      summaryWebhooks: [`http://127.0.0.1:${listener.port}/services/secret-path`],
    });
    await expect(start).rejects.toThrow(
      `summary webhook slack:127.0.0.1:${listener.port}: is a loopback address, which the gateway does not call (an operator allows private addresses with --allow-private-urls)`,
    );
    await start.catch((err: Error) => expect(err.message).not.toContain("secret-path"));
  });

  const quick = { batchMs: 10, minIntervalMs: 0, backoffMs: 10, maxAttempts: 2 };

  /** Webhook statuses once every webhook has dropped its summaries. */
  async function droppedStatuses(c: Awaited<ReturnType<typeof startCast>>): Promise<WebhookStatus[]> {
    await aliceAsksBob(c);
    return until(
      async () => (await dashboard(c.gw, c.gw.adminToken, "/webhooks")).json.webhooks as WebhookStatus[],
      (status) => status.every((hook) => hook.dropped > 0),
      "every webhook drops its summaries",
    );
  }

  it("a webhook whose name resolves inside is not posted to: dropped and shown", async () => {
    const named = await inside();
    const c = await startCast({
      summaryWebhooks: [`http://localhost:${named.port}/services/x`],
      dashboard: { webhookOptions: quick },
    });
    cleanups.push(() => c.close());
    const [hook] = (await droppedStatuses(c)) as [WebhookStatus];
    expect(hook.posts).toBe(0);
    expect(hook.lastError).toMatch(/^resolves to a loopback address, which the gateway does not call/);
    expect(named.connections).toBe(0);
    expect((await fetch(`${c.gw.url}/healthz`)).status).toBe(200);
  });

  it("a webhook's redirect is never followed", async () => {
    const internal = await inside("127.0.0.2");
    const hop = await redirector(`http://127.0.0.2:${internal.port}/hook`);
    const c = await startCast({
      allowPrivateUrls: ["127.0.0.1"],
      summaryWebhooks: [`${hop.url}/services/y`],
      dashboard: { webhookOptions: quick },
    });
    cleanups.push(() => c.close());
    const [hook] = (await droppedStatuses(c)) as [WebhookStatus];
    expect(hook.posts).toBe(0);
    expect(hook.lastError).toBe(
      `answered 307, a redirect to http://127.0.0.2:${internal.port}/hook, which the gateway does not follow`,
    );
    // One request per attempt, none followed: counted once no attempt is in flight (a later batch's
    // request may have reached the hop before its failure is counted).
    await until(
      async () => ((await dashboard(c.gw, c.gw.adminToken, "/webhooks")).json.webhooks as WebhookStatus[])[0],
      (status) => status?.failures === hop.hits(),
      "each request the hop answered counted as one failed attempt",
    );
    expect(internal.connections).toBe(0);
    expect((await fetch(`${c.gw.url}/healthz`)).status).toBe(200);
  });
});
