import type { Command } from "commander";
import { AcpAgent, type AcpAgentOptions, GatewayClient, type InboundMessage } from "../../client/index.js";
import type { HandoffBody } from "../../protocol/index.js";
import { A2A_PROGRESS_METHOD, A2A_STATUS_METHOD } from "../../wire/a2a-outbound.js";
import { CliError, parseJsonInput, printJson, printLine, readInput } from "../io.js";
import { wholeNumber } from "../option-parsers.js";
import {
  apiKeyOf,
  type GatewayFlags,
  gatewayOf,
  guarded,
  keyFileOf,
  stateOf,
  withGatewayOptions,
} from "../shared.js";

interface SendFlags extends GatewayFlags {
  to: string;
  method: string;
  body?: string;
  notification?: boolean;
  encrypt?: boolean;
  timeout: number;
  summary?: string;
}

/** Progress goes to stderr, so stdout carries only the result. */
const progress = (text: string) => process.stderr.write(`${text}\n`);

export function registerSend(program: Command): void {
  withGatewayOptions(
    program
      .command("send")
      .description(
        "sign and send a message (handshaking with the peer first if needed); a request waits for and prints the response",
      ),
    ["key", "api-key"],
  )
    .requiredOption("--to <agent-id>", "the recipient agent")
    .option(
      "--method <method>",
      "agent.request, agent.notification, agent.handoff or agent.<extension>",
      "agent.request",
    )
    .option("--body <json>", "the body: inline JSON, @file, or - for stdin (default {})")
    .option("--notification", "send an extension method as a notification (no response)")
    .option("--encrypt", "encrypt the body end to end to the recipient's registered key")
    .option("--timeout <ms>", "how long to wait for the handshake and the response", wholeNumber(1), 30_000)
    .option(
      "--summary <text>",
      "your human-readable summary, signed with the message: the audit log, the dashboard and chat show it as the agent's words",
    )
    .action((flags: SendFlags) => guarded(flags, () => sendCommand(flags)));

  withGatewayOptions(
    program
      .command("inbox")
      .description(
        "receive the agent's messages (verified, acknowledged) and print them; requests are answered -32601 (no handler here)",
      ),
    ["key", "api-key"],
  )
    .option("--follow", "keep running and print messages as they arrive (Ctrl-C to stop)")
    .option(
      "--wait <ms>",
      "without --follow: give up waiting for the queue to drain after this long",
      wholeNumber(1),
      10_000,
    )
    .action((flags: GatewayFlags & { follow?: boolean; wait: number }) =>
      guarded(flags, () => inboxCommand(flags)),
    );

  withGatewayOptions(
    program.command("status <message-id>").description("a message's delivery status with its timestamps"),
    ["api-key"],
  ).action((id: string, flags: GatewayFlags) =>
    guarded(flags, async () => {
      const status = await new GatewayClient({
        gateway: gatewayOf(flags),
        apiKey: apiKeyOf(flags),
      }).messageStatus(id);
      if (flags.json) return printJson(status);
      printLine(`${status.id}: ${status.status} (${status.from} → ${status.to})`);
      const times: [string, string | undefined][] = [
        ["queued", status.queued_at],
        ["delivered", status.delivered_at],
        ["acknowledged", status.acknowledged_at],
        ["failed", status.failed_at],
        ["expired", status.expired_at],
      ];
      for (const [name, at] of times) if (at) printLine(`  ${name.padEnd(13)}${at}`);
      printLine(`  ${"retries".padEnd(13)}${status.retry_count}`);
      if (status.last_error) printLine(`  ${"last error".padEnd(13)}${status.last_error}`);
      if (status.dead_letter)
        printLine(`  ${"dead letter".padEnd(13)}${status.dead_letter.reason}: ${status.dead_letter.detail}`);
    }),
  );
}

function agentOptions(flags: GatewayFlags, extra: Partial<AcpAgentOptions>): AcpAgentOptions {
  return {
    gateway: gatewayOf(flags),
    keyFile: keyFileOf(flags),
    apiKey: apiKeyOf(flags),
    ...stateOf(flags),
    ...extra,
  };
}

/** `--body` as inline JSON, `@file` or `-`; it must be a JSON object. */
async function readBody(body: string | undefined): Promise<Record<string, unknown>> {
  if (body === undefined) return {};
  const source =
    body === "-" || body.startsWith("@") ? await readInput(body === "-" ? "-" : body.slice(1)) : undefined;
  const name = source ? `--body ${source.name}` : "--body";
  const value = parseJsonInput(source?.text ?? body, name);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new CliError(`${name}: must be a JSON object, e.g. {"action":"get-availability"}`);
  }
  return value as Record<string, unknown>;
}

