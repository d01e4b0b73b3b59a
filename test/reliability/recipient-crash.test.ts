/**
 * A recipient process killed (`kill -9`) at 100 random moments while a sender streams numbered
 * notifications through a real gateway, restarted on the same state each time. Its handler writes
 * each notification's effect and `markHandled` in one SQLite transaction (SqliteHandledStore): every
 * notification's effect exists exactly once. The default ledger's duplicate rate is measured by
 * `npm run bench -- recipient-crash` (docs/sdk.md), not asserted: it is a property of the timing.
 */
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import {
  type CrashGateway,
  runRecipientCrashes,
  startCrashGateway,
} from "../../bench/recipient-crash/harness.js";
import { ADMIN_TOKEN } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { recordFigures } from "./support/figures.js";

const dist = (path: string) => fileURLToPath(new URL(`../../dist/${path}`, import.meta.url));
const KILLS = Number(process.env.ACP_RELIABILITY_RECIPIENT_KILLS ?? 100);

const tmp = useTmpDir("acp-rel-crash-");
let gateway: CrashGateway | undefined;
afterEach(async () => {
  await gateway?.stop();
});

it(`a handler recording its message in its own transaction runs exactly once through ${KILLS} kill -9s of its process`, async () => {
  const dir = tmp();
  gateway = await startCrashGateway(dist("server.js"), `${dir}/gateway`, ADMIN_TOKEN);
  const figures = await runRecipientCrashes({
    gateway: gateway.url,
    adminToken: ADMIN_TOKEN,
    clientModule: dist("client/index.js"),
    dir,
    recipient: "store",
    kills: KILLS,
    rate: 100,
  });
  recordFigures("recipient-crash-store", { ...figures });
  expect(figures.sent).toBeGreaterThan(KILLS);
  expect(figures.duplicates).toBe(0);
  expect(figures.missing).toBe(0);
}, 420_000);
