import { readFileSync } from "node:fs";
import { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import {
  connect,
  credsAuthenticator,
  type NatsConnection,
  type NodeConnectionOptions,
  TimeoutError,
} from "@nats-io/transport-node";
import { BrokerError } from "../errors.js";
import type { NatsConnectionOptions } from "../types.js";

/**
 * Connects with the broker's options. The connection reconnects forever: a NATS restart makes
 * operations fail (`unavailable`) while it is down, and everything resumes when it is back.
 */
export async function connectNats(options: NatsConnectionOptions): Promise<NatsConnection> {
  const servers = Array.isArray(options.servers) ? options.servers : [options.servers];
  if (servers.length === 0 || servers.some((server) => typeof server !== "string" || server.length === 0)) {
    throw new BrokerError("invalid_argument", "nats.servers must name at least one server URL", {
      field: "nats.servers",
    });
  }
  const connectOptions: NodeConnectionOptions = {
    servers,
    name: options.name ?? "acp-broker",
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    // Otherwise every request captures two stack traces up front, a fifth of the broker's CPU.
    noAsyncTraces: true,
  };
  if (options.user !== undefined) connectOptions.user = options.user;
  if (options.pass !== undefined) connectOptions.pass = options.pass;
  if (options.token !== undefined) connectOptions.token = options.token;
  if (options.credsFile !== undefined) {
    let creds: Uint8Array;
    try {
      creds = readFileSync(options.credsFile);
    } catch (error) {
      throw new BrokerError("invalid_argument", `nats.credsFile: cannot read ${options.credsFile}`, {
        field: "nats.credsFile",
        cause: error,
      });
    }
    connectOptions.authenticator = credsAuthenticator(creds);
  }
  if (options.tls === true) connectOptions.tls = {};
  else if (typeof options.tls === "object") connectOptions.tls = { ...options.tls };
  try {
    return await connect(connectOptions);
  } catch (error) {
    // The message names the server and the reason (refused, authorization violation, TLS required…).
    const where = servers.map(withoutCredentials).join(", ");
    throw new BrokerError("unavailable", `cannot connect to NATS at ${where}: ${String(error)}`, {
      cause: error,
    });
  }
}

/** `nats://user:secret@host` → `nats://***@host`: error messages end up in logs. */
function withoutCredentials(server: string): string {
  return server.replace(/\/\/[^/@]*@/, "//***@");
}

/** What the NATS client keeps of its socket: `protocol.transport.socket` (transport-node). */
function socketOf(nc: NatsConnection): Socket | undefined {
  const socket = (nc as unknown as { protocol?: { transport?: { socket?: unknown } } }).protocol?.transport
    ?.socket;
  return socket instanceof Socket ? socket : undefined;
}

/**
 * Holds the connection's socket writes until the end of the current event-loop turn, so what one turn
 * publishes (envelopes, index entries, status records, acks) leaves in one write. The client flushes
 * at every microtask checkpoint, which on a busy gateway is one syscall, and one read on the server,
 * per publish. Only the moment of the write changes: the turn's publishes are all sent before the
 * next turn's I/O is polled, and everything that waits for an answer still waits for it.
 */
export class TurnWrites {
  private held: Socket | null = null;

  constructor(private readonly nc: NatsConnection) {}

  hold(): void {
    if (this.held) return;
    const socket = socketOf(this.nc);
    if (!socket || socket.destroyed) return;
    this.held = socket;
    socket.cork();
    setImmediate(() => {
      this.held = null;
      socket.uncork();
    });
  }
}

/** How long set-up goes on after its requests time out, and the pause before each new try. */
const SETUP_PATIENCE_MS = 30_000;
const SETUP_RETRY_PAUSE_MS = 500;

/**
 * Runs `setUp` (idempotent: it creates or finds streams and buckets) again while its JetStream
 * requests time out, for up to SETUP_PATIENCE_MS. A replicated stream's create waits for its
 * group to elect a leader, which on a cluster just formed, or busy, can outlast one request's
 * timeout; anything else fails at once.
 */
export async function patientSetUp<T>(
  setUp: () => Promise<T>,
  warn: (message: string) => void,
  patienceMs = SETUP_PATIENCE_MS,
): Promise<T> {
  const deadline = Date.now() + patienceMs;
  for (;;) {
    try {
      return await setUp();
    } catch (error) {
      if (!(error instanceof TimeoutError) || Date.now() + SETUP_RETRY_PAUSE_MS >= deadline) throw error;
      warn(`setting up JetStream timed out; trying again: ${String(error)}`);
      await sleep(SETUP_RETRY_PAUSE_MS);
    }
  }
}
