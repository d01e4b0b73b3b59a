/**
 * `acp session log` and `acp session update`, the commands every agent of a session calls over and
 * over, as data (leaf-spec.ts): commander registers them from these tables with the other session
 * commands, and the fast path (fast-path.ts) parses and runs them without loading commander. Also
 * the options every session command shares. No commander here.
 */
import type { SessionEventInput } from "../../coordination/index.js";
import { AGENT_STATUSES, EVENT_TYPES, SEVERITIES } from "../../coordination/vocabulary.js";
import { CliError, printJson, printLine } from "../io.js";
import type { LeafSpec, OptionSpec } from "../leaf-spec.js";

export interface Common {
  root?: string;
  session?: string;
  json?: boolean;
}

/** --root, --session and --json, on every session command so they can be given after its name. */
export const COMMON_OPTIONS = {
  root: {
    flags: "--root <dir>",
    description: "context root (default: $ACP_CONTEXT_DIR, else .claude/agents/context)",
  },
  session: {
    flags: "--session <id>",
    description: "session id (default: $ACP_SESSION_ID, else $CLAUDE_SESSION_ID)",
  },
  json: { flags: "--json", description: "machine-readable output" },
} as const satisfies Record<string, OptionSpec>;

export const SEVERITY_OPTION: OptionSpec = {
  flags: "--severity <level>",
  description: "only findings of this severity",
  choices: SEVERITIES,
};

/** The session the options name; the coordination library is loaded here, when a command runs. */
export async function open(o: Common) {
  const { Session } = await import("../../coordination/session.js");
  return Session.fromEnvironment({ root: o.root, session: o.session });
}

/** Options of `session log` that belong to one event type only. */
const TYPE_ONLY_OPTIONS = {
  severity: "finding",
  artifact: "data",
  description: "data",
  error: "error",
} as const;

export const SESSION_LOG: LeafSpec = {
  name: "log",
  description: "append an event to messages.jsonl",
  arguments: [
    { name: "<agent>", description: "who is speaking (the event's `from`)" },
    { name: "<type>", choices: EVENT_TYPES },
    { name: "[message]" },
  ],
  options: [
    ...Object.values(COMMON_OPTIONS),
    SEVERITY_OPTION,
    {
      flags: "--data <json>",
      description: "a JSON object attached as `data` (a finding's title may go in data.title)",
    },
    { flags: "--artifact <ref>", description: "for type data: the artifact (data/NAME.json)" },
    { flags: "--description <text>", description: "for type data: what the artifact holds" },
    { flags: "--error <details>", description: "for type error: the details" },
  ],
  async run([from, type, message], options) {
    const o = options as Common & Record<string, string | undefined>;
    for (const [option, only] of Object.entries(TYPE_ONLY_OPTIONS)) {
      if (o[option] !== undefined && type !== only) throw new CliError(`--${option}: only for type ${only}`);
    }
    const { parseJsonText } = await import("../../coordination/validate.js");
    const data = o.data === undefined ? undefined : parseJsonText(o.data, "--data");
    if (data !== undefined && (typeof data !== "object" || data === null || Array.isArray(data))) {
      throw new CliError("--data: must be a JSON object");
    }
    const fields = {
      message,
      severity: o.severity,
      data,
      artifact: o.artifact,
      description: o.description,
      error: o.error,
    };
    const input = {
      from,
      type,
      ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)),
    };
    const event = await (await open(o)).log(input as SessionEventInput);
    const { timelineLine } = await import("../../coordination/queries.js");
    if (o.json) printJson(event);
    else printLine(timelineLine(event));
  },
};

export const SESSION_UPDATE: LeafSpec = {
  name: "update",
  description: "change an agent's entry; completed fills completed_at and report_path",
  arguments: [{ name: "<agent>" }],
  options: [
    ...Object.values(COMMON_OPTIONS),
    { flags: "--status <status>", choices: AGENT_STATUSES },
    { flags: "--progress <text>", description: "what the agent is doing" },
    { flags: "--reason <text>", description: "why it is waiting" },
    { flags: "--error <text>", description: "what went wrong" },
    {
      flags: "--depends-on <agents>",
      description: "comma-separated agents it waits for (replaces the list)",
    },
  ],
  async run([agent], options) {
    const o = options as Common & {
      status?: (typeof AGENT_STATUSES)[number];
      progress?: string;
      reason?: string;
      error?: string;
      dependsOn?: string;
    };
    const patch = {
      status: o.status,
      progress: o.progress,
      reason: o.reason,
      error: o.error,
      dependencies:
        o.dependsOn === undefined
          ? undefined
          : o.dependsOn
              .split(",")
              .map((d) => d.trim())
              .filter(Boolean),
    };
    if (Object.values(patch).every((v) => v === undefined)) {
      throw new CliError("nothing to update: give --status, --progress, --reason, --error or --depends-on");
    }
    const entry = await (await open(o)).updateAgent(agent as string, patch);
    const { formatAgent } = await import("../../coordination/format.js");
    if (o.json) printJson(entry);
    else printLine(formatAgent(agent as string, entry));
  },
};
