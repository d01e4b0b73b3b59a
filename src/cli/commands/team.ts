import type { Team } from "../../collab/contracts.js";
import type { Command } from "commander";
import type { PostView } from "../../client/collab.js";
import { CliError, printJson, printLine } from "../io.js";
import { type GatewayFlags, withGatewayOptions } from "../shared.js";
import { collect, jsonObject, withCollab } from "./negotiate.js";

type Flags = GatewayFlags & {
  name?: string;
  member: string[];
  channel: string;
  text?: string;
  data?: string;
  limit: string;
  handoff?: string;
  vote?: string;
  statement?: string;
  messageId: string[];
  note?: string;
};

function describeTeam(t: Team): void {
  printLine(`team ${t.teamId} (${t.name}), owner ${t.owner}`);
  printLine(`  members  ${t.members.join(", ")}`);
}

function describePost(p: PostView): void {
  const what = typeof p.body.text === "string" ? p.body.text : JSON.stringify(p.body.data ?? p.body);
  printLine(`${p.at} ${p.from} [${p.kind}]: ${what}`);
}

export function registerTeam(program: Command): void {
  const team = program
    .command("team")
    .description("teams: members, channels, and disputes escalated to principals");
  const command = (parent: Command, name: string, description: string) =>
    withGatewayOptions(parent.command(name).description(description), ["key", "api-key"]);

  command(team, "create <name>", "create a team you own; its id is <your agent id>.<name>")
    .requiredOption("--name <text>", "a readable name")
    .option("--member <agent-id>", "another member (repeatable)", collect, [])
    .action((teamId: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const created = await collab.teams.create(teamId, flags.name as string, flags.member);
        flags.json ? printJson(created) : describeTeam(created);
      }),
    );

  for (const [verb, description] of [
    ["add", "add members (owner only)"],
    ["remove", "remove members (owner only; anyone may remove itself)"],
  ] as const) {
    command(team, `${verb} <team-id> <agent-id...>`, description).action(
      (teamId: string, agents: string[], flags: Flags) =>
        withCollab(flags, false, async (collab) => {
          const changed = await collab.teams.members(
            teamId,
            verb === "add" ? { add: agents } : { remove: agents },
          );
          flags.json ? printJson(changed) : describeTeam(changed);
        }),
    );
  }

  command(team, "show <team-id>", "a team and its members").action((teamId: string, flags: Flags) =>
    withCollab(flags, false, async (collab) => {
      const t = await collab.teams.get(teamId);
      flags.json ? printJson(t) : describeTeam(t);
    }),
  );

  command(team, "list", "the teams you are in").action((flags: Flags) =>
    withCollab(flags, false, async (collab) => {
      const teams = await collab.teams.list();
      if (flags.json) return printJson(teams);
      if (teams.length === 0) printLine("no teams");
      for (const t of teams) printLine(`${t.teamId}  ${t.name}  (${t.members.length} members)`);
    }),
  );

  command(team, "post <team-id>", "post to a channel: one signed copy to every other member")
    .option("--channel <name>", "the channel", "general")
    .option("--text <text>", "the message")
    .option("--data <json>", "structured content: inline JSON, @file or -")
    .action((teamId: string, flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        if (!flags.text && !flags.data) throw new CliError("give --text or --data (or both)");
        const post = await collab.teams.post(teamId, flags.channel, {
          ...(flags.text ? { text: flags.text } : {}),
          ...(flags.data ? { data: await jsonObject(flags.data, "--data") } : {}),
        });
        if (flags.json) return printJson(post);
        printLine(
          `posted ${post.postId} to ${teamId}/${flags.channel}: delivered to ${Object.keys(post.delivered).join(", ") || "nobody else"}`,
        );
        for (const [to, error] of Object.entries(post.failed))
          printLine(`  not delivered to ${to}: ${error.message}`);
      }),
    );

  command(team, "messages <team-id>", "a channel's history")
    .option("--channel <name>", "the channel", "general")
    .option("--limit <n>", "the newest n messages", "100")
    .action((teamId: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const posts = await collab.teams.messages(teamId, flags.channel, Number(flags.limit) || 100);
        if (flags.json) return printJson(posts);
        if (posts.length === 0) printLine(`no messages in ${teamId}/${flags.channel}`);
        for (const p of posts) describePost(p);
      }),
    );

  const dispute = team
    .command("dispute")
    .description("disputes about a handoff or a vote, escalated to the principals");
  command(dispute, "open", "open a dispute: everyone involved hears of it, their principals decide")
    .option("--handoff <handoff-id>", "the handoff in dispute")
    .option("--vote <vote-id>", "the vote in dispute")
    .requiredOption("--statement <text>", "what is wrong")
    .option("--message-id <id>", "a message that is evidence (repeatable)", collect, [])
    .option("--note <text>", "more evidence, in words")
    .action((flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        if ((flags.handoff === undefined) === (flags.vote === undefined))
          throw new CliError("give exactly one of --handoff and --vote");
        const subject = flags.handoff
          ? { kind: "handoff" as const, id: flags.handoff }
          : { kind: "vote" as const, id: flags.vote as string };
        const opened = await collab.teams.dispute(subject, flags.statement as string, {
          messageIds: flags.messageId,
          ...(flags.note ? { note: flags.note } : {}),
        });
        if (flags.json) return printJson(opened);
        printLine(
          `dispute ${opened.disputeId} about ${subject.kind} ${subject.id}: escalated to ${opened.escalatedTo.join(", ")}`,
        );
      }),
    );
  command(dispute, "show <dispute-id>", "a dispute, its evidence and resolution").action(
    (id: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const d = await collab.teams.getDispute(id);
        if (flags.json) return printJson(d);
        printLine(`dispute ${d.disputeId} about ${d.subject.kind} ${d.subject.id}: ${d.status}`);
        printLine(`  opened by ${d.openedBy}: ${d.statement}`);
        printLine(`  escalated to ${d.escalatedTo.join(", ")}`);
        if (d.resolution) printLine(`  resolved by ${d.resolution.by}: ${d.resolution.text}`);
      }),
  );
}
