import { describe, expect, it } from "vitest";
import { SerialByKey } from "../../src/broker/serial-by-key.js";

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe("SerialByKey", () => {
  it("runs one key's work in queue order, other keys alongside, and goes on after a failure", async () => {
    const lanes = new SerialByKey();
    const events: string[] = [];
    const first = gate();
    const a1 = lanes.run("a", async () => {
      events.push("a1 start");
      await first.opened;
      events.push("a1 end");
      throw new Error("a1 failed");
    });
    const a2 = lanes.run("a", async () => {
      events.push("a2");
      return 2;
    });
    const b1 = lanes.run("b", async () => {
      events.push("b1");
      return "b";
    });
    // Work starts synchronously when its key is idle: a1 and b1 already began, a2 waits for a1.
    expect(events).toEqual(["a1 start", "b1"]);
    await expect(b1).resolves.toBe("b");
    expect(events).not.toContain("a2");
    first.open();
    await expect(a1).rejects.toThrow("a1 failed");
    await expect(a2).resolves.toBe(2);
    expect(events).toEqual(["a1 start", "b1", "a1 end", "a2"]);
  });
});
