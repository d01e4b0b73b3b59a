/**
 * One of the 8 concurrent processes of bench/coordination: opens the session, says it is ready,
 * waits for "go", then appends events or makes locked read-modify-write updates of its own agent
 * as fast as it can, and reports when it started and finished (absolute milliseconds).
 */
import { Session } from "../../src/coordination/index.js";

const [mode, root, id, agent, countText] = process.argv.slice(2);
if (mode === undefined || root === undefined || id === undefined || agent === undefined) {
  throw new Error("usage: worker.js events|updates ROOT SESSION AGENT COUNT");
}
const count = Number(countText);
const session = await Session.open({ root, id, lock: { timeoutMs: 300_000 } });
const now = () => performance.timeOrigin + performance.now();

process.once("message", async () => {
  const start = now();
  for (let i = 1; i <= count; i++) {
    if (mode === "events") {
      await session.log({ from: agent, type: "status", message: `${agent} event ${i}` });
    } else {
      await session.update((c) => {
        const entry = c.agents[agent] as { count?: number } | undefined;
        if (entry) entry.count = (entry.count ?? 0) + 1;
      });
    }
  }
  process.send?.({ start, end: now() }, () => process.exit(0));
});
process.send?.("ready");
