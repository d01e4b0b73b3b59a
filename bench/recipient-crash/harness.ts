/**
 * Kills a recipient at random moments and counts what its application saw. A real gateway (a child
 * process), a sender streaming numbered notifications, and a recipient that is a separate `node`
 * process running an SDK `AcpAgent`: it is `kill -9`ed a random time after it connects, again and
 * again, and started afresh each time on the same state. Its handler's effect is one write per
 * notification, tagged with the run that made it, so a number written twice is a handler run twice,
 * and the run that wrote it first is the kill that caused it.
 *
 * Two recipients: `ledger`, the SDK's default (handled ids in `handled.log`, written when the handler
 * returns); `store`, a SqliteHandledStore whose handler writes its effect and its message's
 * "handled" row in one transaction. Used by `npm run bench -- recipient-crash` and by
 * test/reliability/recipient-crash.test.ts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { AcpAgent, GatewayClient } from "../../src/client/index.js";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";

export type RecipientKind = "ledger" | "store";

export interface CrashRunOptions {
  /** The gateway's URL and admin token. */
  gateway: string;
  adminToken: string;
  /** The built SDK (`…/client/index.js`) the recipient process imports. */
  clientModule: string;
  /** A fresh directory for the recipient's state and effects. */
  dir: string;
  recipient: RecipientKind;
  /** How many times the recipient is killed. */
  kills: number;
  /** Each kill comes uniformly within this long after the recipient connected. Default 200 ms. */
  maxKillDelayMs?: number;
  /** Notifications per second the sender submits while the kills go on. Default 300. */
  rate?: number;
  /** The last (unkilled) recipient works through what is left until it makes no progress for this long. Default 30 s. */
  drainTimeoutMs?: number;
  /** Agent ids are `<prefix>-sender` and `<prefix>-recipient`. */
  prefix?: string;
  progress?: (text: string) => void;
}

export interface CrashFigures {
  recipient: RecipientKind;
  kills: number;
  /** Notifications sent (each accepted by the gateway). */
  sent: number;
  /** Distinct notifications whose effect exists. */
  handled: number;
  /** Effects beyond the first of each notification: handler runs the application saw twice. */
  duplicates: number;
  /** Kills after which the run that was killed had its work done again. */
  killsWithDuplicate: number;
  /** Accepted and never handled. */
  missing: number;
  /** Notifications sent per kill, on average. */
  meanMessagesPerKill: number;
  durationMs: number;
}

/**
 * The recipient process: connects when told ("go" on stdin), says "ready", handles until killed.
 * SIGTERM closes it gracefully (the last run).
 */
const RECIPIENT = `
import { appendFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
const env = process.env;
const { AcpAgent, SqliteHandledStore } = await import(env.CRASH_CLIENT_MODULE);
const run = Number(env.CRASH_RUN);
let handle;
let handledStore;
if (env.CRASH_KIND === "store") {
  const Database = createRequire(env.CRASH_CLIENT_MODULE)("better-sqlite3");
  const db = new Database(env.CRASH_EFFECTS);
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE IF NOT EXISTS effects (n INTEGER NOT NULL, run INTEGER NOT NULL)");
  handledStore = new SqliteHandledStore(db);
  const insert = db.prepare("INSERT INTO effects (n, run) VALUES (?, ?)");
  const handleIn = db.transaction((n, ctx) => {
    insert.run(n, run);
    handledStore.markHandled(ctx);
  });
  handle = (n, ctx) => handleIn(n, ctx);
} else {
  handle = (n, ctx) => appendFileSync(env.CRASH_EFFECTS, n + " " + run + " " + ctx.messageId + "\\n");
}
const agent = new AcpAgent({
  gateway: env.CRASH_GATEWAY,
  identity: JSON.parse(env.CRASH_IDENTITY),
  apiKey: env.CRASH_API_KEY,
  audit: false,
  state: { root: env.CRASH_STATE },
  ...(handledStore ? { handledStore } : {}),
  reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
});
agent.onNotification((body, ctx) => handle(body.n, ctx));
agent.on("error", (err) => process.stderr.write("recipient error: " + err.message + "\\n"));
process.once("SIGTERM", () => void agent.close().then(() => process.exit(0)));
const lines = createInterface({ input: process.stdin });
for await (const line of lines) if (line === "go") break;
await agent.connect();
process.stdout.write("ready\\n");
`;

