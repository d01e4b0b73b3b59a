/**
 * Audit log throughput: appends (with and without fdatasync), verification and reading, beside the
 * raw limit of writing the same lines to an O_APPEND descriptor with no hashing or validation.
 * The issue names no peer for the audit log, so the raw write is the reference.
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuditLog, auditEntryFor, readAudit, verifyAudit } from "../../src/audit/index.js";

const message = {
  jsonrpc: "2.0",
  method: "agent.request",
  params: {
    headers: {
      "agent-id": "agent-alpha",
      "principal-id": "principal-a",
      timestamp: "2026-02-14T14:30:00Z",
      "message-type": "request",
      "trust-layer-version": "1.0.0",
      "skill-layers-loaded": [0, 1, 2, 3],
      "message-id": "550e8400-e29b-41d4-a716-446655440000",
      "recipient-id": "agent-beta",
    },
    body: {
      action: "get-availability",
      parameters: { date_range: "2026-02-17/2026-02-21", duration_minutes: 60 },
    },
  },
  id: "req-7f3a-4b2c-9d1e",
};
const input = auditEntryFor(message, {
  direction: "sent",
  channel: "nats:agent.agent-beta.inbox",
  peer: { principal: "principal-b" },
});

const N = 20_000;
const N_FSYNC = 500;
/** Appends one by one to a shared log: each takes the lock and reads the head again. */
const N_SHARED = 2_000;
const root = mkdtempSync(join(tmpdir(), "acp-bench-audit-"));
const rows: [string, number, number][] = [];

function record(name: string, count: number, ms: number): number {
  const rate = count / (ms / 1000);
  rows.push([name, count, rate]);
  return rate;
}

try {
  // Raw limit: the same line bytes, one writeSync each, no hashing/validation.
  const line = Buffer.from(
    `${JSON.stringify({ seq: 1, ts: new Date().toISOString(), ...input, prev: "0".repeat(64), hash: "0".repeat(64) })}\n`,
  );
  const rawFd = openSync(join(root, "raw.jsonl"), "a");
  let start = performance.now();
  for (let i = 0; i < N; i++) writeSync(rawFd, line);
  const raw = record("raw O_APPEND write (limit)", N, performance.now() - start);
  closeSync(rawFd);

  const log = await AuditLog.open({ agent: "agent-alpha", root });
  start = performance.now();
  for (let i = 0; i < N; i++) await log.append(input);
  const sequential = record("AuditLog.append, awaited one by one", N, performance.now() - start);
  start = performance.now();
  await Promise.all(Array.from({ length: N }, () => log.append(input)));
  const concurrent = record("AuditLog.append, all queued at once", N, performance.now() - start);
  await log.close();

  // Shared writers (the SDK's mode: several processes of one agent): the lock and the chain's head
  // are taken again for each batch of appends.
  const shared = await AuditLog.open({ agent: "agent-shared", root, writers: "shared" });
  start = performance.now();
  for (let i = 0; i < N_SHARED; i++) await shared.append(input);
  const sharedSequential = record("shared writers, awaited one by one", N_SHARED, performance.now() - start);
  start = performance.now();
  await Promise.all(Array.from({ length: N }, () => shared.append(input)));
  const sharedConcurrent = record("shared writers, all queued at once", N, performance.now() - start);
  await shared.close();

  const synced = await AuditLog.open({ agent: "agent-synced", root, fsync: true });
  start = performance.now();
  for (let i = 0; i < N_FSYNC; i++) await synced.append(input);
  record("AuditLog.append with fsync", N_FSYNC, performance.now() - start);
  await synced.close();

  start = performance.now();
  const verification = await verifyAudit(join(root, "agent-alpha"));
  if (!verification.ok) throw new Error("benchmark log failed verification");
  record("verifyAudit (entries/s)", verification.entries, performance.now() - start);

  start = performance.now();
  let read = 0;
  for await (const _ of readAudit({ root, agent: "agent-alpha" })) read++;
  record("readAudit (entries/s)", read, performance.now() - start);

  console.log(`${"operation".padEnd(40)} ${"count".padStart(8)} ${"per second".padStart(12)}`);
  for (const [name, count, rate] of rows) {
    console.log(
      `${name.padEnd(40)} ${String(count).padStart(8)} ${Math.round(rate).toLocaleString("en").padStart(12)}`,
    );
  }
  console.log(
    `\nappend vs raw write: ${((sequential / raw) * 100).toFixed(1)}% one by one, ${((concurrent / raw) * 100).toFixed(1)}% queued`,
  );
  console.log(
    `shared writers vs single: ${((sharedSequential / sequential) * 100).toFixed(1)}% one by one, ${((sharedConcurrent / concurrent) * 100).toFixed(1)}% queued`,
  );
  console.log(`entry size: ${line.length} bytes`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
