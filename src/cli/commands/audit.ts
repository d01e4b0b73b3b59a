import type { Command } from "commander";
import {
  type AuditFilter,
  AuditLogError,
  type AuditRecord,
  type AuditVerification,
  followAudit,
  listAuditAgents,
  readAudit,
  readAuditHead,
  resolveAuditRoot,
  verifyAuditRoot,
} from "../../audit/index.js";
import { CliError, printJson, printLine } from "../io.js";

const ROOT_HELP = "audit root directory (default: $ACP_AUDIT_DIR, else ./.acp/audit)";
const TYPES = ["request", "response", "notification", "handoff", "command"];

interface CommonOptions {
  root?: string;
  agent?: string;
  json?: boolean;
}

interface FilterOptions extends CommonOptions {
  since?: string;
  until?: string;
  peer?: string;
  type?: string;
}

export function registerAudit(program: Command): void {
  const audit = program
    .command("audit")
    .description("review and check agents' tamper-evident audit logs (<root>/<agent>/YYYY-MM.jsonl)");

  audit
    .command("verify")
    .description("check the hash chain; exit 1 naming the first broken or missing line")
    .option("--root <dir>", ROOT_HELP)
    .option("--agent <id>", "one agent's log (default: every agent under the root)")
    .option("--json", "machine-readable result")
    .action((options: CommonOptions) => run(() => verifyCommand(options)));

  addFilterOptions(
    audit
      .command("show")
      .description("a timeline of exchanges for a principal to review")
      .option("--root <dir>", ROOT_HELP)
      .option("--agent <id>", "one agent's log (default: every agent under the root, merged by time)"),
  )
    .option("--json", "print a JSON array of {agent, file, line, entry}")
    .action((options: FilterOptions) => run(() => showCommand(options)));

  addFilterOptions(
    audit
      .command("tail")
      .description("the last entries of an agent's log; with -f, keep printing new ones (Ctrl-C to stop)")
      .option("--root <dir>", ROOT_HELP)
      .option("--agent <id>", "the agent (may be left out when the root holds only one)"),
  )
    .option("-n, --lines <count>", "how many past entries to print first", "10")
    .option("-f, --follow", "follow the log live, across month files")
    .option("--json", "one JSON record per line")
    .action((options: FilterOptions & { lines: string; follow?: boolean }) =>
      run(() => tailCommand(options)),
    );
}

function addFilterOptions(command: Command): Command {
  return command
    .option(
      "--since <date>",
      "from this time on: ISO 8601 (2026-02-01, 2026-02-01T09:00:00Z) or a duration ago (30m, 12h, 7d)",
    )
    .option("--until <date>", "up to this time, same forms as --since")
    .option("--peer <id>", "only exchanges with this agent or principal")
    .option("--type <type>", `only this message type: ${TYPES.join(", ")}`);
}

/** Library errors about the log (a missing agent, a corrupt line) become plain CLI errors. */
async function run(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (err instanceof AuditLogError) throw new CliError(err.message);
    throw err;
  }
}

async function verifyCommand(options: CommonOptions): Promise<void> {
  const root = resolveAuditRoot(options.root);
  const progress = process.stderr.isTTY
    ? (file: string, entries: number) => process.stderr.write(`checked ${file} (${entries} entries so far)\n`)
    : undefined;
  const results = await verifyAuditRoot({ root, agent: options.agent, onProgress: progress });
  if (results.length === 0) throw new CliError(`no audit logs under ${root}`);
  const ok = results.every((result) => result.ok);
  if (options.json) printJson({ ok, root, agents: results });
  else for (const result of results) printLine(describeVerification(result));
  const broken = results.find((result) => !result.ok)?.problem;
  if (broken) throw new CliError(`audit log broken at ${broken.file} line ${broken.line}: ${broken.reason}`);
}

function describeVerification(result: AuditVerification): string {
  const files = `${result.files} month file${result.files === 1 ? "" : "s"}`;
  if (!result.ok && result.problem) {
    const { file, line, reason, message } = result.problem;
    return `${result.agent}: BROKEN at ${file} line ${line}: ${reason}: ${message} (${result.entries} entries intact before it)`;
  }
  const head = result.head ? `; head seq ${result.head.seq}, hash ${result.head.hash}` : "";
  const torn = result.tornTail
    ? `\n  note: ${result.tornTail.file} line ${result.tornTail.line} is an incomplete line (${result.tornTail.bytes} bytes) left by a crash; it is not an entry and is moved aside when the log is next opened`
    : "";
  return `${result.agent}: intact, ${result.entries} entries in ${files}${head}${torn}`;
}

