import { type ChildProcess, spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import type { FeedItem, WebhookStatus } from "../../src/extensions/dashboard/index.js";
import { parseWebhookTarget } from "../../src/extensions/dashboard/index.js";
import { chatLine, SummaryWebhooks } from "../../src/extensions/dashboard/webhooks.js";
import { Metrics } from "../../src/gateway/index.js";
import { OutboundPolicy } from "../../src/http/outbound.js";
import type { RestAnswer } from "../../src/wire/deprecated-names.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { aliceAsksBob, dashboard, eventually, startCast } from "../helpers/dashboard.js";
import { ADMIN_TOKEN, registerTestAgent } from "../helpers/gateway.js";
import { handshake } from "../helpers/messaging.js";
import { useTmpDir } from "../helpers/tmp.js";

interface Received {
  path: string;
  body: Record<string, unknown>;
}

/** A local chat service: records every POST; `reply` decides each answer (default 200). */
class Receiver {
  readonly received: Received[] = [];
  reply: (n: number, res: ServerResponse) => boolean = () => false;
  private server: Server | undefined;
  url = "";

  async start(): Promise<this> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let text = "";
      req.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      req.on("end", () => {
        this.received.push({ path: req.url ?? "", body: JSON.parse(text) as Record<string, unknown> });
        if (!this.reply(this.received.length, res)) res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Every summary line posted to `path`. */
  lines(path: string): string[] {
    return this.received
      .filter((r) => r.path === path)
      .flatMap((r) => String(r.body.text ?? r.body.content).split("\n"));
  }

  stop(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

const receivers: Receiver[] = [];
afterEach(async () => {
  for (const receiver of receivers.splice(0)) await receiver.stop();
});
const receiver = async () => {
  const r = await new Receiver().start();
  receivers.push(r);
  return r;
};

const item = (n: number, summary = `summary number ${n}`): FeedItem => ({
  id: `m-${n}`,
  at: new Date().toISOString(),
  from: { agent: "alice-scheduler", principal: "alice" },
  to: { agent: "bob-scheduler", principal: "bob" },
  type: "request",
  method: "agent.request",
  summary,
  summaryBy: "gateway",
  encrypted: false,
});

const quick = { batchMs: 20, minIntervalMs: 0, backoffMs: 20, timeoutMs: 2000 };

describe("webhook targets", () => {
  it("are recognised by host or prefix; a bad one is refused without echoing its secret path", () => {
    expect(parseWebhookTarget("https://hooks.slack.com/services/T0/B0/secret")).toMatchObject({
      kind: "slack",
      label: "slack:hooks.slack.com",
    });
    expect(parseWebhookTarget("https://discord.com/api/webhooks/123/secret")).toMatchObject({
      kind: "discord",
    });
    expect(parseWebhookTarget("https://chat.example.org/hooks/abc")).toMatchObject({ kind: "slack" });
    expect(parseWebhookTarget("discord:https://relay.example.org/x")).toMatchObject({
      kind: "discord",
      url: "https://relay.example.org/x",
      label: "discord:relay.example.org",
    });
    expect(() => parseWebhookTarget("not a url/secret-part")).toThrow(/is not a URL/);
    expect(() => parseWebhookTarget("not a url/secret-part")).not.toThrow(/secret-part/);
    expect(() => parseWebhookTarget("ftp://example.org/x")).toThrow("summary webhook on ftp: is not http(s)");
  });

  it("escape chat markup so a summary cannot mention everyone or inject links", () => {
    const sly = item(1, "<!channel> @everyone **bold** [link](http://x)");
    expect(chatLine("slack", sly)).toBe(
      "*alice-scheduler → bob-scheduler* (request): &lt;!channel&gt; @everyone **bold** [link](http://x)",
    );
    expect(chatLine("discord", sly)).toBe(
      "**alice\\-scheduler → bob\\-scheduler** (request): <!channel\\> @everyone \\*\\*bold\\*\\* \\[link\\]\\(http://x\\)",
    );
  });
});

describe("SummaryWebhooks", () => {
  const logger = pino({ level: "silent" });
  // The receivers listen on loopback.
  const outbound = new OutboundPolicy({ allowPrivate: true });

  it("batches summaries into one post per target, in each target's format", async () => {
    const r = await receiver();
    const hooks = new SummaryWebhooks(
      [parseWebhookTarget(`slack:${r.url}/slack`), parseWebhookTarget(`discord:${r.url}/discord`)],
      outbound,
      new Metrics(),
      logger,
      quick,
    );
    for (let n = 1; n <= 5; n++) hooks.push(item(n));
    await eventually(() => hooks.status().every((s) => s.posts === 1), "one post per target");
    expect(r.received).toHaveLength(2);
    const slack = r.received.find((x) => x.path === "/slack")!;
    const discord = r.received.find((x) => x.path === "/discord")!;
    expect(Object.keys(slack.body)).toEqual(["text"]);
    expect(String(slack.body.text).split("\n")).toHaveLength(5);
    expect(discord.body).toMatchObject({ allowed_mentions: { parse: [] } });
    expect(String(discord.body.content).split("\n")).toHaveLength(5);
    expect(hooks.status().map((s) => [s.target, s.posts, s.lines])).toEqual([
      [`slack:${new URL(r.url).host}`, 1, 5],
      [`discord:${new URL(r.url).host}`, 1, 5],
    ]);
    await hooks.close();
  });

  it("splits what exceeds Discord's 2000 characters over several posts", async () => {
    const r = await receiver();
    const hooks = new SummaryWebhooks(
      [parseWebhookTarget(`discord:${r.url}/d`)],
      outbound,
      new Metrics(),
      logger,
      quick,
    );
    for (let n = 1; n <= 30; n++) hooks.push(item(n, "x".repeat(200)));
    await eventually(() => r.lines("/d").length === 30, "all 30 lines posted");
    expect(r.received.length).toBeGreaterThan(1);
    for (const post of r.received) expect(String(post.body.content).length).toBeLessThanOrEqual(2000);
    await hooks.close();
  });

  it("retries server errors and 429s with backoff, counting failures; gives up on a refusal", async () => {
    const r = await receiver();
    r.reply = (n, res) => {
      if (n <= 2) res.writeHead(n === 1 ? 503 : 429, { "retry-after": n === 2 ? "0" : "" }).end();
      return n <= 2;
    };
    const metrics = new Metrics();
    const hooks = new SummaryWebhooks(
      [parseWebhookTarget(`${r.url}/retry`)],
      outbound,
      metrics,
      logger,
      quick,
    );
    hooks.push(item(1));
    await eventually(() => hooks.status()[0]!.posts === 1, "delivered on the third attempt");
    expect(r.lines("/retry")).toHaveLength(3);
    expect(hooks.status()[0]).toMatchObject({ failures: 2, dropped: 0, lastError: "HTTP 429" });
    const label = `slack:${new URL(r.url).host}`;
    expect(metrics.render()).toContain(`acp_summary_webhook_failures_total{target="${label}"} 2`);
    expect(metrics.render()).toContain(`acp_summary_webhook_posts_total{target="${label}"} 1`);

    r.reply = (_n, res) => {
      res.writeHead(400).end("invalid_payload");
      return true;
    };
    const before = r.received.length;
    hooks.push(item(2));
    await eventually(() => hooks.status()[0]!.dropped === 1, "the refused batch is dropped");
    expect(r.received.length - before).toBe(1);
    expect(metrics.render()).toContain(`acp_summary_webhook_dropped_total{target="${label}"} 1`);
    await hooks.close();
  });

  it("gives up after maxAttempts on an unreachable receiver", async () => {
    const r = await receiver();
    const url = r.url;
    await r.stop();
    const hooks = new SummaryWebhooks([parseWebhookTarget(`${url}/gone`)], outbound, new Metrics(), logger, {
      ...quick,
      maxAttempts: 3,
    });
    hooks.push(item(1));
    await eventually(() => hooks.status()[0]!.dropped === 1, "dropped after 3 attempts");
    expect(hooks.status()[0]).toMatchObject({ failures: 3, posts: 0, lastError: "ECONNREFUSED" });
    await hooks.close();
  });
});

describe("--summary-webhook on a real gateway", () => {
  const tmp = useTmpDir();
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
  });

  it("posts every relayed message's summary without delaying delivery, and shows failures on the dashboard and /metrics", async () => {
    const good = await receiver();
    // This one never answers: its posts time out, and messages must flow regardless.
    const hanging = await receiver();
    hanging.reply = () => true;
    const c = await startCast({
      allowPrivateUrls: true,
      summaryWebhooks: [`${good.url}/services/T/B/x`, `discord:${hanging.url}/api/webhooks/1/y`],
      dashboard: { webhookOptions: { ...quick, timeoutMs: 300, maxAttempts: 2 } },
    });
    try {
      const { gw } = c;
      await aliceAsksBob(c);
      await eventually(
        () => good.lines("/services/T/B/x").length === 6,
        "six summaries (4 handshake steps, request, response)",
      );
      const lines = good.lines("/services/T/B/x");
      expect(lines.filter((l) => l.includes("introduced itself"))).toHaveLength(2);
      expect(lines.some((l) => l.startsWith("*bob-scheduler → alice-scheduler* (response):"))).toBe(true);

      await eventually(async () => {
        const hooks = (await dashboard(gw, gw.adminToken, "/webhooks")).json
          .webhooks as RestAnswer<WebhookStatus>[];
        return hooks[1]!.failures >= 2 && hooks[1]!.dropped > 0;
      }, "the hanging webhook's failures are on the dashboard");
      const hooks = (await dashboard(gw, gw.adminToken, "/webhooks")).json
        .webhooks as RestAnswer<WebhookStatus>[];
      expect(hooks[0]).toMatchObject({ kind: "slack", lines: 6, failures: 0 });
      expect(hooks[1]).toMatchObject({
        kind: "discord",
        target: `discord:${new URL(hanging.url).host}`,
        last_error: "timed out",
        last_error_at: expect.any(String),
      });
      // The camelCase names are still sent, for the deprecation period.
      expect(hooks[1]).toMatchObject({ lastError: "timed out", lastErrorAt: hooks[1]?.last_error_at });
      expect(JSON.stringify(hooks)).not.toContain("/api/webhooks/1/y");
      const metrics = await (await fetch(`${gw.url}/metrics`)).text();
      expect(metrics).toMatch(
        /acp_summary_webhook_failures_total\{target="discord:127\.0\.0\.1:\d+"\} [2-9]/,
      );
    } finally {
      await c.close();
    }
  });

  it("posts the agent's own summary, signed with the message, as its words; the gateway's sentence otherwise; the relay audit says so", async () => {
    const r = await receiver();
    const c = await startCast({
      allowPrivateUrls: true,
      summaryWebhooks: [`${r.url}/words`],
      dashboard: { webhookOptions: quick },
    });
    const quiet = await startCast();
    try {
      for (const cast of [c, quiet]) {
        const alice = await cast.connect(cast.alice);
        await cast.connect(cast.bob);
        await alice.request(
          "bob-scheduler",
          { action: "get-availability" },
          { summary: "Asked bob for his free slots next week" },
        );
      }
      await eventually(() => r.lines("/words").length === 6, "six summaries");
      const lines = r.lines("/words");
      expect(lines).toContain(
        '*alice-scheduler → bob-scheduler* (request): "Asked bob for his free slots next week" (in alice-scheduler\'s words)',
      );
      expect(lines).toContain(
        "*bob-scheduler → alice-scheduler* (response): bob-scheduler answered alice-scheduler's get-availability: 2 slots",
      );
      const feed = (await dashboard(c.gw, c.gw.adminToken, "/feed?type=request")).json.items as FeedItem[];
      expect(feed[0]).toMatchObject({
        summary: "Asked bob for his free slots next week",
        summaryBy: "sender",
      });
      // The relay audit records whose words the summary is, and whether it went to chat.
      const entries = async (cast: typeof c) => {
        const found: { method: string; summaryBy?: string; discord_summary?: boolean }[] = [];
        for await (const { entry } of readAudit({
          root: join(cast.gw.dataDir, "relay-audit"),
          agent: "alice-scheduler",
        }))
          found.push(entry);
        return found;
      };
      await eventually(async () => (await entries(c)).some((e) => e.method === "agent.request"), "audited");
      expect((await entries(c)).find((e) => e.method === "agent.request")).toMatchObject({
        summaryBy: "sender",
        discord_summary: true,
      });
      await eventually(
        async () => (await entries(quiet)).some((e) => e.method === "agent.request"),
        "audited",
      );
      expect((await entries(quiet)).find((e) => e.method === "agent.request")).toMatchObject({
        summaryBy: "sender",
        discord_summary: false,
      });
    } finally {
      await c.close();
      await quiet.close();
    }
  });

  it("acp gateway --summary-webhook posts from the CLI, and a bad URL stops it naming the flag", async () => {
    const bad = await runAcp(["gateway", "--port", "0", "--data", tmp(), "--summary-webhook", "nonsense"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--summary-webhook: summary webhook "nonsense…" is not a URL');

    const r = await receiver();
    const child = spawn(
      process.execPath,
      [
        CLI_PATH,
        "gateway",
        "--port",
        "0",
        "--data",
        tmp(),
        "--summary-webhook",
        `slack:${r.url}/cli`,
        "--allow-private-urls",
        "127.0.0.1",
      ],
      { env: { ...process.env, ACP_ADMIN_TOKEN: ADMIN_TOKEN }, stdio: ["ignore", "pipe", "pipe"] },
    );
    children.push(child);
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    await eventually(
      () => /summaries posted to slack:127\.0\.0\.1:\d+/.test(output),
      "the gateway started",
      20_000,
    );
    const url = /ACP gateway on (\S+)/.exec(output)![1]!;
    expect(output).toContain(`dashboard: ${url}/`);
    const a = await registerTestAgent(url, "agent-a", "pa");
    const b = await registerTestAgent(url, "agent-b", "pb");
    await handshake({ url } as never, a, b);
    await eventually(() => r.lines("/cli").length === 4, "the four handshake summaries");
    expect(r.lines("/cli")[0]).toMatch(/^\*agent-a → agent-b\* \(notification\): agent-a introduced itself/);
  });
});
