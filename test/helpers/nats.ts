/**
 * A real `nats-server -js` per test: free port on 127.0.0.1, its own store directory, stopped and
 * removed when the test ends. Missing `nats-server`: tests FAIL when CI=true, otherwise they are
 * skipped with a visible note (install with `apt-get install nats-server`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterEach, describe, it } from "vitest";
import { freePort, retryOnPortClash } from "./ports.js";

export interface NatsServerOptions {
  user?: string;
  pass?: string;
  token?: string;
  /** Require TLS with this certificate and key (PEM files). */
  tls?: { certFile: string; keyFile: string };
  /** Server configuration (nats-server's format), e.g. accounts with JetStream limits; given with `-c`. */
  config?: string;
}

export interface NatsServer {
  /** `nats://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  /** The running server's process id (changes on restart), e.g. to lower its file size limit. */
  readonly pid: number;
  /** SIGTERM (graceful) by default; SIGKILL to simulate a crash. */
  stop(signal?: "SIGTERM" | "SIGKILL"): Promise<void>;
  /** Starts again on the same port with the same store. */
  restart(): Promise<void>;
}

/** Debian installs it in /usr/sbin, which is not on every user's PATH. */
function findNatsServer(): string | null {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/usr/local/sbin", "/sbin"];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, "nats-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export const natsServerPath = findNatsServer();

const MISSING = "nats-server is not installed (apt-get install nats-server): the NATS broker tests need it";

/** `describe` that runs only with nats-server available (and fails in CI without it). */
export function describeWithNats(name: string, body: () => void): void {
  if (natsServerPath) {
    describe(name, body);
  } else if (process.env.CI === "true") {
    describe(name, () => {
      it("requires nats-server", () => {
        throw new Error(`${MISSING}; CI must install it`);
      });
    });
  } else {
    console.warn(`\n  NOTE: skipping "${name}": ${MISSING}\n`);
    describe.skip(name, body);
  }
}

function launch(binary: string, args: string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`nats-server did not become ready within 10 s:\n${log}`));
    }, 10_000);
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      log += chunk;
      if (log.includes("Server is ready")) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`nats-server exited early (code ${code}, signal ${signal}):\n${log}`));
    });
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

function stopChild(child: ChildProcess, signal: "SIGTERM" | "SIGKILL"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** Starts a server now; the caller stops it (prefer `useNatsServer`, which cleans up). */
export async function startNatsServer(
  options: NatsServerOptions = {},
): Promise<NatsServer & { dispose(): Promise<void> }> {
  if (!natsServerPath) throw new Error(MISSING);
  const binary = natsServerPath;
  const storeDir = mkdtempSync(join(tmpdir(), "acp-nats-"));
  let port = 0;
  let args: string[] = [];
  let child = await retryOnPortClash(async () => {
    port = await freePort();
    args = ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir];
    if (options.user !== undefined) args.push("--user", options.user, "--pass", options.pass ?? "");
    if (options.token !== undefined) args.push("--auth", options.token);
    if (options.tls) args.push("--tls", "--tlscert", options.tls.certFile, "--tlskey", options.tls.keyFile);
    if (options.config !== undefined) {
      const file = `${storeDir}.conf`;
      writeFileSync(file, options.config);
      args.push("-c", file);
    }
    return launch(binary, args);
  });
  running.add(child);
  const stop = async (signal: "SIGTERM" | "SIGKILL" = "SIGTERM") => {
    await stopChild(child, signal);
    running.delete(child);
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    get pid() {
      return child.pid as number;
    },
    stop,
    async restart() {
      await stop();
      child = await launch(binary, args);
      running.add(child);
    },
    async dispose() {
      await stop("SIGKILL");
      rmSync(storeDir, { recursive: true, force: true });
      rmSync(`${storeDir}.conf`, { force: true });
    },
  };
}

/** Returns a starter; every server it started is killed and its store removed after the test. */
export function useNatsServer(): (options?: NatsServerOptions) => Promise<NatsServer> {
  const started: Array<{ dispose(): Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((server) => server.dispose()));
  });
  return async (options) => {
    const server = await startNatsServer(options);
    started.push(server);
    return server;
  };
}
