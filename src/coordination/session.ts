import { lstat, mkdir, open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { type AgentPatch, applyAgentPatch } from "./agent-patch.js";
import { CoordinationError, type LocatedProblem } from "./errors.js";
import { appendEvent, type LoggedEvent, type LogProblem, readEventLog } from "./event-log.js";
import type { FollowOptions } from "./follow.js";
import { createFileAtomic, writeFileAtomic } from "./fs-atomic.js";
import { type LockOptions, withFileLock } from "./lock.js";
import {
  artifactName,
  artifactRef,
  assertName,
  assertSessionId,
  newSessionId,
  reportRef,
  resolveContextRoot,
  resolveSessionId,
  type SessionPaths,
  sessionPaths,
} from "./paths.js";
import { type EventFilter, matchesFilter, type NamedReport } from "./queries.js";
import { checkFormat } from "./quick-check.js";
import type { AgentEntry, Coordination, Report, SessionEvent, SessionEventInput } from "./schemas.js";
import { withShellTimestampRepaired } from "./report-timestamp.js";
import { lstatSessionEntry, readSessionFile, readSessionText } from "./session-files.js";
import { parseJsonText, validateWith } from "./validate.js";
import type { WaitOptions, WaitResult, WaitSelector } from "./wait.js";
import { type SessionChange, type SessionWatcher, type WatchOptions, watchSession } from "./watch.js";

export interface SessionOptions {
  /** The context root holding session directories (default: `ACP_CONTEXT_DIR`, else `.claude/agents/context`). */
  root?: string;
  lock?: LockOptions;
}

export interface CreateSessionOptions extends SessionOptions {
  id?: string;
  projectType?: string;
  projectPath?: string;
}

export interface ArtifactInfo {
  name: string;
  ref: string;
  bytes: number;
  modified_at: string;
  /** Agents that announced it with a `data` event. */
  created_by: string[];
}

/**
 * One coordination session directory: coordination.json (locked read-modify-write, atomic replace),
 * messages.jsonl (single-write appends), reports/ and data/ (atomic replace). Safe to use from any
 * number of processes at once.
 */
export class Session {
  readonly paths: SessionPaths;

  private constructor(
    readonly root: string,
    readonly id: string,
    private readonly lockOptions: LockOptions | undefined,
  ) {
    this.paths = sessionPaths(root, id);
  }

  /**
   * Creates a session, or adopts a directory made by hand the protocol's way (`mkdir -p
   * …/{reports,data}`, `echo … >> messages.jsonl`) that has no coordination.json yet. A directory that
   * already has one is an existing session: an error.
   */
  static async create(options: CreateSessionOptions = {}): Promise<Session> {
    const id = options.id ?? newSessionId();
    assertSessionId(id);
    const session = new Session(resolveContextRoot(options.root), id, options.lock);
    await mkdir(session.root, { recursive: true });
    const exists = () =>
      new CoordinationError("exists", `session ${id} already exists`, { file: session.paths.dir });
    try {
      // Owner-only: findings and artifacts stay the user's whatever the umask (docs/coordination.md).
      await mkdir(session.paths.dir, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (await session.hasCoordination()) throw exists();
    }
    if (!(await session.complete(options))) throw exists();
    return session;
  }

  /**
   * Opens an existing session. With `adopt`, a session directory without coordination.json (made
   * by hand, the protocol's way) gets one, keeping every file already there; otherwise, and when the
   * directory does not exist, it fails naming the directory.
   */
  static async open(options: SessionOptions & { id: string; adopt?: boolean }): Promise<Session> {
    assertSessionId(options.id);
    const session = new Session(resolveContextRoot(options.root), options.id, options.lock);
    if (await session.hasCoordination()) return session;
    // A link in place of the session directory is no session (docs/security.md, "Coordination files").
    const isDirectory = (await lstatSessionEntry(session.paths.dir))?.isDirectory() === true;
    if (!isDirectory) {
      throw new CoordinationError("not_found", `no session ${options.id} here`, { file: session.paths.dir });
    }
    if (!options.adopt) {
      throw new CoordinationError("not_found", `no session ${options.id} here (coordination.json missing)`, {
        file: session.paths.dir,
      });
    }
    await session.complete({});
    return session;
  }

  /** Opens the session named by `session`, else by ACP_SESSION_ID / CLAUDE_SESSION_ID (adopting it). */
  static async fromEnvironment(
    options: SessionOptions & { session?: string; env?: NodeJS.ProcessEnv } = {},
  ): Promise<Session> {
    const env = options.env ?? process.env;
    return Session.open({
      ...options,
      root: resolveContextRoot(options.root, env),
      id: resolveSessionId(options.session, env),
      adopt: true,
    });
  }

  private async hasCoordination(): Promise<boolean> {
    return (await lstat(this.paths.coordination).catch(() => undefined)) !== undefined;
  }

  /**
   * Adds what the directory lacks: reports/, data/, messages.jsonl and, created atomically only if
   * absent, coordination.json. An adopted session starts at its first logged event. False when
   * another process created coordination.json first.
   */
  private async complete(project: { projectType?: string; projectPath?: string }): Promise<boolean> {
    await Promise.all([
      mkdir(this.paths.reports, { recursive: true }),
      mkdir(this.paths.data, { recursive: true }),
    ]);
    await (await open(this.paths.messages, "a")).close();
    const { events } = await readEventLog(this.paths.messages);
    const firstEvent = events.map((e) => e.event.timestamp).sort((a, b) => Date.parse(a) - Date.parse(b))[0];
    const coordination: Coordination = {
      session_id: this.id,
      started_at: firstEvent ?? new Date().toISOString(),
      ...(project.projectType !== undefined && { project_type: project.projectType }),
      ...(project.projectPath !== undefined && { project_path: project.projectPath }),
      agents: {},
    };
    return createFileAtomic(this.paths.coordination, `${JSON.stringify(coordination, null, 2)}\n`);
  }

  /**
   * Reads and validates coordination.json; refuses a file of another session or one that breaks the format.
   */
  async readCoordination(): Promise<Coordination> {
    const file = this.paths.coordination;
    const text = await readSessionText(this.paths.dir, file);
    if (text === undefined)
      throw new CoordinationError("not_found", "coordination.json is missing", { file });
    const coordination = await checkFormat("CoordinationSchema", parseJsonText(text, file), { file, text });
    if (coordination.session_id !== this.id) {
      throw new CoordinationError(
        "invalid",
        `is ${coordination.session_id} but the directory is ${this.id}`,
        {
          file,
          field: "session_id",
        },
      );
    }
    return coordination;
  }

  /** Read-modify-write under the lock; lands by temp + fsync + rename, so no update is ever lost. */
  async update(mutate: (coordination: Coordination) => void): Promise<Coordination> {
    return withFileLock(
      this.paths.lock,
      async (lock) => {
        const coordination = await this.readCoordination();
        mutate(coordination);
        const checked = await checkFormat("CoordinationSchema", coordination, {
          file: this.paths.coordination,
        });
        if (!(await lock.stillHeld())) {
          throw new CoordinationError("lock_lost", "our lock was broken as stale before we could write", {
            file: this.paths.lock,
          });
        }
        await writeFileAtomic(this.paths.coordination, `${JSON.stringify(checked, null, 2)}\n`);
        return checked;
      },
      this.lockOptions,
    );
  }

  /**
   * Changes one agent's entry under the session lock (status, progress, error, dependencies…), stamping the
   * times a status change implies; returns the entry as written.
   */
  async updateAgent(name: string, patch: AgentPatch): Promise<AgentEntry> {
    assertName(name, "agent");
    for (const dependency of patch.dependencies ?? []) assertName(dependency, "agent");
    const now = new Date().toISOString();
    const updated = await this.update((c) => {
      c.agents[name] = applyAgentPatch(c.agents[name], name, patch, now);
    });
    return updated.agents[name]!;
  }

  /**
   * One agent's entry in coordination.json; a CoordinationError `not_found` when the session has no such
   * agent.
   */
  async agent(name: string): Promise<AgentEntry> {
    const entry = (await this.readCoordination()).agents[name];
    if (entry === undefined) {
      throw new CoordinationError("not_found", `no agent "${name}" in this session`, {
        file: this.paths.coordination,
      });
    }
    return entry;
  }

  /** Appends one event (timestamp filled in when absent) after checking it against its schema. */
  async log(input: SessionEventInput): Promise<SessionEvent> {
    const event = await checkFormat(
      "SessionEventSchema",
      { timestamp: new Date().toISOString(), ...input },
      { file: "event" },
    );
    await appendEvent(this.paths.messages, event);
    return event;
  }

  /**
   * The events of messages.jsonl that match `filter`, and the lines that are not valid events (reported,
   * never thrown).
   */
  async readEvents(filter: EventFilter = {}): Promise<{ events: LoggedEvent[]; problems: LogProblem[] }> {
    const { events, problems } = await readEventLog(this.paths.messages);
    return { events: events.filter((e) => matchesFilter(e.event, filter)), problems };
  }

  /** Writes `reports/{agent}.json`, filling agent_name, timestamp and status (completed) when absent. */
  /** `source` names where the input came from in errors; with its `text`, errors give the line too. */
  async writeReport(
    agent: string,
    input: unknown,
    source: { file: string; text?: string } = { file: "report" },
  ): Promise<Report> {
    assertName(agent, "agent");
    const { ReportInputSchema, ReportSchema } = await import("./schemas.js");
    const given = validateWith(ReportInputSchema, input, source);
    if (given.agent_name !== undefined && given.agent_name !== agent) {
      throw new CoordinationError("invalid", `is "${given.agent_name}" but the report is for "${agent}"`, {
        file: source.file,
        field: "agent_name",
      });
    }
    const report = validateWith(
      ReportSchema,
      {
        ...given,
        agent_name: agent,
        timestamp: given.timestamp ?? new Date().toISOString(),
        status: given.status ?? "completed",
      },
      source,
    );
    await writeFileAtomic(join(this.paths.dir, reportRef(agent)), `${JSON.stringify(report, null, 2)}\n`);
    return report;
  }

  /**
   * The agent's report. One written with the protocol's quoted-heredoc recipe, whose timestamp is
   * the unexpanded `$(date …)`, is read with the file's modification time; `onWarning` is told.
   */
  async readReport(
    agent: string,
    options: { onWarning?: (warning: LocatedProblem) => void } = {},
  ): Promise<Report> {
    assertName(agent, "agent");
    const file = join(this.paths.dir, reportRef(agent));
    const read = await readSessionFile(this.paths.dir, file);
    if (read === undefined)
      throw new CoordinationError("not_found", `agent "${agent}" has written no report`, { file });
    const { value, warning } = withShellTimestampRepaired(parseJsonText(read.text, file), read.modifiedAt);
    const report = validateWith((await import("./schemas.js")).ReportSchema, value, {
      file,
      text: read.text,
    });
    if (warning) options.onWarning?.(warning);
    return report;
  }

  /**
   * Every report (or those of agents whose name ends with `suffix`), sorted by agent name. With
   * `onInvalid`, a report that does not parse or validate is skipped and handed to it, so one bad
   * file does not hide every other report; without, it is an error.
   */
  async readReports(
    options: { suffix?: string; onInvalid?: (err: CoordinationError) => void } = {},
  ): Promise<NamedReport[]> {
    const agents = (await jsonNames(this.paths.reports)).filter((a) => a.endsWith(options.suffix ?? ""));
    const read = await Promise.all(
      agents.map(async (agent) => {
        try {
          const warnings: LocatedProblem[] = [];
          const report = await this.readReport(agent, { onWarning: (w) => warnings.push(w) });
          return [{ agent, report, ...(warnings.length > 0 && { warnings }) }];
        } catch (err) {
          if (options.onInvalid === undefined || !(err instanceof CoordinationError)) throw err;
          // A name that is not a valid agent name (`reports/My Agent.json`) is skipped the same way.
          options.onInvalid(err);
          return [];
        }
      }),
    );
    return read.flat();
  }

  /** The agent's report if it wrote one that reads back; undefined otherwise (for recovery hints). */
  async reportIfAny(agent: string): Promise<Report | undefined> {
    return this.readReport(agent).catch(() => undefined);
  }

  /** Writes `data/{name}.json`; with `from`, announces it with a `data` event as the protocol does. */
  async putArtifact(
    ref: string,
    value: unknown,
    options: { from?: string; description?: string } = {},
  ): Promise<string> {
    const name = artifactName(ref);
    if (options.from !== undefined) assertName(options.from, "agent");
    await writeFileAtomic(join(this.paths.data, `${name}.json`), `${JSON.stringify(value, null, 2)}\n`);
    if (options.from !== undefined) {
      await this.log({
        from: options.from,
        type: "data",
        artifact: artifactRef(name),
        ...(options.description !== undefined && { description: options.description }),
      });
    }
    return artifactRef(name);
  }

  /** An artifact's JSON from data/; a CoordinationError `not_found` when there is none of that name. */
  async getArtifact(ref: string): Promise<unknown> {
    const file = join(this.paths.data, `${artifactName(ref)}.json`);
    const text = await readSessionText(this.paths.dir, file);
    if (text === undefined) throw new CoordinationError("not_found", `no artifact "${ref}"`, { file });
    return parseJsonText(text, file);
  }

  /** The artifacts in data/: regular files only (a link there is never measured or dated). */
  async listArtifacts(): Promise<ArtifactInfo[]> {
    const names = await jsonNames(this.paths.data);
    const { events } = await this.readEvents({ type: "data" });
    const listed = await Promise.all(
      names.map(async (name) => {
        const info = await lstatSessionEntry(join(this.paths.data, `${name}.json`));
        if (!info?.isFile()) return [];
        const ref = artifactRef(name);
        const creators = events.flatMap(({ event }) =>
          event.type === "data" && artifactName(event.artifact) === name ? [event.from] : [],
        );
        return [
          {
            name,
            ref,
            bytes: info.size,
            modified_at: info.mtime.toISOString(),
            created_by: [...new Set(creators)],
          },
        ];
      }),
    );
    return listed.flat();
  }

  /** Calls `onChange` whenever coordination.json, the event log, reports/ or data/ change. */
  watch(onChange: (changes: SessionChange[]) => void, options?: WatchOptions): SessionWatcher {
    return watchSession(this.paths, onChange, options);
  }

  /** Delivers each event (matching the filter) once, live, until `options.signal` aborts. */
  async follow(onEvent: (event: LoggedEvent) => void, options?: FollowOptions): Promise<void> {
    // Loaded on use, like waitFor's: the commands agents run in loops need neither.
    const { followEvents } = await import("./follow.js");
    return followEvents(this, onEvent, options);
  }

  /** Blocks until the selected agents have completed, or one has failed, or the timeout passes. */
  async waitFor(selector: WaitSelector, options?: WaitOptions): Promise<WaitResult> {
    const { waitForAgents } = await import("./wait.js");
    return waitForAgents(this, selector, options);
  }
}

/** The `*.json` names in a directory, without the suffix; temp files (dot-prefixed) are left out. */
async function jsonNames(dir: string): Promise<string[]> {
  const files = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return [] as string[];
    throw err;
  });
  return files
    .filter((f) => f.endsWith(".json") && !f.startsWith("."))
    .map((f) => f.slice(0, -".json".length))
    .sort();
}
