import { describe, expect, it } from "vitest";
import { nextStepSize, type StepPacing } from "../../src/broker/nats/max-age.js";

const pacing: StepPacing = { firstStep: 100, minStep: 10, maxStep: 10_000, stepMs: 40, restPerStep: 1 };

describe("the pacing of a max_age lowering's steps", () => {
  it("shrinks a step that took longer than meant, in proportion", () => {
    // 100 messages in 400 ms (1,000 consumers on a busy server): the next step is meant to take 40 ms.
    expect(nextStepSize(pacing, 100, 400)).toBe(10);
    expect(nextStepSize(pacing, 1_000, 80)).toBe(500);
  });

  it("grows a step that was quicker than meant, at most doubling it", () => {
    expect(nextStepSize(pacing, 100, 30)).toBe(133);
    expect(nextStepSize(pacing, 100, 1)).toBe(200);
    expect(nextStepSize(pacing, 100, 0)).toBe(200);
  });

  it("keeps a step within its bounds", () => {
    expect(nextStepSize(pacing, 10, 60_000)).toBe(10);
    expect(nextStepSize(pacing, 8_000, 1)).toBe(10_000);
  });
});