async function sendCommand(flags: SendFlags): Promise<void> {
  const timeoutMs = flags.timeout;
  const body = await readBody(flags.body);
  // Only replies and handshakes: the rest of this agent's inbox stays queued for its real consumer.
  const agent = new AcpAgent(agentOptions(flags, { consume: "replies", requestTimeoutMs: timeoutMs }));
  agent.on("error", (err) => progress(`warning: ${err.message}`));
  let requestId: unknown;
  agent.on("message", (m: InboundMessage) => {
    if (m.kind === "response" || m.kind === "error") requestId = m.id;
    const news = exchangeNews(m);
    if (news) progress(news);
  });
  await agent.connect();
  try {
    if (agent.handshakeState(flags.to) !== "established") {
      progress(`handshaking with ${flags.to}…`);
      await agent.handshake(flags.to, { timeoutMs });
    }
    const common = { encrypt: flags.encrypt ?? false, ...(flags.summary ? { summary: flags.summary } : {}) };
    if (flags.notification || flags.method === "agent.notification") {
      const { id } = await agent.notify(flags.to, body, { ...common, method: flags.method, timeoutMs });
      if (flags.json) return printJson({ id, to: flags.to, method: flags.method });
      return printLine(`sent ${flags.method} ${id} to ${flags.to}`);
    }
    progress(`sending ${flags.method} to ${flags.to}, waiting up to ${timeoutMs} ms for the response…`);
    const response =
      flags.method === "agent.handoff"
        ? await agent.handoff(flags.to, body as unknown as HandoffBody, { ...common, timeoutMs })
        : await agent.request(flags.to, body, { ...common, method: flags.method, timeoutMs });
    if (flags.json) return printJson({ id: requestId, from: flags.to, response });
    printLine(`response from ${flags.to} to ${String(requestId)}:`);
    printJson(response);
  } finally {
    await agent.close();
  }
}

/** What an A2A agent behind the bridge says about the task while the request waits, for people. */
function exchangeNews(m: InboundMessage): string | undefined {
  const body = m.body ?? {};
  if (m.method === A2A_STATUS_METHOD) return `task ${String(body.taskId)} ${String(body.state)}`;
  if (m.method === A2A_PROGRESS_METHOD && typeof body.text === "string" && body.text !== "") {
    return `task ${String(body.taskId)}: ${body.text}`;
  }
  return undefined;
}

function describe(m: InboundMessage): string {
  const what = m.error ? `error ${m.error.code} ${m.error.message}` : JSON.stringify(m.body ?? {});
  const lock = m.encrypted ? " (end-to-end encrypted)" : "";
  return `${m.headers.timestamp} ${m.kind} ${m.method} from ${m.from} (${m.principalId}) ${m.messageId}${lock}: ${what}`;
}

async function inboxCommand(flags: GatewayFlags & { follow?: boolean; wait: number }): Promise<void> {
  const waitMs = flags.wait;
  const agent = new AcpAgent(agentOptions(flags, {}));
  let lastActivity = Date.now();
  agent.on("message", (m) => {
    lastActivity = Date.now();
    if (flags.json) {
      process.stdout.write(
        `${JSON.stringify({ id: m.messageId, kind: m.kind, method: m.method, from: m.from, principal: m.principalId, timestamp: m.headers.timestamp, encrypted: m.encrypted, body: m.body ?? null, ...(m.error ? { error: m.error } : {}) })}\n`,
      );
    } else {
      printLine(describe(m));
    }
  });
  agent.on("error", (err) => progress(`warning: ${err.message}`));
  agent.on("disconnected", (info) =>
    progress(`disconnected (${info.code})${info.willReconnect ? "; reconnecting…" : ""}`),
  );
  await agent.connect();
  if (flags.follow) {
    progress(`following the inbox of ${agent.agentId} (Ctrl-C to stop)`);
    await new Promise<void>((resolve) => {
      process.once("SIGINT", resolve);
      process.once("SIGTERM", resolve);
      agent.on("disconnected", (info) => {
        if (!info.willReconnect) resolve();
      });
    });
    await agent.close();
    return;
  }
  const http = new GatewayClient({ gateway: gatewayOf(flags), apiKey: apiKeyOf(flags) });
  const deadline = Date.now() + waitMs;
  try {
    // The gateway streams the queue without an end marker: done when quiet and nothing is left for us.
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      if (Date.now() - lastActivity < 300) continue;
      const left = await pendingFor(http, agent.agentId!);
      if (left === 0) return;
      if (Date.now() > deadline) {
        progress(`${left} message(s) still unacknowledged after ${waitMs} ms; run again or use --follow`);
        return;
      }
    }
  } finally {
    await agent.close();
  }
}

async function pendingFor(http: GatewayClient, agentId: string): Promise<number> {
  const [queued, delivered] = await Promise.all(
    (["queued", "delivered"] as const).map((status) => http.listMessages({ to: agentId, status, limit: 50 })),
  );
  return (queued?.items.length ?? 0) + (delivered?.items.length ?? 0);
}
