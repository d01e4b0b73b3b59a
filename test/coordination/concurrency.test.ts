import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { WRITER_FIXTURE } from "./helpers.js";

const PROCESSES = 8;
const EVENTS_EACH = 1000;
const UPDATES_EACH = 100;

function runWriter(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER_FIXTURE, ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

describe("many OS processes writing one session at once", () => {
  const tmp = useTmpDir();

  it(`keeps every update and every event exactly once (${PROCESSES} processes)`, {
    timeout: 180_000,
  }, async () => {
    const root = tmp();
    const session = await Session.create({ root });
    const agents = Array.from({ length: PROCESSES }, (_, k) => `writer-${k + 1}`);
    const results = await Promise.all(
      agents.map((agent) => runWriter([root, session.id, agent, String(EVENTS_EACH), String(UPDATES_EACH)])),
    );
    for (const result of results) expect(result, result.stderr).toMatchObject({ code: 0 });

    // Every update landed: each agent's progress lists 1..UPDATES_EACH once, in order.
    const coordination = await session.readCoordination();
    const expectedProgress = Array.from({ length: UPDATES_EACH }, (_, i) => String(i + 1)).join(",");
    expect(Object.keys(coordination.agents).sort()).toEqual([...agents].sort());
    for (const agent of agents) expect(coordination.agents[agent]?.progress).toBe(expectedProgress);

    // Every event landed whole, once: no problems, no duplicates, none missing.
    const { events, problems } = await session.readEvents();
    expect(problems).toEqual([]);
    expect(events).toHaveLength(PROCESSES * EVENTS_EACH);
    const seen = new Set(events.map(({ event }) => event.message));
    expect(seen.size).toBe(PROCESSES * EVENTS_EACH);
    for (const agent of agents) {
      const own = events.filter(({ event }) => event.from === agent).map(({ event }) => event.message);
      // One writer's own events keep their order.
      expect(own).toEqual(Array.from({ length: EVENTS_EACH }, (_, i) => `${agent} event ${i + 1}`));
    }
  });
});
