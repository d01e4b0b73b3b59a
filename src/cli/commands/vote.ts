import type { Command } from "commander";
import type { VoteView } from "../../client/collab.js";
import type { VoteRule } from "../../collab/messages.js";
import { CliError, printJson, printLine } from "../io.js";
import { type GatewayFlags, withGatewayOptions } from "../shared.js";
import { collect, withCollab } from "./negotiate.js";

type Flags = GatewayFlags & {
  team?: string;
  channel: string;
  question?: string;
  option: string[];
  rule: string;
  quorum?: string;
  threshold?: string;
  period?: string;
  electorate: string[];
};

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `90s`, `10m`, `2h`, `1d` (or plain milliseconds). */
export function parseDuration(value: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match) throw new CliError(`${flag} must be a duration such as 90s, 10m, 2h or 1d, not ${value}`);
  return Math.round(Number(match[1]) * (UNITS[match[2] ?? "ms"] as number));
}

function share(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!(n > 0 && n <= 1))
    throw new CliError(`${flag} must be a share between 0 and 1 (e.g. 0.5), not ${value}`);
  return n;
}

function describe(v: VoteView): void {
  printLine(
    `vote ${v.voteId} in ${v.teamId}/${v.channel}: ${v.status} (${v.rule.type}), closes ${v.closesAt}`,
  );
  printLine(`  question  ${v.question}`);
  printLine(`  options   ${v.options.join(" | ")}`);
  printLine(`  ballots   ${v.cast} of ${v.electorate.length}${v.myBallot ? `, yours: ${v.myBallot}` : ""}`);
  if (v.result) {
    const tally = Object.entries(v.result.tally)
      .map(([o, n]) => `${o} ${n}`)
      .join(", ");
    printLine(
      `  result    ${v.result.outcome}${v.result.winner ? `: ${v.result.winner}` : ""} (${tally}); ${v.result.reason}`,
    );
  }
  if (v.announced) printLine(`  announced by ${v.announced.by} at ${v.announced.at}`);
}

export function registerVote(program: Command): void {
  const vote = program.command("vote").description("structured votes in a team channel, with signed ballots");
  const command = (name: string, description: string) =>
    withGatewayOptions(vote.command(name).description(description), ["key", "api-key"]);

  command("open", "open a vote in a team channel")
    .requiredOption("--team <team-id>", "the team")
    .requiredOption("--question <text>", "what is decided")
    .requiredOption("--option <text>", "an option (repeat, at least two)", collect, [])
    .option("--rule <rule>", "majority, supermajority, unanimity or quorum", "majority")
    .option("--quorum <share>", "quorum rule: share of the electorate that must vote (default 0.5)")
    .option("--threshold <share>", "supermajority rule: share of ballots the winner needs (default 0.667)")
    .requiredOption("--period <duration>", "how long voting stays open, e.g. 10m, 2h, 1d")
    .option("--channel <name>", "the channel", "decisions")
    .option("--electorate <agent-id>", "who may vote (repeatable; default every member)", collect, [])
    .action((flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const types = ["majority", "supermajority", "unanimity", "quorum"];
        if (!types.includes(flags.rule))
          throw new CliError(`--rule must be one of ${types.join(", ")}, not ${flags.rule}`);
        const quorum = share(flags.quorum, "--quorum");
        const threshold = share(flags.threshold, "--threshold");
        const rule = {
          type: flags.rule,
          ...(quorum ? { quorum } : {}),
          ...(threshold ? { threshold } : {}),
        } as VoteRule;
        const opened = await collab.teams.openVote({
          teamId: flags.team as string,
          channel: flags.channel,
          question: flags.question as string,
          options: flags.option,
          rule,
          closesAt: new Date(Date.now() + parseDuration(flags.period as string, "--period")),
          ...(flags.electorate.length > 0 ? { electorate: flags.electorate } : {}),
        });
        if (flags.json) return printJson(opened);
        printLine(
          `vote ${opened.voteId} open in ${opened.teamId}/${opened.channel} until ${opened.closesAt}`,
        );
      }),
    );

  command("cast <vote-id> <option>", "cast or change your signed ballot").action(
    (voteId: string, option: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const ballot = await collab.teams.vote(voteId, option);
        if (flags.json) return printJson(ballot);
        printLine(`${ballot.changed ? "changed your ballot to" : "voted"} ${ballot.option} in ${voteId}`);
      }),
  );

  command("show <vote-id>", "a vote; after it closed, the tally and the signed ballots").action(
    (voteId: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const v = await collab.teams.getVote(voteId);
        flags.json ? printJson(v) : describe(v);
      }),
  );

  command("announce <vote-id>", "announce the result to the channel once voting closed").action(
    (voteId: string, flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const announced = await collab.teams.announce(voteId);
        if (flags.json) return printJson(announced);
        const r = announced.announced?.result;
        printLine(`announced ${voteId}: ${r?.outcome}${r?.winner ? ` (${r.winner})` : ""}; ${r?.reason}`);
      }),
  );
}
