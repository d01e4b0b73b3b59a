import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "vitest";
import { AuditLog } from "../../src/audit/index.js";
import { openBroker } from "../../src/broker/index.js";
import { LiveFeed } from "../../src/dashboard/feed.js";
import { FeedHistory, parseFeedQuery } from "../../src/dashboard/history.js";
import { Scope } from "../../src/dashboard/viewer.js";

it("measure", async () => {
  const dir = mkdtempSync(join(tmpdir(), "acp-measure-"));
  const root = join(dir, "relay-audit");
  const agents = Array.from({ length: 20 }, (_, i) => `agent-${i}`);
  for (const agent of agents) {
    const log = await AuditLog.open({ root, agent });
    for (let n = 0; n < 1000; n++) {
      void log.append({ direction: "sent", from: { agent, principal: "p" }, to: { agent: agents[(n % 19) + 1 === 20 ? 0 : (n % 19) + 1]!, principal: "q" }, type: "request", method: "agent.request", id: `${agent}-${n}`, summary: `${agent} requested something number ${n}.`, channel: "x" });
    }
    await log.close();
  }
  const broker = await openBroker({ data: dir });
  const live = new LiveFeed(broker, {} as never, () => undefined);
  const history = new FeedHistory(broker, live, root);
  const admin = { isAdmin: true, seesExchange: () => true } as unknown as Scope;
  const mine = { isAdmin: false, seesExchange: (a: string, b: string) => a === "agent-3" || b === "agent-3" } as unknown as Scope;
  for (const [name, scope] of [["admin", admin], ["one principal", mine]] as const) {
    const t0 = performance.now();
    const items = await history.query(scope, parseFeedQuery(new URL("http://x/feed?limit=100")));
    const t1 = performance.now();
    const volume = await history.volume(scope, parseFeedQuery(new URL("http://x/volume")));
    const t2 = performance.now();
    console.log(`${name}: feed ${items.length} items in ${(t1 - t0).toFixed(0)} ms; volume ${volume.buckets.length} buckets in ${(t2 - t1).toFixed(0)} ms`);
  }
  await broker.close();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);
