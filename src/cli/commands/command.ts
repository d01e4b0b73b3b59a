import { randomUUID } from "node:crypto";
import type { Command } from "commander";
import {
  ACTIONS,
  type AgentCommand,
  type AgentResponse,
  COMMAND_VERSION,
  CommandError,
  isSuccessful,
  type Orchestrator,
  parseCommand,
} from "../../orchestration/index.js";
import { PRIORITIES } from "../../orchestration/schemas.js";
import { CliError, printJson, printLine } from "../io.js";
import { wholeNumber } from "../option-parsers.js";
import { runPattern } from "./command-patterns.js";
import { type CommonFlags, openSession, progress } from "./command-session.js";
import { guarded, withGatewayOptions } from "../shared.js";

interface SendFlags extends CommonFlags {
  to: string;
  action: string;
  param: string[];
  priority: string;
  timeout?: string;
  permission: string[];
  requireApproval?: boolean;
  correlationId?: string;
  fallback: string[];
  wait: boolean;
  maxAttempts?: number;
  backoffMs?: number;
  cacheable?: boolean;
}

const collect = (value: string, previous: string[]) => [...previous, value];

export function registerCommand(program: Command): void {
  const group = program
    .command("command")
    .description(
      "AgentCommands (the ACP v2.0 command layer) to agents through a gateway: send one, or broadcast, scatter-gather or pipeline from a YAML file",
    );

  withGatewayOptions(
    group
      .command("send")
      .description("send one command and print the agent's AgentResponse (exit 1 unless it succeeded)"),
    ["key", "api-key"],
  )
    .requiredOption("--to <agent-id>", "the agent that should act")
    .requiredOption("--action <action>", ACTIONS.join(" | "))
    .option(
      "--param <key=value>",
      "a parameter (repeatable); the value is read as JSON when it parses, else as text",
      collect,
      [],
    )
    .option("--priority <priority>", PRIORITIES.join(" | "), "medium")
    .option("--timeout <ms>", "execution timeout (default: by priority, from the configuration)")
    .option("--permission <name>", "a permission the command requires (repeatable)", collect, [])
    .option(
      "--require-approval",
      "wait for the principal's approval (acp approvals approve ID) before sending",
    )
    .option("--correlation-id <id>", "ties this command to related ones")
    .option("--fallback <agent-id>", "an agent to try if the target fails (repeatable)", collect, [])
    .option(
      "--no-wait",
      "fire-and-forget: hand the command over and exit without waiting for a response (no retries, no fallbacks)",
    )
    .option(
      "--max-attempts <n>",
      "attempts before giving up on a recoverable failure (context.retryPolicy; default: the configuration's retry.max_attempts)",
      wholeNumber(),
    )
    .option(
      "--backoff-ms <ms>",
      "first wait between attempts, doubled each time (context.retryPolicy; default: retry.backoff_ms)",
      wholeNumber(),
    )
    .option("--cacheable", "cache a successful response for cache_ttl, and answer a repeat from the cache")
    .option("--config <file>", "acp.yaml (default: ./acp.yaml when present, else the built-in defaults)")
    .action((flags: SendFlags) => guarded(flags, () => sendOne(flags)));

  for (const pattern of ["broadcast", "scatter", "pipeline"] as const) {
    withGatewayOptions(
      group.command(`${pattern} <file>`).description(
        {
          broadcast:
            "one command to every agent in `targets`; per-agent results (exit 0 all ok, 2 partial, 1 none)",
          scatter:
            "commands in parallel, aggregated (collect | merge | concat), with min_success and deadline_ms",
          pipeline: "steps in order, each getting the previous step's data; stops at the first failure",
        }[pattern],
      ),
      ["key", "api-key"],
    )
      .option("--config <file>", "acp.yaml (default: ./acp.yaml when present, else the built-in defaults)")
      .action((file: string, flags: CommonFlags) => guarded(flags, () => runPattern(pattern, file, flags)));
  }
}

function parseParams(params: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const param of params) {
    const eq = param.indexOf("=");
    if (eq <= 0) throw new CliError(`--param ${param}: expected key=value`);
    const key = param.slice(0, eq);
    if (key in out) throw new CliError(`--param ${key} is given twice`);
    const text = param.slice(eq + 1);
    try {
      out[key] = JSON.parse(text);
    } catch {
      out[key] = text;
    }
  }
  return out;
}

