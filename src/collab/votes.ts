import type { AcpMessage, KeyResolver } from "../protocol/index.js";
import { AcpError, verifyMessageSignature } from "../protocol/index.js";
import type { VoteResult, VoteRule } from "./messages.js";
import { canonicalHash } from "./util.js";

/**
 * Structured voting: options, an electorate, a period and a rule. One ballot per voter, which the
 * voter may change until the period ends; each ballot is a message the voter signed, so anyone
 * holding the ballots and the voters' public keys can recount (`recount`) and compare with the
 * announced result, whose `ballotsHash` pins exactly which ballots were counted.
 */
export interface Vote {
  voteId: string;
  teamId: string;
  channel: string;
  question: string;
  options: string[];
  electorate: string[];
  rule: VoteRule;
  createdBy: string;
  createdAt: string;
  closesAt: string;
  /** Set once a member announced the result to the channel. */
  announced?: { by: string; at: string; postId: string; result: VoteResult };
}

export interface Ballot {
  voteId: string;
  voter: string;
  option: string;
  messageId: string;
  at: string;
  /** The voter's signed `agent.vote.ballot`. */
  envelope: Record<string, unknown>;
}

export const VOTE_KEY = (voteId: string) => `v.${voteId}`;
export const BALLOTS_PREFIX = (voteId: string) => `b.${voteId}.`;
export const BALLOT_KEY = (voteId: string, voter: string) => `b.${voteId}.${voter}`;

export function isClosed(vote: Vote, now: Date): boolean {
  return now.getTime() >= Date.parse(vote.closesAt);
}

/** The hash over the counted ballots: who voted what, in which signed message. */
export function ballotsHash(ballots: Ballot[]): string {
  return canonicalHash(
    [...ballots]
      .sort((a, b) => a.voter.localeCompare(b.voter))
      .map((b) => ({
        voter: b.voter,
        option: b.option,
        messageId: b.messageId,
        signature: (b.envelope as { signature?: string }).signature ?? null,
      })),
  );
}

/** Applies the rule to the ballots of the electorate (others are ignored). */
export function tallyVote(
  vote: Pick<Vote, "options" | "electorate" | "rule">,
  ballots: Ballot[],
): VoteResult {
  const counted = ballots.filter((b) => vote.electorate.includes(b.voter) && vote.options.includes(b.option));
  const tally = Object.fromEntries(vote.options.map((o) => [o, 0])) as Record<string, number>;
  for (const b of counted) tally[b.option] = (tally[b.option] ?? 0) + 1;
  const cast = counted.length;
  const electorate = vote.electorate.length;
  const ranked = Object.entries(tally).sort((a, b) => b[1] - a[1]);
  const [top, topVotes] = ranked[0] ?? ["", 0];
  const tied = (ranked[1]?.[1] ?? -1) === topVotes;
  const base = { tally, cast, electorate, ballotsHash: ballotsHash(counted) };
  const decided = (reason: string): VoteResult => ({ ...base, outcome: "decided", winner: top, reason });
  const undecided = (reason: string): VoteResult => ({ ...base, outcome: "undecided", winner: null, reason });
  const share = cast === 0 ? 0 : topVotes / cast;
  const epsilon = 1e-9;

  switch (vote.rule.type) {
    case "quorum": {
      const quorum = vote.rule.quorum ?? 0.5;
      if (cast / electorate + epsilon < quorum) {
        return {
          ...base,
          outcome: "no-quorum",
          winner: null,
          reason: `${cast} of ${electorate} voted; the quorum is ${formatShare(quorum)} of the electorate`,
        };
      }
      return share > 0.5
        ? decided(`quorum met (${cast} of ${electorate}) and ${top} has a majority (${topVotes} of ${cast})`)
        : undecided(`quorum met (${cast} of ${electorate}) but no option has a majority`);
    }
    case "majority":
      return share > 0.5
        ? decided(`${top} has a majority (${topVotes} of ${cast} ballots)`)
        : undecided(cast === 0 ? "nobody voted" : "no option has more than half of the ballots");
    case "supermajority": {
      const threshold = vote.rule.threshold ?? 2 / 3;
      return cast > 0 && share + epsilon >= threshold && !tied
        ? decided(`${top} has ${topVotes} of ${cast} ballots, at least ${formatShare(threshold)}`)
        : undecided(`no option reached ${formatShare(threshold)} of the ballots`);
    }
    case "unanimity":
      return cast === electorate && topVotes === electorate
        ? decided(`every member of the electorate voted ${top}`)
        : undecided(
            cast < electorate
              ? `${electorate - cast} member(s) of the electorate did not vote`
              : "the electorate did not vote as one",
          );
  }
}

function formatShare(share: number): string {
  return `${Math.round(share * 1000) / 10}%`;
}

/**
 * Recounts from signed ballots alone: every ballot's signature must verify with its voter's key and
 * name this vote; then the rule is applied again. Throws SignatureInvalid/InvalidParams naming the
 * ballot at fault.
 */
export function recount(
  vote: Pick<Vote, "voteId" | "options" | "electorate" | "rule">,
  ballots: Ballot[],
  resolveKey: KeyResolver,
): VoteResult {
  ballots.forEach((ballot, i) => {
    const message = ballot.envelope as unknown as AcpMessage;
    try {
      verifyMessageSignature(message, resolveKey);
    } catch (err) {
      throw new AcpError("SignatureInvalid", `ballot ${i} of ${ballot.voter}: ${(err as Error).message}`, {
        problems: [{ path: `/ballots/${i}/envelope/signature`, message: (err as Error).message }],
      });
    }
    const signed = "params" in message ? message.params : undefined;
    const body = signed?.body as { voteId?: unknown; option?: unknown } | undefined;
    if (
      signed?.headers["agent-id"] !== ballot.voter ||
      body?.voteId !== vote.voteId ||
      body.option !== ballot.option
    ) {
      throw new AcpError("InvalidParams", `ballot ${i} does not say what its record says`, {
        problems: [{ path: `/ballots/${i}`, message: "voter, vote or option differ from the signed ballot" }],
      });
    }
  });
  return tallyVote(vote, ballots);
}
