/**
 * What the CLI's commands share: where a command finds the gateway and its credentials (flags
 * first, then the environment), the options every networked command takes, how a failure becomes
 * the CLI's message and exit code. (The integer option parser, `wholeNumber`, is in option-parsers.ts: commands
 * that must start without the SDK and zod use it too.)
 */
import type { Command } from "commander";
import { GatewayUnreachableError } from "../client/index.js";
import { KeyFileError } from "../identity/index.js";
import { ConfigError } from "../orchestration/errors.js";
import { AcpError } from "../protocol/index.js";
import { CliError } from "./io.js";

/** Where a command finds the gateway and its credentials: flags first, then the environment. */
export interface GatewayFlags {
  gateway?: string;
  key?: string;
  apiKey?: string;
  adminToken?: string;
  /** Where the agent's state is kept (`--state-dir`); default: the SDK's, `$ACP_STATE_DIR` or the user state directory. */
  stateDir?: string;
  json?: boolean;
}

export function gatewayOf(flags: GatewayFlags): string {
  const url = flags.gateway ?? process.env.ACP_GATEWAY;
  if (!url) throw new CliError("no gateway given: pass --gateway URL or set ACP_GATEWAY");
  return url;
}

export function keyFileOf(flags: GatewayFlags): string {
  const file = flags.key ?? process.env.ACP_KEY;
  if (!file) throw new CliError("no key file given: pass --key FILE or set ACP_KEY");
  return file;
}

export function apiKeyOf(flags: GatewayFlags): string {
  const key = flags.apiKey ?? process.env.ACP_API_KEY;
  if (!key) throw new CliError("no API key given: pass --api-key KEY or set ACP_API_KEY");
  return key;
}

/** The AcpAgent `state` option for `--state-dir` (absent: the SDK's default root). */
export function stateOf(flags: GatewayFlags): { state: { root: string } } | Record<string, never> {
  return flags.stateDir === undefined ? {} : { state: { root: flags.stateDir } };
}

export function adminTokenOf(flags: GatewayFlags): string {
  const token = flags.adminToken ?? process.env.ACP_ADMIN_TOKEN;
  if (!token)
    throw new CliError(
      "this needs the gateway's admin token: pass --admin-token TOKEN or set ACP_ADMIN_TOKEN",
    );
  return token;
}

/** The gateway options every networked command takes. */
export function withGatewayOptions(
  command: Command,
  credentials: ("key" | "api-key" | "admin-token")[],
): Command {
  command.option("--gateway <url>", "gateway URL (default: $ACP_GATEWAY)");
  if (credentials.includes("key"))
    command.option("--key <file>", "the agent's private key file (default: $ACP_KEY)");
  if (credentials.includes("api-key"))
    command.option("--api-key <key>", "the agent's API key (default: $ACP_API_KEY)");
  if (credentials.includes("key") && credentials.includes("api-key")) {
    command.option(
      "--state-dir <dir>",
      "where the agent keeps its handshakes and handled messages (default: $ACP_STATE_DIR, else the user state directory, ~/.local/state/acp)",
    );
  }
  if (credentials.includes("admin-token")) {
    command.option("--admin-token <token>", "the gateway's admin token (default: $ACP_ADMIN_TOKEN)");
  }
  return command.option("--json", "machine-readable output");
}

/**
 * Turns a failure into the CLI's message and exit code 1: an ACP error prints its code, reason and
 * the first problem's field; with --json its JSON-RPC error object also goes to stdout.
 */
export function failed(err: unknown, json = false): never {
  if (err instanceof CliError) throw err;
  if (err instanceof AcpError) {
    const problem = err.data.problems?.[0];
    const where = problem ? ` (${problem.path || "/"}: ${problem.message})` : "";
    throw new CliError(
      `${err.message} [${err.code} ${err.kind}]${where}`,
      1,
      json ? `${JSON.stringify(err.toJSON(), null, 2)}\n` : undefined,
    );
  }
  if (err instanceof KeyFileError || err instanceof GatewayUnreachableError || err instanceof ConfigError)
    throw new CliError(err.message);
  throw err;
}

/** Runs a command's body, turning its failure into the CLI's message and exit code (`failed`). */
export async function guarded(flags: { json?: boolean }, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    failed(err, flags.json);
  }
}
