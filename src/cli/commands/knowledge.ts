import type { Command } from "commander";
import { CliError, printJson, printLine, readInput } from "../io.js";
import { type GatewayFlags, withGatewayOptions } from "../shared.js";
import { collect, withCollab } from "./negotiate.js";

type Flags = GatewayFlags & {
  team?: string;
  title?: string;
  content?: string;
  contentFile?: string;
  tag: string[];
  limit: string;
  note?: string;
};

export function registerKnowledge(program: Command): void {
  const knowledge = program
    .command("knowledge")
    .description("a team's knowledge: publish entries, search them, credit their authors");
  const command = (name: string, description: string) =>
    withGatewayOptions(knowledge.command(name).description(description), ["key", "api-key"]);

  command("publish", "publish an entry to a team's index")
    .requiredOption("--team <team-id>", "the team")
    .requiredOption("--title <text>", "the title")
    .option("--content <text>", "the content")
    .option("--content-file <file>", "read the content from a file (- for stdin)")
    .option("--tag <tag>", "a tag (repeatable)", collect, [])
    .action((flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        if ((flags.content === undefined) === (flags.contentFile === undefined))
          throw new CliError("give exactly one of --content and --content-file");
        const content = flags.content ?? (await readInput(flags.contentFile)).text;
        const entry = await collab.teams.publish(flags.team as string, {
          title: flags.title as string,
          content,
          tags: flags.tag,
        });
        if (flags.json) return printJson(entry);
        printLine(`published ${entry.entryId} "${entry.title}" to ${entry.teamId}`);
      }),
    );

  command("search <query>", "full-text search of a team's entries (every word must match; prefixes count)")
    .requiredOption("--team <team-id>", "the team")
    .option("--tag <tag>", "only entries with this tag")
    .option("--limit <n>", "at most n results", "20")
    .action((query: string, flags: Omit<Flags, "tag"> & { tag?: string }) =>
      withCollab(flags, false, async (collab) => {
        const hits = await collab.teams.search(flags.team as string, query, {
          limit: Number(flags.limit) || 20,
          ...(flags.tag ? { tag: flags.tag } : {}),
        });
        if (flags.json) return printJson(hits);
        if (hits.length === 0) printLine("no entries match");
        for (const h of hits) {
          printLine(`${h.entryId}  ${h.title}  [${h.tags.join(", ")}] by ${h.author}, used ${h.uses}×`);
          printLine(`    ${h.snippet.replace(/\s+/g, " ")}`);
        }
      }),
    );

  command("show <entry-id>", "an entry in full").action((entryId: string, flags: Flags) =>
    withCollab(flags, false, async (collab) => {
      const e = await collab.teams.entry(entryId);
      if (flags.json) return printJson(e);
      printLine(`${e.title}  (${e.teamId}, by ${e.author}, ${e.createdAt}, used ${e.uses}×)`);
      if (e.tags.length > 0) printLine(`tags: ${e.tags.join(", ")}`);
      printLine("");
      printLine(e.content);
    }),
  );

  command("use <entry-id>", "record that you used an entry: its author earns a point")
    .option("--note <text>", "what it helped with")
    .action((entryId: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const used = await collab.teams.use(entryId, flags.note);
        if (flags.json) return printJson(used);
        printLine(
          `${used.credited ? "credited" : "not credited"}: ${used.reason} (author has ${used.authorPoints} points)`,
        );
      }),
    );

  command("points [agent-id]", "an agent's reward points (default: yours)").action(
    (agentId: string | undefined, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const points = await collab.teams.points(agentId);
        if (flags.json) return printJson({ agentId: agentId ?? collab.agentId, points });
        printLine(`${agentId ?? collab.agentId}: ${points} points`);
      }),
  );
}