async function sendOne(flags: SendFlags): Promise<void> {
  const timeout = flags.timeout === undefined ? undefined : Number(flags.timeout);
  if (!flags.wait && flags.fallback.length > 0)
    throw new CliError("--fallback: not with --no-wait (there is no answer to judge)");
  if (!flags.wait && (flags.maxAttempts !== undefined || flags.backoffMs !== undefined))
    throw new CliError("--max-attempts/--backoff-ms: not with --no-wait (there is no answer to retry)");
  if (!flags.wait && flags.cacheable) throw new CliError("--cacheable: not with --no-wait");
  const session = await openSession(flags, [flags.to, ...flags.fallback]);
  try {
    const command = commandOf(flags, session.orch, timeout);
    if (!flags.wait) {
      progress(`handing ${command.action} over to ${command.to} (command ${command.id}), not waiting…`);
      const receipt = await session.orch.sendAsync(command, {
        signal: session.signal,
        onApproval: session.onApproval,
      });
      if (flags.json) printJson(receipt);
      else if (receipt.accepted) printLine(`sent ${command.action} to ${command.to} (command ${command.id})`);
      if (receipt.response) {
        if (!flags.json) printResponse(receipt.response);
        throw new CliError(flags.json ? "" : failureLine(receipt.response));
      }
      return;
    }
    progress(`sending ${command.action} to ${command.to} (command ${command.id})…`);
    const response = await session.orch.send(command, {
      signal: session.signal,
      onApproval: session.onApproval,
      ...(flags.fallback.length > 0 ? { fallbacks: flags.fallback } : {}),
      ...(flags.cacheable ? { cacheable: true } : {}),
    });
    if (flags.json) printJson(response);
    else printResponse(response);
    if (!isSuccessful(response)) throw new CliError(flags.json ? "" : failureLine(response));
  } finally {
    await session.close();
  }
}

/** The AgentCommand the flags describe; a bad flag is named as the flag. */
function commandOf(flags: SendFlags, orch: Orchestrator, timeout: number | undefined): AgentCommand {
  const retryPolicy =
    flags.maxAttempts !== undefined || flags.backoffMs !== undefined
      ? {
          maxAttempts: flags.maxAttempts ?? orch.config.retry.max_attempts,
          backoffMs: flags.backoffMs ?? orch.config.retry.backoff_ms,
        }
      : undefined;
  const context = {
    ...(timeout !== undefined ? { timeout } : {}),
    ...(flags.correlationId ? { correlationId: flags.correlationId } : {}),
    ...(retryPolicy ? { retryPolicy } : {}),
  };
  const security = {
    permissions: flags.permission,
    ...(flags.requireApproval ? { requireApproval: true } : {}),
  };
  try {
    return parseCommand({
      id: randomUUID(),
      timestamp: new Date().toISOString(),
      version: COMMAND_VERSION,
      from: orch.id,
      to: flags.to,
      priority: flags.priority,
      action: flags.action,
      parameters: parseParams(flags.param),
      ...(Object.keys(context).length > 0 ? { context } : {}),
      ...(flags.permission.length > 0 || flags.requireApproval ? { security } : {}),
    });
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    const problems = err.options.problems ?? [];
    throw new CliError(problems.map((p) => `${FLAG_OF[p.path] ?? p.path}: ${p.message}`).join("; "));
  }
}

/** `failed (agent_error) after 3 attempts: …`; a cancellation's summary already says "cancelled: …". */
function failureLine(response: AgentResponse): string {
  if (response.status === "cancelled") return response.results.summary ?? "cancelled";
  const attempts = response.execution?.attempts;
  const after = attempts !== undefined && attempts > 1 ? ` after ${attempts} attempts` : "";
  const code = response.error ? ` (${response.error.code})` : "";
  return `${response.status}${code}${after}: ${response.error?.message ?? response.results.summary ?? ""}`;
}

/** Problems in a command built from flags are reported by flag. */
const FLAG_OF: Record<string, string> = {
  "/to": "--to",
  "/action": "--action",
  "/priority": "--priority",
  "/context/timeout": "--timeout",
  "/context/correlationId": "--correlation-id",
  "/context/retryPolicy/maxAttempts": "--max-attempts",
  "/context/retryPolicy/backoffMs": "--backoff-ms",
};

/** `success from flaky in 2304 ms after 3 attempts (command …)`: the whole time, retries included. */
function printResponse(response: AgentResponse): void {
  const execution = response.execution;
  const attempts = execution?.attempts;
  const after = attempts !== undefined && attempts !== 1 ? ` after ${attempts} attempts` : "";
  printLine(
    `${response.status} from ${response.from} in ${execution?.totalDuration ?? execution?.duration ?? 0} ms${after} (command ${response.commandId})`,
  );
  if (response.results.summary) printLine(`summary: ${response.results.summary}`);
  if (response.results.data !== undefined) printJson(response.results.data);
  for (const artifact of response.results.artifacts ?? [])
    printLine(`artifact ${artifact.id} (${artifact.type}): ${artifact.path}`);
}
