import { describe, expect, it } from "vitest";
import type { VoteRule } from "../../src/collab/index.js";
import { type Ballot, ballotsHash, tallyVote } from "../../src/collab/index.js";

const electorate = ["a", "b", "c", "d"];
const ballots = (...options: string[]): Ballot[] =>
  options.map((option, i) => ({
    voteId: "vote-0001",
    voter: electorate[i] as string,
    option,
    messageId: `message-${i}-0000`,
    at: "2026-02-14T12:00:00Z",
    envelope: { signature: `sig-${i}..x` },
  }));
const tally = (rule: VoteRule, cast: Ballot[]) =>
  tallyVote({ options: ["yes", "no"], electorate, rule }, cast);

describe("vote rules", () => {
  it("quorum: no quorum below the share of the electorate, then a majority of ballots decides", () => {
    expect(tally({ type: "quorum", quorum: 0.75 }, ballots("yes", "yes"))).toMatchObject({
      outcome: "no-quorum",
      winner: null,
    });
    expect(tally({ type: "quorum", quorum: 0.75 }, ballots("yes", "yes", "no"))).toMatchObject({
      outcome: "decided",
      winner: "yes",
    });
    expect(tally({ type: "quorum" }, ballots("yes", "no"))).toMatchObject({
      outcome: "undecided",
      tally: { yes: 1, no: 1 },
    });
  });

  it("majority needs more than half the ballots; a tie or nothing decides nothing", () => {
    expect(tally({ type: "majority" }, ballots("no", "no", "yes"))).toMatchObject({
      outcome: "decided",
      winner: "no",
    });
    expect(tally({ type: "majority" }, ballots("no", "yes"))).toMatchObject({ outcome: "undecided" });
    expect(tally({ type: "majority" }, [])).toMatchObject({
      outcome: "undecided",
      reason: "nobody voted",
      cast: 0,
    });
  });

  it("supermajority uses its threshold (default two thirds) inclusively", () => {
    expect(tally({ type: "supermajority" }, ballots("yes", "yes", "no"))).toMatchObject({
      outcome: "decided",
    });
    expect(tally({ type: "supermajority", threshold: 0.75 }, ballots("yes", "yes", "no"))).toMatchObject({
      outcome: "undecided",
    });
    expect(
      tally({ type: "supermajority", threshold: 0.75 }, ballots("yes", "yes", "yes", "no")),
    ).toMatchObject({ outcome: "decided" });
  });

  it("unanimity needs the whole electorate, voting as one", () => {
    expect(tally({ type: "unanimity" }, ballots("yes", "yes", "yes"))).toMatchObject({
      outcome: "undecided",
      reason: "1 member(s) of the electorate did not vote",
    });
    expect(tally({ type: "unanimity" }, ballots("yes", "yes", "yes", "no"))).toMatchObject({
      outcome: "undecided",
    });
    expect(tally({ type: "unanimity" }, ballots("yes", "yes", "yes", "yes"))).toMatchObject({
      outcome: "decided",
      winner: "yes",
    });
  });

  it("counts only the electorate's ballots for listed options, and pins them in the ballots hash", () => {
    const outsider: Ballot = { ...ballots("yes")[0]!, voter: "zed" };
    const counted = tally({ type: "majority" }, [...ballots("no"), outsider]);
    expect(counted).toMatchObject({ cast: 1, tally: { yes: 0, no: 1 } });
    expect(counted.ballotsHash).toBe(ballotsHash(ballots("no")));
    expect(ballotsHash(ballots("no"))).not.toBe(ballotsHash(ballots("yes")));
  });
});
