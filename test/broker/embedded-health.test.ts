/**
 * The embedded broker's health() after a real failed write: the child's RLIMIT_FSIZE is lowered to
 * 1 byte with `prlimit --pid` (to SQLite a failed write, as on a full disk; see
 * test/reliability/storage.test.ts), then lifted again.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { BrokerHealth } from "../../src/broker/index.js";
import { WriteFailures } from "../../src/broker/write-failures.js";
import { needing, setLimit } from "../helpers/process-limits.js";
import { useTmpDir } from "../helpers/tmp.js";

const HEALTH_CHILD = fileURLToPath(new URL("./fixtures/health-child.mjs", import.meta.url));
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** The fixture child: one command per line, one JSON answer per line, in order. */
function startChild(data: string): { child: ChildProcess; ask(command: string): Promise<unknown> } {
  const child = spawn(process.execPath, [HEALTH_CHILD, data], { stdio: ["pipe", "pipe", "inherit"] });
  const answers = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return {
    child,
    async ask(command) {
      child.stdin!.write(`${command}\n`);
      const answer = await answers.next();
      if (answer.done) throw new Error(`the child exited before answering ${command}`);
      return JSON.parse(answer.value) as unknown;
    },
  };
}

describe("WriteFailures", () => {
  it("keeps the start of a run of failures until a write succeeds", () => {
    const failures = new WriteFailures();
    expect(failures.current(0)).toBeUndefined();
    failures.failed("write failed: disk full (SQLITE_FULL)", 1_000);
    failures.failed("write failed: disk I/O error (SQLITE_IOERR_WRITE)", 5_000);
    expect(failures.current(1e12)).toEqual({
      cause: "write failed: disk I/O error (SQLITE_IOERR_WRITE)",
      since: 1_000,
    });
    failures.succeeded();
    expect(failures.current(6_000)).toBeUndefined();
    failures.failed("write failed: disk full (SQLITE_FULL)", 7_000);
    expect(failures.current(7_000)?.since).toBe(7_000);
  });

  it("forgets a run that long after its last failure, when told to", () => {
    const failures = new WriteFailures(30_000);
    failures.failed("refused", 1_000);
    failures.failed("refused", 20_000);
    expect(failures.current(49_999)).toEqual({ cause: "refused", since: 1_000 });
    expect(failures.current(50_000)).toBeUndefined();
    failures.failed("refused again", 60_000);
    expect(failures.current(60_000)).toEqual({ cause: "refused again", since: 60_000 });
  });
});

needing("prlimit").describe("embedded broker health on a full disk", () => {
  const tmp = useTmpDir("acp-broker-health-");
  let child: ChildProcess | undefined;
  afterEach(() => {
    child?.kill("SIGKILL");
    child = undefined;
  });

  it("is degraded from the first failed write, names the cause, and recovers by itself", async () => {
    const data = tmp();
    const started = startChild(data);
    child = started.child;
    const { ask } = started;
    const pid = started.child.pid as number;

    expect(await ask("health")).toEqual({
      ok: true,
      detail: { storage: "sqlite" },
    });
    expect(await ask("submit")).toHaveProperty("submitted");

    setLimit(pid, "fsize", "1");
    expect(await ask("submit")).toEqual({ error: "unavailable" });
    const degraded = (await ask("health")) as BrokerHealth;
    expect(degraded).toEqual({
      ok: false,
      detail: {
        storage: "write failed: disk I/O error (SQLITE_IOERR_WRITE)",
        since: expect.stringMatching(ISO_TIME),
      },
    });
    // Its own probe write fails too: still degraded, and since the first failure.
    expect(await ask("health")).toEqual(degraded);

    // No message written meanwhile: the next check's probe write succeeds and ends it.
    setLimit(pid, "fsize", "unlimited");
    expect(await ask("health")).toMatchObject({
      ok: true,
      detail: { storage: "sqlite" },
    });

    // A real write that succeeds ends it as well; a new failure starts a new run.
    setLimit(pid, "fsize", "1");
    expect(await ask("submit")).toEqual({ error: "unavailable" });
    expect(await ask("health")).toMatchObject({ ok: false, detail: { storage: degraded.detail.storage } });
    setLimit(pid, "fsize", "unlimited");
    expect(await ask("submit")).toHaveProperty("submitted");
    expect(await ask("health")).toMatchObject({ ok: true });
  }, 30_000);
});
