import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type Broker, openBroker } from "../../src/broker/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { eventually, expectBrokerError, message, reader } from "./support.js";

const CHILD = fileURLToPath(new URL("./fixtures/embedded-crash-child.mjs", import.meta.url));
const tmp = useTmpDir("acp-broker-crash-");
const children: ChildProcess[] = [];
const opened: Broker[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
});

/** Runs the child until it has printed `count` lines with `tag`, then kills it with SIGKILL. */
function runUntilKilled(
  mode: "submit" | "consume",
  data: string,
  tag: string,
  count: number,
): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, mode, data], { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    const ids: string[] = [];
    let buffer = "";
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        const [word, id] = line.split(" ");
        if (word === tag && id) ids.push(id);
      }
      if (ids.length >= count && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    child.once("exit", (code, signal) => {
      if (signal === "SIGKILL") resolve(ids);
      else reject(new Error(`child exited with code ${code} before being killed:\n${stderr}`));
    });
  });
}

async function open(data: string): Promise<Broker> {
  const broker = await openBroker({ data });
  opened.push(broker);
  return broker;
}

describe("embedded broker durability", () => {
  it("loses nothing acknowledged when the process is killed with SIGKILL, and delivers it exactly once", async () => {
    const data = tmp();
    // Phase 1: submits acknowledged to the child must all be stored.
    const submitted = await runUntilKilled("submit", data, "SUBMITTED", 2_000);
    expect(submitted.length).toBeGreaterThanOrEqual(2_000);
    const check = await open(data);
    const alices = (id: string) => ({ from: "alice", id });
    for (const id of submitted) expect((await check.status(alices(id)))?.status).toBe("queued");
    await check.close();

    // Phase 2: acks acknowledged to the child must all be stored.
    const acked = new Set(await runUntilKilled("consume", data, "ACKED", 500));
    expect(acked.size).toBeGreaterThanOrEqual(500);

    // Phase 3: everything else is delivered, nothing acknowledged comes back.
    const broker = await open(data);
    for (const id of acked) expect((await broker.status(alices(id)))?.status).toBe("acknowledged");
    // An ack can commit just before the kill and never be printed: expect everything else.
    const expected = new Set<string>();
    for (const id of submitted) {
      if ((await broker.status(alices(id)))?.status !== "acknowledged") expected.add(id);
    }
    expect(expected.size).toBeGreaterThan(0);
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 256 }));
    const delivered = new Set<string>();
    while ([...expected].some((id) => !delivered.has(id))) {
      const delivery = await inbox.next();
      expect(acked.has(delivery.id) || delivered.has(delivery.id)).toBe(false);
      delivered.add(delivery.id);
      await broker.ack("bob", delivery);
    }
    // Deliveries still buffered (submits in flight at the kill) are new ids, never acknowledged ones.
    for (;;) {
      const extra = await inbox.next(300).catch(() => null);
      if (!extra) break;
      expect(acked.has(extra.id) || delivered.has(extra.id)).toBe(false);
      delivered.add(extra.id);
      await broker.ack("bob", extra);
    }
  });

  it("refuses a second process on the same data directory while the first holds it", async () => {
    const data = tmp();
    const first = await open(data);
    await first.submit(message("alice", "bob"));
    const error = await expectBrokerError(openBroker({ data }), "unavailable");
    expect(error.message).toMatch(/in use by another process/);
    await first.close();
    const second = await open(data);
    expect((await second.health()).ok).toBe(true);
  });

  it("dead-letters a last delivery whose inbox closed before its ack wait ended", async () => {
    const data = tmp();
    const broker = await openBroker({
      data,
      delivery: { ackWaitMs: 150, maxDeliver: 2 },
      retentionMs: 60_000,
    });
    opened.push(broker);
    const input = message("alice", "bob");
    await broker.submit(input);
    const inbox = await broker.openInbox("bob");
    const deliveries = reader(inbox);
    expect((await deliveries.next()).attempt).toBe(1);
    expect((await deliveries.next()).attempt).toBe(2);
    await inbox.close();
    const status = await eventually(async () => {
      const current = await broker.status(input);
      expect(current?.status).toBe("failed");
      return current!;
    });
    expect(status.deadLetter?.reason).toBe("max-deliveries");
  });
});
