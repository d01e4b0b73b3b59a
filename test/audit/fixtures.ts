import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type AuditEntry, AuditLog, auditEntryFor } from "../../src/audit/index.js";

/** A clock the test moves by hand. */
export function manualClock(start: string): { now: () => Date; set: (iso: string) => void } {
  let current = new Date(start);
  return { now: () => new Date(current), set: (iso) => (current = new Date(iso)) };
}

export function headers(agent: string, principal: string, type: string, extra: Record<string, unknown> = {}) {
  return {
    "agent-id": agent,
    "principal-id": principal,
    timestamp: "2026-02-14T14:30:00Z",
    "message-type": type,
    "trust-layer-version": "1.0.0",
    "skill-layers-loaded": [0, 1, 2],
    ...extra,
  };
}

/** The ACP core protocol's example request, addressed to agent-beta. */
export function exampleRequest(id = "req-7f3a-4b2c-9d1e") {
  return {
    jsonrpc: "2.0",
    method: "agent.request",
    params: {
      headers: headers("agent-alpha", "principal-a", "request", { "recipient-id": "agent-beta" }),
      body: {
        action: "get-availability",
        parameters: { date_range: "2026-02-17/2026-02-21", duration_minutes: 60 },
      },
    },
    id,
  };
}

/** The ACP core protocol's example response. */
export function exampleResponse(id = "req-7f3a-4b2c-9d1e") {
  return {
    jsonrpc: "2.0",
    result: {
      headers: headers("agent-beta", "principal-b", "response", { "recipient-id": "agent-alpha" }),
      body: { available_slots: ["2026-02-18T10:00:00Z", "2026-02-19T14:00:00Z", "2026-02-20T09:00:00Z"] },
    },
    id,
  };
}

/** Writes `count` sent requests, each at the clock's time; the clock is left where the caller set it. */
export async function appendRequests(log: AuditLog, count: number, firstId = 1): Promise<AuditEntry[]> {
  const written: AuditEntry[] = [];
  for (let i = 0; i < count; i++) {
    written.push(
      await log.append(
        auditEntryFor(exampleRequest(`req-${firstId + i}`), {
          direction: "sent",
          channel: "nats:agent.agent-beta.inbox",
          peer: { principal: "principal-b" },
        }),
      ),
    );
  }
  return written;
}

/** agent-alpha's log with 3 entries in 2026-01, 3 in 2026-02 and 3 in 2026-03. */
export async function threeMonthLog(root: string): Promise<string> {
  const clock = manualClock("2026-01-10T09:00:00Z");
  const log = await AuditLog.open({ agent: "agent-alpha", root, clock: clock.now });
  await appendRequests(log, 3, 1);
  clock.set("2026-02-10T09:00:00Z");
  await appendRequests(log, 3, 4);
  clock.set("2026-03-10T09:00:00Z");
  await appendRequests(log, 3, 7);
  await log.close();
  return join(root, "agent-alpha");
}

export function readLinesOf(path: string): string[] {
  return readFileSync(path, "utf8").split("\n").slice(0, -1);
}

export function writeLinesTo(path: string, lines: string[]): void {
  writeFileSync(path, lines.map((line) => `${line}\n`).join(""));
}
