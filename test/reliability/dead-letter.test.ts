/**
 * A recipient process that crashes (SIGKILL, by its own hand) on one "poison" message, before
 * acknowledging it, every time it gets it. The gateway redelivers it after each ack wait up to the
 * delivery limit, then dead-letters it: its sender reads `failed` / `max-deliveries`. The other
 * messages are handled once each: the recipient keeps a crash-safe ledger of handled ids (the
 * application-side half of exactly-once across crashes).
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { buildNotification } from "../../src/protocol/index.js";
import { handshake, submit } from "../helpers/messaging.js";
import { api, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { useTmpDir } from "../helpers/tmp.js";
import { deliveryFigures, recordFigures } from "./support/figures.js";
import { sleep } from "./support/processes.js";

const MAX_DELIVER = 3;
const DELIVERY = { ackWaitMs: 1_000, maxDeliver: MAX_DELIVER, backoffFactor: 1 };
const WS_MODULE = createRequire(import.meta.url).resolve("ws");

/**
 * The recipient: handles each message by appending its id to a ledger file (synchronously), then
 * acknowledges; skips ids already in the ledger. On the poison message it records the attempt and
 * kills itself before anything else.
 */
const RECIPIENT = `
import { appendFileSync, existsSync, readFileSync, writeSync } from "node:fs";
const { default: WebSocket } = await import(process.env.WS_MODULE);
const ledger = process.env.LEDGER;
const handled = new Set(existsSync(ledger) ? readFileSync(ledger, "utf8").split("\\n").filter(Boolean) : []);
const ws = new WebSocket(process.env.WS_URL, { headers: { "x-api-key": process.env.API_KEY } });
ws.on("message", (data) => {
  const frame = JSON.parse(data.toString());
  if (frame.type !== "new_message") return;
  const line = (event) => writeSync(1, JSON.stringify({ event, id: frame.id, attempt: frame.attempt }) + "\\n");
  if (frame.envelope.params?.body?.poison === true) {
    line("crash");
    process.kill(process.pid, "SIGKILL");
  }
  if (handled.has(frame.id)) line("skipped");
  else {
    appendFileSync(ledger, frame.id + "\\n");
    handled.add(frame.id);
    line("handled");
  }
  ws.send(JSON.stringify({ type: "acknowledge", id: frame.id, from: frame.from }));
});
`;

interface RecipientEvent {
  event: "crash" | "handled" | "skipped";
  id: string;
  attempt: number;
}

/** Runs the recipient until it crashes or `idleMs` pass; returns what it reported. */
function runRecipient(
  env: Record<string, string>,
  idleMs: number,
): Promise<{ crashed: boolean; events: RecipientEvent[] }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", RECIPIENT], {
      env: { ...process.env, ...env, WS_MODULE },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => child.kill("SIGTERM"), idleMs);
    child.once("exit", (_code, signal) => {
      clearTimeout(timer);
      const events = output
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as RecipientEvent);
      resolve({ crashed: signal === "SIGKILL", events });
    });
  });
}

/**
 * `everyAttemptReachesAgent`: on the embedded broker each counted delivery is one the agent got.
 * On NATS the server counts deliveries: one sent to a pull request of the connection that just
 * died is counted but never seen (a "phantom" attempt), so the agent may see fewer than the limit.
 */
function crashingRecipientSuite(
  name: string,
  open: () => Promise<TestGateway>,
  everyAttemptReachesAgent: boolean,
): void {
  const tmp = useTmpDir("acp-rel-dlq-");
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
  });

  it("redelivers up to the limit, then dead-letters it as failed for the sender", async () => {
    gw = await open();
    const alpha = await gw.register("agent-alpha");
    const beta = await gw.register("agent-beta");
    await handshake(gw, alpha, beta);
    const acknowledged = new Set<string>();
    const normal: string[] = [];
    let poisonId = "";
    for (let n = 0; n < 11; n++) {
      const body = n === 5 ? { poison: true } : { n };
      const res = await submit(gw, alpha, buildNotification(alpha.sender, "agent-beta", body));
      expect(res.status).toBe(202);
      acknowledged.add(res.json.id as string);
      if (n === 5) poisonId = res.json.id as string;
      else normal.push(res.json.id as string);
    }

    const env = { WS_URL: gw.gateway.wsUrl, API_KEY: beta.apiKey, LEDGER: join(tmp(), "handled.log") };
    const events: RecipientEvent[] = [];
    let crashes = 0;
    let status: Record<string, unknown> = {};
    // Bounded: at most MAX_DELIVER crashes are expected, a few more runs are allowed to drain.
    for (let run = 0; run < MAX_DELIVER + 4; run++) {
      const result = await runRecipient(env, 4_000);
      events.push(...result.events);
      if (result.crashed) crashes++;
      status = (await api(gw.url, `/api/v1/messages/${poisonId}/status`, { apiKey: alpha.apiKey })).json;
      if (status.status === "failed" && !result.crashed) break;
      await sleep(DELIVERY.ackWaitMs);
    }

    const handledTimes = new Map<string, number>();
    // Only the stream's own messages: the handshake's announce and capabilities are handled too.
    for (const e of events.filter((e) => e.event === "handled" && acknowledged.has(e.id))) {
      handledTimes.set(e.id, (handledTimes.get(e.id) ?? 0) + 1);
    }
    const poisonAttempts = events.filter((e) => e.event === "crash").map((e) => e.attempt);
    const figures = deliveryFigures(normal.length, new Set(normal), handledTimes);
    recordFigures(`dead-letter-${name}`, {
      ...figures,
      poisonDeliveries: poisonAttempts.length,
      poisonAttemptsSeen: poisonAttempts.join("/"),
      recipientCrashes: crashes,
      redeliveriesSkippedByLedger: events.filter((e) => e.event === "skipped").length,
      poisonStatus: String(status.status),
      poisonRetryCount: Number(status.retry_count),
      deadLetterReason: String((status.dead_letter as { reason?: string } | undefined)?.reason),
    });

    if (everyAttemptReachesAgent) {
      expect(poisonAttempts).toEqual([1, 2, 3]);
    } else {
      expect(poisonAttempts.length).toBeGreaterThanOrEqual(1);
      expect(
        poisonAttempts.every((a, i) => a <= MAX_DELIVER && (i === 0 || a > (poisonAttempts[i - 1] ?? 0))),
      ).toBe(true);
    }
    expect(crashes).toBe(poisonAttempts.length);
    expect(status).toMatchObject({
      status: "failed",
      retry_count: MAX_DELIVER - 1,
      dead_letter: { reason: "max-deliveries" },
    });
    expect(figures.lost).toBe(0);
    expect(figures.duplicated).toBe(0);
    for (const id of normal) {
      const seen = await api(gw.url, `/api/v1/messages/${id}/status`, { apiKey: alpha.apiKey });
      expect(seen.json.status).toBe("acknowledged");
    }
    // The dead letter is final: it is not delivered again.
    const after = await runRecipient(env, 2 * DELIVERY.ackWaitMs);
    expect(after.events.filter((e) => e.id === poisonId)).toEqual([]);
    expect(readFileSync(env.LEDGER, "utf8")).not.toContain(poisonId);
  }, 90_000);
}

describe("a recipient that crashes before acking (embedded)", () => {
  crashingRecipientSuite("embedded", () => startTestGateway({ delivery: DELIVERY }), true);
});

describeWithNats("a recipient that crashes before acking (NATS)", () => {
  const startNats = useNatsServer();
  crashingRecipientSuite(
    "nats",
    async () => startTestGateway({ natsUrl: (await startNats()).url, delivery: DELIVERY }),
    false,
  );
});
