import { describe, expect, it } from "vitest";
import { retryOnPortClash } from "./ports.js";

describe("retryOnPortClash (test servers on ports picked free)", () => {
  it("starts again after a port was taken, up to three attempts in all", async () => {
    let attempts = 0;
    const started = await retryOnPortClash(async () => {
      attempts++;
      if (attempts < 3)
        throw new Error(`listen tcp 127.0.0.1:${40_000 + attempts}: bind: address already in use`);
      return "ready";
    });
    expect([started, attempts]).toEqual(["ready", 3]);

    attempts = 0;
    await expect(
      retryOnPortClash(async () => {
        attempts++;
        throw new Error("bind: address already in use");
      }),
    ).rejects.toThrow("address already in use");
    expect(attempts).toBe(3);
  });

  it("gives any other failure at once", async () => {
    let attempts = 0;
    await expect(
      retryOnPortClash(async () => {
        attempts++;
        throw new Error("nats-server did not become ready");
      }),
    ).rejects.toThrow("did not become ready");
    expect(attempts).toBe(1);
  });
});
