import type { Command } from "commander";
import { GatewayClient } from "../../client/index.js";
import type { HandoffView } from "../../collab/handoff.js";
import { API_PREFIX } from "../../wire/api.js";
import { CliError, printJson, printLine } from "../io.js";
import { failed, type GatewayFlags, gatewayOf, withGatewayOptions } from "../shared.js";
import { collect, jsonObject, withCollab } from "./negotiate.js";

type Flags = GatewayFlags & {
  to?: string;
  completed?: string;
  remaining?: string;
  context?: string;
  requires: string[];
  escrow?: string;
  title?: string;
  id?: string;
  reason?: string;
  result?: string;
  percent?: string;
  note?: string;
  role?: "delegate" | "delegator";
  status?: string;
  amount?: string;
  respondBy?: string;
  deadline?: string;
};

function describe(h: HandoffView): void {
  printLine(`handoff ${h.handoffId}${h.title ? ` (${h.title})` : ""}: ${h.status}`);
  printLine(`  ${h.delegator} → ${h.delegate}`);
  if (h.delivery === "queued")
    printLine(`  queued    until ${h.delegate} is online and has completed the handshake`);
  if (h.escrow > 0) printLine(`  escrow    ${h.escrow} credits, ${h.escrowState}`);
  if (h.status === "offered") printLine(`  respond   by ${h.respondBy}`);
  if (h.deadline && (h.status === "offered" || h.status === "accepted"))
    printLine(`  deadline  ${h.deadline}`);
  if (h.requires.length > 0) printLine(`  requires  ${h.requires.join(", ")}`);
  if (h.progress)
    printLine(`  progress  ${h.progress.percent}%${h.progress.note ? ` ${h.progress.note}` : ""}`);
  if (h.reason) printLine(`  reason    ${h.reason}`);
  if (h.result !== undefined) printLine(`  result    ${JSON.stringify(h.result)}`);
}

const UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--respond-by`/`--deadline`: an ISO 8601 date-time, or a time from now (`90m`, `12h`, `3d`). */
function timeFromNow(value: string | undefined, flag: string): string | undefined {
  if (value === undefined) return undefined;
  const relative = /^(\d+)([mhd])$/.exec(value);
  const ms = relative
    ? Date.now() + Number(relative[1]) * (UNITS[relative[2] as string] as number)
    : Date.parse(value);
  if (Number.isNaN(ms))
    throw new CliError(
      `${flag}: expected an ISO 8601 date-time or a time from now (90m, 12h, 3d), got ${JSON.stringify(value)}`,
    );
  return new Date(ms).toISOString();
}

function wholeNumber(value: string | undefined, flag: string, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n) || n < min || n > max)
    throw new CliError(`${flag} must be a whole number from ${min} to ${max}, not ${value}`);
  return n;
}

/** `--completed`/`--remaining`: a sentence, or JSON (a list or an object) when it parses as one. */
function work(value: string | undefined): string | unknown[] | Record<string, unknown> {
  if (value === undefined) return "nothing yet";
  try {
    const parsed: unknown = JSON.parse(value);
    if (typeof parsed === "object" && parsed !== null) return parsed as unknown[] | Record<string, unknown>;
  } catch {
    // plain text
  }
  return value;
}

export function registerHandoff(program: Command): void {
  const handoff = program
    .command("handoff")
    .description("hand tasks to other agents: capability-checked, with credits held in escrow");
  const command = (name: string, description: string) =>
    withGatewayOptions(handoff.command(name).description(description), ["key", "api-key"]);
  const show = (flags: Flags, view: HandoffView) => (flags.json ? printJson(view) : describe(view));

  command("offer", "offer a task (what is completed, what remains, the context)")
    .requiredOption("--to <agent-id>", "the delegate")
    .requiredOption("--remaining <text|json>", "what remains to be done")
    .option("--completed <text|json>", "what is already done")
    .option("--context <json>", "everything the delegate needs: inline JSON, @file or -")
    .option(
      "--requires <capability>",
      "a capability the delegate must have registered (repeatable)",
      collect,
      [],
    )
    .option("--escrow <credits>", "credits held for the delegate until completion", "0")
    .option("--title <text>", "a short title")
    .option(
      "--id <handoff-id>",
      "the handoff id, in your namespace: <your agent id>.<id> (default: a new UUID)",
    )
    .option(
      "--respond-by <time>",
      "the offer expires unanswered then: ISO 8601, or from now (90m, 12h, 3d); default the gateway's (24h)",
    )
    .option(
      "--deadline <time>",
      "the accepted task expires then unless completed; default the gateway's (7d after acceptance)",
    )
    .action((flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const context = flags.context ? await jsonObject(flags.context, "--context") : {};
        const view = await collab.handoffs.offer(
          flags.to as string,
          { completed: work(flags.completed), remaining: work(flags.remaining), context },
          {
            requires: flags.requires,
            escrow: wholeNumber(flags.escrow, "--escrow", 0, 1_000_000_000),
            ...(flags.title ? { title: flags.title } : {}),
            ...(flags.id ? { handoffId: flags.id } : {}),
            ...(flags.respondBy ? { respondBy: timeFromNow(flags.respondBy, "--respond-by") } : {}),
            ...(flags.deadline ? { deadline: timeFromNow(flags.deadline, "--deadline") } : {}),
          },
        );
        show(flags, view);
      }),
    );

  for (const [action, description] of [
    ["accept", "accept an offered task (the escrow is then held for you)"],
    ["decline", "decline an offered task (the escrow goes back)"],
    ["cancel", "withdraw your offer before it is accepted (the escrow goes back)"],
    ["complete", "report the task done (the escrow is released to you)"],
    ["fail", "report the task failed (the escrow goes back to the delegator)"],
  ] as const) {
    const cmd = command(`${action} <handoff-id>`, description);
    if (action !== "accept" && action !== "complete") cmd.option("--reason <text>", "why");
    if (action === "complete") cmd.option("--result <json>", "the result: inline JSON, @file or -");
    cmd.action((id: string, flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const h = collab.handoffs;
        const view =
          action === "accept"
            ? await h.accept(id)
            : action === "complete"
              ? await h.complete(id, flags.result ? await jsonObject(flags.result, "--result") : undefined)
              : await h[action](id, flags.reason);
        show(flags, view);
      }),
    );
  }

  command("progress <handoff-id>", "report progress on a task you accepted")
    .requiredOption("--percent <0-100>", "how far along")
    .option("--note <text>", "a short note")
    .action((id: string, flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        show(
          flags,
          await collab.handoffs.progress(id, wholeNumber(flags.percent, "--percent", 0, 100), flags.note),
        );
      }),
    );

  command("show <handoff-id>", "a handoff and its escrow").action((id: string, flags: Flags) =>
    withCollab(flags, false, async (collab) => show(flags, await collab.handoffs.get(id))),
  );

  command("list", "handoffs you delegated or were offered")
    .option("--role <role>", "delegate or delegator")
    .option("--status <status>", "offered, accepted, declined, completed, failed or cancelled")
    .action((flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const list = await collab.handoffs.list({
          ...(flags.role ? { role: flags.role } : {}),
          ...(flags.status ? { status: flags.status } : {}),
        });
        if (flags.json) return printJson(list);
        if (list.length === 0) printLine("no handoffs");
        for (const h of list)
          printLine(
            `${h.handoffId}  ${h.status.padEnd(9)} ${h.delegator} → ${h.delegate}  escrow ${h.escrow}`,
          );
      }),
    );

  command("balance", "your credits, what is in escrow, and every movement").action((flags: Flags) =>
    withCollab(flags, false, async (collab) => {
      const b = await collab.handoffs.balance();
      if (flags.json) return printJson(b);
      printLine(
        `${b.agentId}: ${b.balance} credits; ${b.escrowed} in escrow for tasks you delegated; ${b.incoming} held for you`,
      );
      for (const m of b.movements)
        printLine(`  ${m.at} ${m.kind.padEnd(7)} ${m.amount}${m.escrowId ? ` (${m.escrowId})` : ""}`);
    }),
  );

  withGatewayOptions(handoff.command("grant").description("give an agent credits (gateway admin)"), [
    "admin-token",
  ])
    .requiredOption("--to <agent-id>", "the agent")
    .requiredOption("--amount <credits>", "how many credits")
    .option("--note <text>", "why")
    .action(async (flags: Flags) => {
      try {
        const token = flags.adminToken ?? process.env.ACP_ADMIN_TOKEN;
        if (!token)
          throw new CliError(
            "this needs the gateway's admin token: pass --admin-token or set ACP_ADMIN_TOKEN",
          );
        const amount = wholeNumber(flags.amount, "--amount", 1, 1_000_000_000);
        const base = new GatewayClient({ gateway: gatewayOf(flags) }).baseUrl;
        const response = await fetch(`${base}${API_PREFIX}/ledger/grants`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ agent_id: flags.to, amount, ...(flags.note ? { note: flags.note } : {}) }),
        });
        const body = (await response.json()) as {
          error?: { message: string };
          balances?: Record<string, number>;
        };
        if (!response.ok)
          throw new CliError(`grant refused (${response.status}): ${body.error?.message ?? "unknown error"}`);
        if (flags.json) return printJson(body);
        printLine(
          `granted ${amount} credits to ${flags.to}; balance now ${body.balances?.[flags.to as string]}`,
        );
      } catch (err) {
        failed(err, flags.json);
      }
    });
}
