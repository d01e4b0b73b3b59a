import { copyFile, mkdir, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

/** The per-working-directory root older versions used by default; read once, to move its state. */
export const LEGACY_STATE_ROOT = "./.acp/state";

/** What an agent keeps under `<root>/<agent-id>/`. */
const STATE_FILES = ["handshakes.json", "handled.log"];

/**
 * Where agents keep their state: the root given, else `$ACP_STATE_DIR`, else the user's state
 * directory — `$XDG_STATE_HOME/acp`, by default `~/.local/state/acp` (Linux and other Unixes),
 * `~/Library/Application Support/acp/state` (macOS), `%LOCALAPPDATA%\acp\state` (Windows). One
 * place per agent, whatever directory a process of it starts in.
 */
export function resolveStateRoot(root?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (root !== undefined) return resolve(root);
  if (env.ACP_STATE_DIR) return resolve(env.ACP_STATE_DIR);
  return userStateRoot(env);
}

function userStateRoot(env: NodeJS.ProcessEnv): string {
  if (process.platform === "win32") {
    return join(env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local"), "acp", "state");
  }
  if (process.platform === "darwin") return join(homedir(), "Library", "Application Support", "acp", "state");
  const xdg = env.XDG_STATE_HOME;
  // The XDG spec: a relative XDG_STATE_HOME is invalid and must be ignored.
  return join(xdg?.startsWith("/") ? xdg : join(homedir(), ".local", "state"), "acp");
}

/**
 * An agent whose state is still in the old per-working-directory place (`./.acp/state/<agent-id>`)
 * and not yet in `root`: its files are copied over (the old ones are left as they are, another
 * process may still use them). Returns the directory copied from, if any.
 */
export async function adoptLegacyState(
  root: string,
  agentId: string,
  legacyRoot = LEGACY_STATE_ROOT,
): Promise<string | undefined> {
  const from = resolve(legacyRoot, agentId);
  const to = join(root, agentId);
  if (from === to || (await exists(to)) || !(await exists(from))) return undefined;
  await mkdir(to, { recursive: true, mode: 0o700 });
  let copied = false;
  for (const file of STATE_FILES) {
    if (!(await exists(join(from, file)))) continue;
    await copyFile(join(from, file), join(to, file));
    copied = true;
  }
  return copied ? from : undefined;
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}