interface Recipient {
  child: ChildProcess;
  run: number;
  /** Resolves when it printed "ready" (after "go"). */
  ready: Promise<void>;
  exited: Promise<void>;
}

export async function runRecipientCrashes(options: CrashRunOptions): Promise<CrashFigures> {
  const say = options.progress ?? (() => undefined);
  const prefix = options.prefix ?? `crash-${options.recipient}`;
  const admin = new GatewayClient({ gateway: options.gateway, adminToken: options.adminToken });
  const register = async (agentId: string) => {
    const identity = generateIdentity(agentId, `principal-of-${agentId}`);
    const { apiKey } = await admin.registerAgent(publicIdentity(identity));
    return { identity, apiKey };
  };
  const senderAgent = await register(`${prefix}-sender`);
  const recipientAgent = await register(`${prefix}-recipient`);
  const effects = join(options.dir, options.recipient === "store" ? "effects.db" : "effects.log");
  const start = (run: number) =>
    startRecipient(run, {
      CRASH_CLIENT_MODULE: options.clientModule,
      CRASH_KIND: options.recipient,
      CRASH_RUN: String(run),
      CRASH_EFFECTS: effects,
      CRASH_STATE: join(options.dir, "state"),
      CRASH_GATEWAY: options.gateway,
      CRASH_IDENTITY: JSON.stringify(recipientAgent.identity),
      CRASH_API_KEY: recipientAgent.apiKey,
    });

  const sender = new AcpAgent({
    gateway: options.gateway,
    identity: senderAgent.identity,
    apiKey: senderAgent.apiKey,
    audit: false,
    state: false,
    requestTimeoutMs: 60_000,
  });
  await sender.connect();
  const began = Date.now();
  let current = start(0);
  current.child.stdin?.write("go\n");
  await sender.handshake(`${prefix}-recipient`, { timeoutMs: 30_000 });
  await current.ready;

  const stream = new NumberedStream(sender, `${prefix}-recipient`, options.rate ?? 300);
  const streaming = stream.run();
  let standby = start(1);
  const maxDelay = options.maxKillDelayMs ?? 200;
  for (let kill = 1; kill <= options.kills; kill++) {
    await sleep(Math.random() * maxDelay);
    current.child.kill("SIGKILL");
    await current.exited;
    current = standby;
    current.child.stdin?.write("go\n");
    standby = start(kill + 1);
    await current.ready;
    if (kill % 10 === 0) say(`${kill} kills, ${stream.sent} notifications sent`);
  }
  standby.child.kill("SIGKILL");
  stream.stop();
  await streaming;

  // The last recipient works through what is left: wait while it makes progress.
  const count = () => countEffects(effects, options.recipient, options.clientModule);
  const stallMs = options.drainTimeoutMs ?? 30_000;
  let handled = count().distinct.size;
  for (let lastProgress = Date.now(); handled < stream.sent && Date.now() - lastProgress < stallMs; ) {
    await sleep(200);
    const now = count().distinct.size;
    if (now > handled) lastProgress = Date.now();
    handled = now;
  }
  current.child.kill("SIGTERM");
  await current.exited;
  await sender.close();

  const { distinct, duplicates, duplicateRuns } = count();
  return {
    recipient: options.recipient,
    kills: options.kills,
    sent: stream.sent,
    handled: distinct.size,
    duplicates,
    killsWithDuplicate: duplicateRuns.size,
    missing: stream.sent - distinct.size,
    meanMessagesPerKill: Math.round(stream.sent / options.kills),
    durationMs: Date.now() - began,
  };
}

/** Numbered notifications (0, 1, 2 …) at a steady rate, a few in flight, until stopped. */
class NumberedStream {
  /** Notifications submitted; each is accepted by the gateway once `run` resolves. */
  sent = 0;
  private stopped = false;

  constructor(
    private readonly sender: AcpAgent,
    private readonly to: string,
    private readonly rate: number,
  ) {}

