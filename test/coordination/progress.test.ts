import { describe, expect, it } from "vitest";
import { ProgressDisplay, type Transition } from "../../src/coordination/index.js";

function output(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, stream: { isTTY, columns: 60, write: (text: string) => writes.push(text) } };
}

const transition = (agent: string, status: Transition["status"], detail?: string): Transition => ({
  agent,
  status,
  attempt: 1,
  maxAttempts: 2,
  elapsedMs: 1234,
  ...(detail !== undefined && { detail }),
});

describe("the coordinator's progress display", () => {
  it("prints one line per transition when not on a terminal", () => {
    const { writes, stream } = output(false);
    const display = new ProgressDisplay(stream, ["scan", "build"]);
    display.start();
    display.transition(transition("scan", "in_progress", "attempt 1 of 2"));
    display.progress("scan", "50% done"); // progress text is for terminals only
    display.transition(transition("scan", "failed", "exited with code 3"));
    display.stop();
    expect(writes).toEqual([
      "[+1.2s] scan: in_progress (attempt 1 of 2)\n",
      "[+1.2s] scan: failed (exited with code 3)\n",
    ]);
  });

  it("redraws a block of one status line per agent on a terminal", () => {
    const { writes, stream } = output(true);
    const display = new ProgressDisplay(stream, ["scan", "build"]);
    display.start();
    display.transition(transition("scan", "in_progress"));
    display.progress("scan", "analysing queries…");
    display.stop();
    const first = writes[0]!;
    expect(first).not.toContain("\x1b[2F");
    expect(first.split("\n").filter(Boolean)).toHaveLength(2);
    const last = writes.at(-1)!;
    // Moves back up over the two lines drawn before, then clears and redraws each.
    expect(last.startsWith("\x1b[2F\x1b[2K")).toBe(true);
    const lines = last.slice("\x1b[2F".length).split("\n").filter(Boolean);
    const CLEAR = "\x1b[2K";
    expect(lines.every((l) => l.startsWith(CLEAR))).toBe(true);
    expect(lines[0]?.slice(CLEAR.length)).toMatch(/^▶ scan {3}in_progress 1\/2 +\d+s {2}analysing queries…$/);
    expect(lines[1]?.slice(CLEAR.length)).toMatch(/^· build {2}waiting/);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual("\x1b[2K".length + 59);
  });
});
