import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { CollabClient } from "../../client/collab.js";
import { AcpAgent } from "../../client/index.js";
import type { NegotiationView } from "../../collab/negotiation.js";
import { readIdentityFile } from "../../identity/index.js";
import { CliError, parseJsonInput, printJson, printLine, readInput } from "../io.js";
import {
  apiKeyOf,
  failed,
  type GatewayFlags,
  gatewayOf,
  keyFileOf,
  stateOf,
  withGatewayOptions,
} from "../shared.js";

/** Progress goes to stderr so stdout carries only the result. */
export const progress = (text: string) => process.stderr.write(`${text}\n`);

/**
 * Runs `body` with a CollabClient for the agent of `--key`. `connect`: also connect the agent's
 * WebSocket (only handshakes and replies are consumed; its inbox stays for its real consumer), for
 * commands whose message is relayed to another agent.
 */
export async function withCollab(
  flags: GatewayFlags,
  connect: boolean,
  body: (collab: CollabClient) => Promise<void>,
): Promise<void> {
  let agent: AcpAgent | undefined;
  try {
    const keyFile = keyFileOf(flags);
    const apiKey = apiKeyOf(flags);
    const gateway = gatewayOf(flags);
    const identity = await readIdentityFile(keyFile);
    if (connect) {
      agent = new AcpAgent({ gateway, keyFile, apiKey, consume: "replies", ...stateOf(flags) });
      agent.on("error", (err) => progress(`warning: ${err.message}`));
      await agent.connect();
    }
    await body(new CollabClient({ gateway, identity, apiKey, ...(agent ? { agent } : {}) }));
  } catch (err) {
    failed(err, flags.json);
  } finally {
    await agent?.close();
  }
}

/** A JSON object option: inline JSON, `@file`, or `-` for standard input. */
export async function jsonObject(value: string, flag: string): Promise<Record<string, unknown>> {
  const source =
    value === "-" || value.startsWith("@")
      ? await readInput(value === "-" ? "-" : value.slice(1))
      : undefined;
  const name = source ? `${flag} ${source.name}` : flag;
  const parsed = parseJsonInput(source?.text ?? value, name);
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new CliError(`${name}: must be a JSON object, e.g. {"price":100}`);
  }
  return parsed as Record<string, unknown>;
}

export const collect = (value: string, previous: string[]) => [...previous, value];

function describeSession(s: NegotiationView): void {
  printLine(`negotiation ${s.sessionId}${s.subject ? ` (${s.subject})` : ""}: ${s.status}`);
  printLine(`  parties   ${s.proposer.agentId} (proposer), ${s.responder.agentId}`);
  printLine(`  round     ${s.round} of ${s.maxRounds}${s.turn ? `, ${s.turn} to answer` : ""}`);
  if (s.latest) printLine(`  offer     ${JSON.stringify(s.latest.terms)} by ${s.latest.by}`);
  printLine(`  expires   ${s.expiresAt}`);
  if (s.rejection)
    printLine(`  rejected  by ${s.rejection.by}${s.rejection.reason ? `: ${s.rejection.reason}` : ""}`);
  if (s.agreement) printLine("  agreement signed by both parties (acp negotiate agreement ID --out FILE)");
}

async function saveAgreement(
  collab: CollabClient,
  sessionId: string,
  out: string | undefined,
  json?: boolean,
) {
  const agreement = await collab.negotiations.agreement(sessionId);
  if (out) {
    await writeFile(out, `${JSON.stringify(agreement, null, 2)}\n`);
    if (!json) printLine(`agreement written to ${out} (check it with: acp agreement verify ${out})`);
  }
  return agreement;
}

type Flags = GatewayFlags & {
  terms?: string;
  subject?: string;
  reason?: string;
  out?: string;
  status?: string;
  to?: string;
};

export function registerNegotiate(program: Command): void {
  const negotiate = program
    .command("negotiate")
    .description("negotiate terms with another agent: offers signed as the agreement they become");
  const command = (name: string, description: string) =>
    withGatewayOptions(negotiate.command(name).description(description), ["key", "api-key"]);

  command("propose", "open a session with a proposal (round 1)")
    .requiredOption("--to <agent-id>", "the other party")
    .requiredOption("--terms <json>", "the terms: inline JSON, @file or -")
    .option("--subject <text>", "what the negotiation is about")
    .action((flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const terms = await jsonObject(flags.terms as string, "--terms");
        const view = await collab.negotiations.propose(
          flags.to as string,
          terms,
          flags.subject ? { subject: flags.subject } : {},
        );
        flags.json ? printJson(view) : describeSession(view);
      }),
    );

  command("counter <session-id>", "make a counter-offer (your turn only)")
    .requiredOption("--terms <json>", "the terms: inline JSON, @file or -")
    .action((sessionId: string, flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const view = await collab.negotiations.counter(
          sessionId,
          await jsonObject(flags.terms as string, "--terms"),
        );
        flags.json ? printJson(view) : describeSession(view);
      }),
    );

  command("accept <session-id>", "accept the latest offer; both signatures make the agreement")
    .option("--out <file>", "write the signed agreement to this file")
    .action((sessionId: string, flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const view = await collab.negotiations.accept(sessionId);
        await saveAgreement(collab, sessionId, flags.out, flags.json);
        flags.json ? printJson(view) : describeSession(view);
      }),
    );

  command("reject <session-id>", "end the session")
    .option("--reason <text>", "why")
    .action((sessionId: string, flags: Flags) =>
      withCollab(flags, true, async (collab) => {
        const view = await collab.negotiations.reject(sessionId, flags.reason);
        flags.json ? printJson(view) : describeSession(view);
      }),
    );

  command("show <session-id>", "a session: status, turn, latest offer").action(
    (sessionId: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const view = await collab.negotiations.get(sessionId);
        flags.json ? printJson(view) : describeSession(view);
      }),
  );

  command("history <session-id>", "every round with its signed offer").action(
    (sessionId: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const history = await collab.negotiations.history(sessionId);
        if (flags.json) return printJson(history);
        printLine(`negotiation ${history.sessionId}: ${history.status}`);
        for (const r of history.rounds)
          printLine(`  ${r.round}. ${r.at} ${r.by}: ${JSON.stringify(r.terms)}  [${r.hash}]`);
      }),
  );

  command("agreement <session-id>", "the agreement signed by both parties")
    .option("--out <file>", "write it to this file instead of printing it")
    .action((sessionId: string, flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const agreement = await saveAgreement(collab, sessionId, flags.out, flags.json);
        if (!flags.out || flags.json) printJson(agreement);
      }),
    );

  command("list", "your negotiations")
    .option("--status <status>", "only open, accepted, rejected, exhausted or expired ones")
    .action((flags: Flags) =>
      withCollab(flags, false, async (collab) => {
        const sessions = await collab.negotiations.list(
          flags.status as NegotiationView["status"] | undefined,
        );
        if (flags.json) return printJson(sessions);
        if (sessions.length === 0) printLine("no negotiations");
        for (const s of sessions)
          printLine(
            `${s.sessionId}  ${s.status.padEnd(9)} ${s.proposer.agentId} ↔ ${s.responder.agentId}  round ${s.round}`,
          );
      }),
    );
}