async function showCommand(options: FilterOptions): Promise<void> {
  const filter = parseFilter(options);
  if (options.agent === undefined && (await listAuditAgents(options.root)).length === 0) {
    throw new CliError(`no audit logs under ${resolveAuditRoot(options.root)}`);
  }
  const records: AuditRecord[] = [];
  for await (const record of readAudit({ root: options.root, agent: options.agent, ...filter })) {
    if (options.json) records.push(record);
    else printLine(formatRecord(record, options.agent === undefined));
  }
  if (options.json) printJson(records);
}

async function tailCommand(options: FilterOptions & { lines: string; follow?: boolean }): Promise<void> {
  const count = Number(options.lines);
  if (!Number.isInteger(count) || count < 0) {
    throw new CliError(`--lines: expected a non-negative integer, got ${JSON.stringify(options.lines)}`);
  }
  const agent = options.agent ?? (await onlyAgent(options.root));
  const filter = parseFilter(options);
  const print = (record: AuditRecord): void => {
    printLine(options.json ? JSON.stringify(record) : formatRecord(record, false));
  };
  // Everything up to the current head is history; following resumes right after it, so nothing is lost.
  const headSeq = (await readAuditHead({ root: options.root, agent }))?.seq ?? 0;
  const last: AuditRecord[] = [];
  for await (const record of readAudit({ root: options.root, agent, ...filter })) {
    if (record.entry.seq > headSeq) break;
    last.push(record);
    if (last.length > count) last.shift();
  }
  for (const record of last) print(record);
  if (!options.follow) return;
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    for await (const record of followAudit({
      root: options.root,
      agent,
      ...filter,
      afterSeq: headSeq,
      signal: stop.signal,
      pollIntervalMs: 500,
    })) {
      print(record);
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

async function onlyAgent(root: string | undefined): Promise<string> {
  const agents = await listAuditAgents(root);
  if (agents.length === 1) return agents[0]!;
  const where = resolveAuditRoot(root);
  if (agents.length === 0) throw new CliError(`no audit logs under ${where}`);
  throw new CliError(`--agent: ${where} holds several agents' logs (${agents.join(", ")}); name one`);
}

function parseFilter(options: FilterOptions): AuditFilter {
  if (options.type !== undefined && !TYPES.includes(options.type)) {
    throw new CliError(`--type: expected one of ${TYPES.join(", ")}, got ${JSON.stringify(options.type)}`);
  }
  return {
    since: parseWhen(options.since, "--since"),
    until: parseWhen(options.until, "--until"),
    peer: options.peer,
    type: options.type,
  };
}

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

function parseWhen(value: string | undefined, flag: string): Date | undefined {
  if (value === undefined) return undefined;
  const ago = /^(\d+)([smhdw])$/.exec(value);
  if (ago) return new Date(Date.now() - Number(ago[1]) * UNIT_MS[ago[2]!]!);
  const time = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value)
    ? Date.parse(value)
    : Number.NaN;
  if (Number.isNaN(time)) {
    throw new CliError(
      `${flag}: expected an ISO 8601 date (2026-02-01, 2026-02-01T09:00:00Z) or a duration ago (30m, 12h, 7d), got ${JSON.stringify(value)}`,
    );
  }
  return new Date(time);
}

/** `2026-02-14 12:05:00Z  → agent-beta (principal-b)  request  summary…`, one line per entry. */
function formatRecord(record: AuditRecord, withOwner: boolean): string {
  const { entry } = record;
  const time = entry.ts.replace("T", " ").replace(/\.\d+(?=Z|[+-])/, "");
  const peer = entry.direction === "sent" ? entry.to : entry.from;
  const arrow = entry.direction === "sent" ? "→" : "←";
  const owner = withOwner ? `${record.agent} ` : "";
  const who = `${owner}${arrow} ${peer.agent}${peer.principal ? ` (${peer.principal})` : ""}`;
  // Handshake steps read as their name (announce, verify, capabilities, trust), other methods without `agent.`.
  const kind = entry.step ?? entry.method.replace(/^agent\./, "");
  const marks = [entry.encrypted ? "[encrypted]" : "", entry.error ? `[error ${entry.error.code}]` : ""]
    .filter(Boolean)
    .join(" ");
  return [
    time,
    who.padEnd(withOwner ? 44 : 32),
    kind.padEnd(13),
    [marks, entry.summary].filter(Boolean).join(" "),
  ]
    .map(printable)
    .join("  ");
}

/** Entries are data from other agents: never let control characters reach the terminal. */
function printable(text: string): string {
  return text.replace(/\p{Cc}/gu, "\uFFFD");
}
