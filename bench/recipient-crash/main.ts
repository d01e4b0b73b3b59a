/**
 * Recipient crashes: how often a handler runs twice when its process is killed (`kill -9`) at a
 * random moment, with the SDK's default ledger and with a transactional HandledStore.
 *
 *   npm run bench -- recipient-crash                          # 100 kills of each recipient
 *   CRASH_KILLS=300 CRASH_RECIPIENT=ledger npm run bench -- recipient-crash
 *
 * Each recipient is a separate node process running an AcpAgent whose handler writes one effect per
 * numbered notification; it is killed within CRASH_MAX_DELAY_MS (default 200) of connecting, again
 * and again, while a sender streams CRASH_RATE (default 300) notifications a second through a real
 * gateway (embedded broker). See harness.ts for how duplicates are counted. First, what one durable
 * handled record costs (records.ts), the measurement behind the ledger's file format.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CrashFigures, type RecipientKind, runRecipientCrashes, startCrashGateway } from "./harness.js";
import { measureRecordCosts } from "./records.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The SDK and gateway compiled alongside this benchmark (.bench-build/src), so never stale. */
const CLIENT_MODULE = join(here, "../../src/client/index.js");
const SERVER_MODULE = join(here, "../../src/server.js");
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const KILLS = env("CRASH_KILLS", 100);
const MAX_DELAY_MS = env("CRASH_MAX_DELAY_MS", 200);
const RATE = env("CRASH_RATE", 300);
const KINDS: RecipientKind[] =
  process.env.CRASH_RECIPIENT === "ledger" || process.env.CRASH_RECIPIENT === "store"
    ? [process.env.CRASH_RECIPIENT]
    : ["ledger", "store"];

const percent = (part: number, whole: number) => `${((100 * part) / Math.max(1, whole)).toFixed(1)} %`;

async function main(): Promise<void> {
  console.log("what one durable handled record costs (before the ack), by records in flight:");
  console.log("| store | records in flight | µs per record |");
  console.log("| --- | --- | --- |");
  for (const cost of await measureRecordCosts(env("CRASH_RECORDS", 2_000), [1, 8, 64])) {
    console.log(`| ${cost.store} | ${cost.inFlight} | ${cost.microsPerRecord} |`);
  }
  console.log("");
  console.log(
    `recipient-crash: ${KILLS} kill -9s of each recipient, each within ${MAX_DELAY_MS} ms of connecting, ${RATE} notifications/s`,
  );
  const results: CrashFigures[] = [];
  for (const recipient of KINDS) {
    const dir = mkdtempSync(join(tmpdir(), `acp-crash-${recipient}-`));
    const gateway = await startCrashGateway(SERVER_MODULE, join(dir, "gateway"), ADMIN_TOKEN);
    try {
      results.push(
        await runRecipientCrashes({
          gateway: gateway.url,
          adminToken: ADMIN_TOKEN,
          clientModule: CLIENT_MODULE,
          dir,
          recipient,
          kills: KILLS,
          maxKillDelayMs: MAX_DELAY_MS,
          rate: RATE,
          progress: (text) => console.log(`  ${recipient}: ${text}`),
        }),
      );
    } finally {
      await gateway.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log("");
  console.log(
    "| recipient | kills | notifications | handler ran twice | kills followed by a duplicate | missing | time |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- |");
  for (const r of results) {
    const name =
      r.recipient === "ledger" ? "default ledger (handled.log)" : "SqliteHandledStore, same transaction";
    console.log(
      `| ${name} | ${r.kills} | ${r.sent} | ${r.duplicates} | ${r.killsWithDuplicate} (${percent(r.killsWithDuplicate, r.kills)}) | ${r.missing} | ${(r.durationMs / 1000).toFixed(0)} s |`,
    );
  }
  if (results.some((r) => r.missing > 0)) process.exitCode = 1;
}

await main();
