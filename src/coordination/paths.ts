import { join, resolve } from "node:path";
import { CoordinationError } from "./errors.js";
import { NAME_PATTERN, SESSION_ID_PATTERN } from "./vocabulary.js";

/**
 * Where sessions live unless `--root` or `ACP_CONTEXT_DIR` says otherwise (relative to the cwd): the
 * coordination protocol's own path, so agents written to it and this toolkit find the same sessions.
 */
export const DEFAULT_CONTEXT_ROOT = ".claude/agents/context";
export const CONTEXT_ROOT_ENV = "ACP_CONTEXT_DIR";
/** Session id variables, in order of precedence: ours, then the coordination protocol's own. */
export const SESSION_ID_ENVS = ["ACP_SESSION_ID", "CLAUDE_SESSION_ID"] as const;

export function newSessionId(): string {
  return crypto.randomUUID().toLowerCase();
}

export function resolveContextRoot(root?: string, env: NodeJS.ProcessEnv = process.env): string {
  // An empty ACP_CONTEXT_DIR is unset, not "the current directory".
  return resolve(root ?? (env[CONTEXT_ROOT_ENV] || DEFAULT_CONTEXT_ROOT));
}

/** The session id from `--session`, else `ACP_SESSION_ID`, else `CLAUDE_SESSION_ID`; validated. */
export function resolveSessionId(session?: string, env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = SESSION_ID_ENVS.map((name) => [name, env[name]] as const).find(([, v]) => v);
  const [source, id] = session !== undefined ? (["--session", session] as const) : (fromEnv ?? []);
  if (id === undefined || source === undefined) {
    throw new CoordinationError(
      "not_found",
      `no session given: pass --session ID or set ${SESSION_ID_ENVS.join(" or ")} (see \`acp session init --export\`)`,
    );
  }
  assertSessionId(id, source);
  return id;
}

export function assertSessionId(id: string, source = "session id"): void {
  if (!SESSION_ID_PATTERN.test(id)) {
    throw new CoordinationError(
      "invalid",
      `${JSON.stringify(id)} is not a usable session id (1-255 characters with no '/', '\\', '..' or control characters)`,
      { field: source },
    );
  }
}

/** Agent names become file names: reject anything that could escape the session directory. */
export function assertName(name: string, what: "agent" | "artifact"): void {
  if (!NAME_PATTERN.test(name)) {
    throw new CoordinationError(
      "invalid",
      `"${name}" is not a valid ${what} name (1-128 letters, digits, '.', '_' or '-', starting with a letter or digit)`,
      { field: what },
    );
  }
}

/** `vulnerabilities`, `vulnerabilities.json` and `data/vulnerabilities.json` all name one artifact. */
export function artifactName(ref: string): string {
  const name = ref.replace(/^data\//, "").replace(/\.json$/, "");
  assertName(name, "artifact");
  return name;
}

export function artifactRef(name: string): string {
  return `data/${name}.json`;
}

export function reportRef(agent: string): string {
  return `reports/${agent}.json`;
}

/** The coordination protocol's layout of one session directory. */
export interface SessionPaths {
  dir: string;
  coordination: string;
  lock: string;
  messages: string;
  reports: string;
  data: string;
  /** Output of agents started by the coordinator (`acp session run`): `logs/{agent}.log`. */
  logs: string;
}

export function sessionPaths(root: string, id: string): SessionPaths {
  const dir = join(root, id);
  return {
    dir,
    coordination: join(dir, "coordination.json"),
    lock: join(dir, "coordination.json.lock"),
    messages: join(dir, "messages.jsonl"),
    reports: join(dir, "reports"),
    data: join(dir, "data"),
    logs: join(dir, "logs"),
  };
}