  async run(): Promise<void> {
    const began = Date.now();
    const inFlight = new Set<Promise<unknown>>();
    let failure: Error | undefined;
    while (!this.stopped && !failure) {
      const due = began + (this.sent * 1000) / this.rate;
      if (due > Date.now()) await sleep(due - Date.now());
      if (inFlight.size >= 16) await Promise.race(inFlight);
      const n = this.sent++;
      const sent = this.sender
        .notify(this.to, { n })
        .catch((err: Error) => {
          failure ??= new Error(`notification ${n} was not accepted: ${err.message}`);
        })
        .finally(() => inFlight.delete(sent));
      inFlight.add(sent);
    }
    await Promise.all(inFlight);
    if (failure) throw failure;
  }

  stop(): void {
    this.stopped = true;
  }
}

function startRecipient(run: number, env: Record<string, string>): Recipient {
  const child = spawn(process.execPath, ["--input-type=module", "-e", RECIPIENT], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let errors = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    errors = (errors + chunk.toString()).slice(-4_000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const ready = new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (line === "ready") resolve();
    });
    child.once("exit", (code, signal) =>
      reject(new Error(`recipient run ${run} exited before it was ready (${code ?? signal}):\n${errors}`)),
    );
  });
  ready.catch(() => undefined); // a standby killed before "go" never becomes ready
  return { child, run, ready, exited };
}

/** Which notification numbers have an effect, how many extra effects, and the runs that made a first effect done again. */
function countEffects(
  file: string,
  kind: RecipientKind,
  clientModule: string,
): { distinct: Set<number>; duplicates: number; duplicateRuns: Set<number> } {
  const rows: [n: number, run: number][] = [];
  if (kind === "store") {
    if (existsSync(file)) {
      const Database = createRequire(clientModule)("better-sqlite3") as typeof import("better-sqlite3");
      const db = new Database(file, { readonly: true });
      for (const row of db.prepare("SELECT n, run FROM effects ORDER BY rowid").all() as {
        n: number;
        run: number;
      }[])
        rows.push([row.n, row.run]);
      db.close();
    }
  } else if (existsSync(file)) {
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const [n, run] = line.split(" ").map(Number);
      if (line !== "" && n !== undefined && run !== undefined) rows.push([n, run]);
    }
  }
  const firstRun = new Map<number, number>();
  let duplicates = 0;
  const duplicateRuns = new Set<number>();
  for (const [n, run] of rows) {
    const first = firstRun.get(n);
    if (first === undefined) firstRun.set(n, run);
    else {
      duplicates++;
      duplicateRuns.add(first);
    }
  }
  return { distinct: new Set(firstRun.keys()), duplicates, duplicateRuns };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `startDefaultGateway(options)` from `serverModule` in a child process; prints its URL. */
const GATEWAY = `
const { startDefaultGateway } = await import(process.env.CRASH_SERVER_MODULE);
const gateway = await startDefaultGateway(JSON.parse(process.env.CRASH_GATEWAY_OPTIONS));
process.stdout.write("ACP gateway on " + gateway.url + "\\n");
process.once("SIGTERM", () => void gateway.close().then(() => process.exit(0)));
`;

export interface CrashGateway {
  url: string;
  stop(): Promise<void>;
}

/**
 * The gateway under test, in a process of its own: the embedded broker in `data`, an admin token,
 * a delivery limit high enough that a hundred kills cannot use up a message's deliveries (each
 * dropped connection counts one attempt on the oldest message it held).
 */
export async function startCrashGateway(serverModule: string, data: string, adminToken: string) {
  const options = {
    port: 0,
    data,
    adminToken,
    delivery: { maxDeliver: 1_000 },
    limits: { ratePerSecond: 1_000_000, burst: 2_000_000 },
  };
  const child = spawn(process.execPath, ["--input-type=module", "-e", GATEWAY], {
    env: {
      ...process.env,
      ACP_LOG_LEVEL: "warn",
      CRASH_SERVER_MODULE: serverModule,
      CRASH_GATEWAY_OPTIONS: JSON.stringify(options),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const match = /ACP gateway on (\S+)/.exec(line);
      if (match) resolve(match[1] as string);
    });
    child.once("exit", (code) => reject(new Error(`the gateway exited (code ${code}) before it was ready`)));
  });
  return {
    url,
    stop: async () => {
      child.kill("SIGTERM");
      const force = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(force);
    },
  } satisfies CrashGateway;
}
