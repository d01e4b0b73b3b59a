import { describe, expect, it } from "vitest";
import { createServer } from "node:net";
import { ephemeralPortFloor, freePort, retryOnPortClash } from "./ports.js";

/** A start that fails with `message` until its attempt number `succeedsAt` (never, if undefined). */
function failingStart(message: string, succeedsAt?: number) {
  const counter = { attempts: 0 };
  const start = async () => {
    counter.attempts++;
    if (counter.attempts !== succeedsAt) throw new Error(message);
    return "ready";
  };
  return { start, counter };
}

const PORT_TAKEN = "listen tcp 127.0.0.1:40001: bind: address already in use";

describe("retryOnPortClash (test servers on ports picked free)", () => {
  it("starts again after a port was taken, up to three attempts in all", async () => {
    const third = failingStart(PORT_TAKEN, 3);
    expect(await retryOnPortClash(third.start)).toBe("ready");
    expect(third.counter.attempts).toBe(3);

    const never = failingStart(PORT_TAKEN);
    await expect(retryOnPortClash(never.start)).rejects.toThrow("address already in use");
    expect(never.counter.attempts).toBe(3);
  });

  it("gives any other failure at once", async () => {
    const other = failingStart("nats-server did not become ready", 2);
    await expect(retryOnPortClash(other.start)).rejects.toThrow("did not become ready");
    expect(other.counter.attempts).toBe(1);
  });
});

describe("freePort", () => {
  it("picks ports below the ephemeral range (never an outgoing connection's source port) that bind", async () => {
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(ephemeralPortFloor());
    }
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(ports[0], "127.0.0.1", resolve);
    });
    await new Promise((resolve) => server.close(resolve));
  });
});
