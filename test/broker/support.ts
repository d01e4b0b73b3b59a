import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, expect } from "vitest";
import type { Broker, Delivery, Inbox, MessageRef, SubmitInput } from "../../src/broker/index.js";
import { BrokerError } from "../../src/broker/index.js";

let counter = 0;

/** A valid submission; ids are unique per test run. */
export function message(from: string, to: string, overrides: Partial<SubmitInput> = {}): SubmitInput {
  counter += 1;
  const id = overrides.id ?? `msg-${process.pid}-${Date.now().toString(36)}-${counter}`;
  return {
    id,
    from,
    to,
    kind: "notification",
    method: "agent.notify",
    envelope: JSON.stringify({ jsonrpc: "2.0", method: "agent.notify", params: { n: counter, id } }),
    submittedAt: new Date().toISOString(),
    ...overrides,
  };
}

export interface Reader {
  /** The next delivery; fails the test if none comes within `timeoutMs`. */
  next(timeoutMs?: number): Promise<Delivery>;
}

/** Reads an inbox one delivery at a time without ever losing one to an abandoned wait. */
export function reader(inbox: Inbox): Reader {
  const iterator = inbox[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<Delivery>> | undefined;
  const take = () => {
    pending ??= iterator.next();
    return pending;
  };
  const within = async (ms: number): Promise<IteratorResult<Delivery> | "timeout"> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), ms);
    });
    const result = await Promise.race([take(), timeout]);
    clearTimeout(timer);
    if (result !== "timeout") pending = undefined;
    return result;
  };
  return {
    async next(timeoutMs = 10_000) {
      const result = await within(timeoutMs);
      if (result === "timeout") throw new Error(`no delivery to ${inbox.agentId} within ${timeoutMs} ms`);
      if (result.done) throw new Error(`the inbox of ${inbox.agentId} closed`);
      return result.value;
    },
  };
}

/**
 * The positive barrier before "nothing else arrived" (the broker's counterpart of
 * test/helpers/messaging.ts's `deliveredBefore`): submits `to` a later message and reads `inbox`
 * until it arrives. An inbox hands out in order, so anything due before it has come by then. With
 * `redelivered`, the later message is left unacknowledged and read until it comes again, its ack
 * wait run out: a redelivery of anything handed out before it would have come first. Returns what
 * came before it; the later message is acknowledged.
 */
export async function deliveredBefore(
  broker: Broker,
  inbox: Reader,
  to: string,
  options: { redelivered?: boolean } = {},
): Promise<Delivery[]> {
  const later = message("barrier", to);
  await broker.submit(later);
  const before: Delivery[] = [];
  for (;;) {
    const delivery = await inbox.next();
    if (delivery.from !== later.from || delivery.id !== later.id) before.push(delivery);
    else if (!options.redelivered || delivery.attempt > 1) {
      await broker.ack(to, later);
      return before;
    }
  }
}

/**
 * The positive barrier before "no ack wait ran out while the recipient worked": calls
 * `working(work.agent, work.message)` every `work.everyMs` (the recipient's pace) while `rounds`
 * later messages to `control.agent`, one after another, are read from `control.inbox` until they
 * come again (`deliveredBefore` with `redelivered`). Each started its ack wait after what was out
 * already: an ack wait that `working()` (or an inbox's keep-alive) failed to restart would have run
 * out first. Returns what `control.inbox` handed out besides them.
 */
export async function workedOnWhile(
  broker: Broker,
  work: { agent: string; message: MessageRef; everyMs: number },
  control: { inbox: Reader; agent: string; rounds: number },
): Promise<Delivery[]> {
  let done = false;
  const heartbeat = (async () => {
    while (!done) {
      await broker.working(work.agent, work.message);
      await sleep(work.everyMs);
    }
  })();
  heartbeat.catch(() => undefined); // awaited below: a refused `working()` fails the test there
  try {
    const besides: Delivery[] = [];
    for (let round = 0; round < control.rounds; round++) {
      besides.push(...(await deliveredBefore(broker, control.inbox, control.agent, { redelivered: true })));
    }
    return besides;
  } finally {
    done = true;
    await heartbeat;
  }
}

/** A receiver of `agent`'s routed deliveries that keeps what it is handed. */
export function routedTo(broker: Broker, agent: string) {
  const got: Delivery[] = [];
  const receiver = broker.receiveRouted(agent, (delivery) => got.push(delivery));
  return { got, receiver };
}

/** alice asks bob with a reply route; returns the request and bob's answer to it. */
export async function exchange(broker: Broker, replyTo: string | undefined) {
  const request = message("alice", "bob", { kind: "request", method: "agent.request" });
  await broker.submit({ ...request, ...(replyTo ? { replyTo } : {}) });
  const answer = message("bob", "alice", { kind: "response", method: "response", inReplyTo: request.id });
  await broker.submit(answer);
  return { request, answer };
}

/** Polls `check` until it stops throwing (or returns true), for state that changes asynchronously. */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function expectBrokerError(
  promise: Promise<unknown>,
  kind: BrokerError["kind"],
  field?: string,
): Promise<BrokerError> {
  const error = await promise.then(
    () => {
      throw new Error(`expected BrokerError ${kind}, but it succeeded`);
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(BrokerError);
  const brokerError = error as BrokerError;
  expect(brokerError.kind).toBe(kind);
  if (field !== undefined) expect(brokerError.field).toBe(field);
  return brokerError;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export type { Broker };

const HOLD_CHILD = fileURLToPath(new URL("./fixtures/hold-child.mjs", import.meta.url));

export interface Handed {
  id: string;
  attempt: number;
}

/**
 * Runs a child "gateway" (fixtures/hold-child.mjs) on the same store with `options`, reading
 * `agent`'s inbox without acknowledging, until `done(handedSoFar)` is true; then kills it with
 * SIGKILL (its inbox is never closed) and resolves with what it was handed.
 */
export function holdUntilKilled(
  options: Record<string, unknown>,
  agent: string,
  done: (handed: Handed[]) => boolean,
  timeoutMs = 20_000,
): Promise<Handed[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [HOLD_CHILD, JSON.stringify(options), agent], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const handed: Handed[] = [];
    let buffer = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        const [word, id, attempt] = line.split(" ");
        if (word === "HANDED" && id) handed.push({ id, attempt: Number(attempt) });
      }
      if (done(handed)) child.kill("SIGKILL");
    });
    child.once("exit", () => {
      clearTimeout(timer);
      if (done(handed)) resolve(handed);
      else
        reject(
          new Error(`the holding child ended first; it was handed ${JSON.stringify(handed)}\n${stderr}`),
        );
    });
  });
}

/**
 * Brokers and NATS connections a test opens, each closed after it. Call it after
 * `useNatsServer()`: this afterEach then runs first, so they close before the server stops.
 */
export function closedAfterEach(): {
  opened: Broker[];
  connections: Array<{ close(): Promise<void> }>;
  /** A plain NATS client of the server, closed after the test (to do what a broker part would). */
  client(servers: string): Promise<NatsConnection>;
} {
  const opened: Broker[] = [];
  const connections: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
    await Promise.all(connections.splice(0).map((nc) => nc.close().catch(() => undefined)));
  });
  const client = async (servers: string): Promise<NatsConnection> => {
    const nc = await connect({ servers });
    connections.push(nc);
    return nc;
  };
  return { opened, connections, client };
}
