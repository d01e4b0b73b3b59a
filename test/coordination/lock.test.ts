import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { CoordinationError, FileLock, Session, withFileLock } from "../../src/coordination/index.js";
import { inspectLock, staleReason } from "../../src/coordination/lock.js";
import { useTmpDir } from "../helpers/tmp.js";

/** The pid of a process that has certainly exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], {
    encoding: "utf8",
  });
  return Number(child.stdout);
}

const LIBRARY = fileURLToPath(new URL("../../dist/coordination/index.js", import.meta.url));

function owner(pid: number, host: string, ageMs: number): string {
  return JSON.stringify({
    pid,
    host,
    time: new Date(Date.now() - ageMs).toISOString(),
    token: "left-behind",
  });
}

describe("the coordination.json lock", () => {
  const tmp = useTmpDir();

  it("records its owner (pid, host, time) while held and removes itself on release", async () => {
    const path = join(tmp(), "x.lock");
    await withFileLock(path, async (lock) => {
      const recorded = JSON.parse(readFileSync(path, "utf8"));
      expect(recorded).toMatchObject({ pid: process.pid, host: hostname(), token: lock.owner.token });
      expect(Date.parse(recorded.time)).not.toBeNaN();
      expect(await lock.stillHeld()).toBe(true);
    });
    expect(existsSync(path)).toBe(false);
  });

  it("lets only one holder in at a time", async () => {
    const path = join(tmp(), "x.lock");
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 20 }, () =>
        withFileLock(path, async () => {
          inside++;
          most = Math.max(most, inside);
          await new Promise((r) => setTimeout(r, 2));
          inside--;
        }),
      ),
    );
    expect(most).toBe(1);
  });

  it("recovers a lock whose owner process is dead on this host, and the update then lands", async () => {
    const session = await Session.create({ root: tmp() });
    writeFileSync(session.paths.lock, owner(deadPid(), hostname(), 0));
    const state = await inspectLock(session.paths.lock);
    expect(staleReason(state!, 30_000)).toMatch(/is not running/);
    await session.updateAgent("a", { status: "in_progress" });
    expect((await session.agent("a")).status).toBe("in_progress");
    expect(existsSync(session.paths.lock)).toBe(false);
  });

  it("recovers the lock of a real process killed (SIGKILL) while holding it", async () => {
    const session = await Session.create({ root: tmp() });
    const holder = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const m = await import(${JSON.stringify(LIBRARY)});
        await m.FileLock.acquire(${JSON.stringify(session.paths.lock)});
        process.stdout.write("held\\n");
        setInterval(() => {}, 1000);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    await once(holder.stdout, "data");
    expect(JSON.parse(readFileSync(session.paths.lock, "utf8")).pid).toBe(holder.pid);
    holder.kill("SIGKILL");
    await once(holder, "close");
    await session.updateAgent("a", { progress: "after the crash" });
    expect((await session.agent("a")).progress).toBe("after the crash");
  });

  it("recovers a lock held by another host longer than the stale timeout", async () => {
    const session = await Session.create({ root: tmp(), lock: { staleMs: 60_000 } });
    writeFileSync(session.paths.lock, owner(1, "some-other-host", 120_000));
    await session.updateAgent("a", { progress: "after recovery" });
    expect((await session.agent("a")).progress).toBe("after recovery");
  });

  it("recovers a lock file whose owner never got to write its name (crash right after create)", async () => {
    const session = await Session.create({ root: tmp() });
    writeFileSync(session.paths.lock, "");
    const old = new Date(Date.now() - 60_000);
    utimesSync(session.paths.lock, old, old);
    await session.updateAgent("a", { progress: "ok" });
    expect((await session.agent("a")).progress).toBe("ok");
  });

  it("waits for a live owner and gives up naming it, without breaking its lock", async () => {
    const session = await Session.create({ root: tmp(), lock: { timeoutMs: 200 } });
    // This very test process is alive, and the lock is fresh: not stale.
    writeFileSync(session.paths.lock, owner(process.pid, hostname(), 0));
    const attempt = session.updateAgent("a", { progress: "blocked" });
    await expect(attempt).rejects.toThrow(CoordinationError);
    await expect(attempt).rejects.toThrow(new RegExp(`still locked by pid ${process.pid} on ${hostname()}`));
    expect(JSON.parse(readFileSync(session.paths.lock, "utf8")).token).toBe("left-behind");
    expect((await session.readCoordination()).agents["a"]).toBeUndefined();
  });

  it("an unwritten lock file is not stale while it is fresh", async () => {
    const path = join(tmp(), "x.lock");
    writeFileSync(path, "");
    expect(staleReason((await inspectLock(path))!, 30_000)).toBeUndefined();
  });

  it("does not write when its own lock was broken while held", async () => {
    const session = await Session.create({ root: tmp() });
    const attempt = session.update((c) => {
      // Simulate another process judging us stale and taking over the lock mid-update.
      writeFileSync(session.paths.lock, owner(process.pid, hostname(), 0));
      c.project_type = "should not land";
    });
    await expect(attempt).rejects.toThrow(/lock was broken/);
    expect((await session.readCoordination()).project_type).toBeUndefined();
    // The usurper's lock is left alone.
    expect(JSON.parse(readFileSync(session.paths.lock, "utf8")).token).toBe("left-behind");
  });

  it("reports a missing session directory rather than waiting", async () => {
    await expect(FileLock.acquire(join(tmp(), "gone", "x.lock"))).rejects.toThrow(
      /session directory does not exist/,
    );
  });
});
