/** The benchmarked gateway (gateway-child.ts) seen from the benchmark: start, ask, stop. */
import { type ChildProcess, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ADMIN_TOKEN, stopChild } from "../gateway/processes.js";
import type { ChildConfig, ChildMessage, ChildRequest } from "./gateway-child.js";

const here = dirname(fileURLToPath(import.meta.url));
const START_TIMEOUT_MS = 300_000;

export class BenchGateway {
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
    /** Spawn → ready, as the benchmark saw it. */
    readonly readyMs: number,
    /** Its data directory. */
    readonly data: string,
  ) {}

  get wsUrl(): string {
    return `${this.url.replace(/^http/, "ws")}/api/v1/ws`;
  }

  static async start(config: ChildConfig): Promise<BenchGateway> {
    const started = performance.now();
    const child = fork(join(here, "gateway-child.js"), [JSON.stringify(config)], {
      execArgv: ["--expose-gc"],
      env: { ...process.env, ACP_ADMIN_TOKEN: ADMIN_TOKEN, ACP_LOG_LEVEL: "warn" },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const ready = await new Promise<Extract<ChildMessage, { type: "ready" }>>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error("the gateway did not start in time")),
        START_TIMEOUT_MS,
      );
      child.once("message", (message: ChildMessage) => {
        clearTimeout(timer);
        if (message.type === "ready") resolve(message);
        else reject(new Error(`unexpected first message ${JSON.stringify(message)}`));
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the gateway exited during start-up (code ${code})`));
      });
    });
    return new BenchGateway(child, ready.url, performance.now() - started, config.data);
  }

  ask<T extends ChildMessage["type"]>(request: ChildRequest): Promise<Extract<ChildMessage, { type: T }>> {
    return new Promise((resolve) => {
      const onMessage = (message: ChildMessage) => {
        if (message.type !== request.type) return;
        this.child.off("message", onMessage);
        resolve(message as Extract<ChildMessage, { type: T }>);
      };
      this.child.on("message", onMessage);
      this.child.send(request);
    });
  }

  async loopDelay(reset = true): Promise<{ maxMs: number; p99Ms: number }> {
    return this.ask<"loop-delay">({ type: "loop-delay", reset });
  }

  async rss(): Promise<number> {
    return (await this.ask<"rss">({ type: "rss" })).bytes;
  }

  /**
   * Runs the embedded broker's retention sweep with `retentionMs`; resolves when it is done: how
   * long it took, how long each of its batches held the event loop (to its commit) and how much of
   * that was the sweep's own statements (ms).
   */
  async purge(retentionMs: number): Promise<{ ms: number; batches: number[]; statements: number[] }> {
    const { ms, batches, statements } = await this.ask<"purge">({ type: "purge", retentionMs });
    return { ms, batches, statements };
  }

  async expiredThroughSeq(): Promise<number | null> {
    return (await this.ask<"sweep">({ type: "sweep" })).expiredThroughSeq;
  }

  stop(): Promise<void> {
    return stopChild(this.child, 60_000);
  }
}

/** A process's resident memory from /proc (nats-server). */
export function rssOfPid(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** GET with a credential; resolves with the status, the parsed body and the latency in ms. */
export async function getJson(
  url: string,
  credential: { apiKey: string } | { token: string },
): Promise<{ status: number; body: Record<string, unknown>; ms: number }> {
  const headers: Record<string, string> =
    "apiKey" in credential
      ? { "x-api-key": credential.apiKey }
      : { authorization: `Bearer ${credential.token}` };
  const started = performance.now();
  const res = await fetch(url, { headers });
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body, ms: performance.now() - started };
}

export const adminCredential = { token: ADMIN_TOKEN };
