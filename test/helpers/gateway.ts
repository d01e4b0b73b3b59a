import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import WebSocket from "ws";
import type { Gateway, ServerFrame } from "../../src/gateway/index.js";
import {
  createSigner,
  generateIdentity,
  type PrivateIdentity,
  publicIdentity,
  type SenderIdentity,
  type Signer,
} from "../../src/protocol/index.js";
import { type DefaultGatewayOptions, startDefaultGateway } from "../../src/server.js";
import { registrationOf } from "../../src/wire/agents.js";

export type { BrokerKind } from "../../src/broker/types.js";

export interface TestAgent {
  identity: PrivateIdentity;
  sender: SenderIdentity;
  signer: Signer;
  apiKey: string;
}

export interface TestGateway {
  gateway: Gateway;
  url: string;
  adminToken: string;
  dataDir: string;
  register(agentId: string, principalId?: string, extra?: Record<string, unknown>): Promise<TestAgent>;
  close(): Promise<void>;
}

export const ADMIN_TOKEN = "acpadm_test-Vb7qK2xN9mR4tW8zL1cF6hJ3pS5dG0yQ";

/** A real gateway on 127.0.0.1:<free port>, embedded (temp data dir) or on a given NATS URL. */
export async function startTestGateway(
  options: Partial<DefaultGatewayOptions> & { natsUrl?: string; dataDir?: string } = {},
): Promise<TestGateway> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "acp-gw-"));
  const { natsUrl, dataDir: _ignored, ...rest } = options;
  const gateway = await startDefaultGateway({
    port: 0,
    data: dataDir,
    ...(natsUrl ? { nats: { servers: natsUrl } } : {}),
    adminToken: ADMIN_TOKEN,
    logger: pino({ level: "silent" }),
    ...rest,
  });
  return {
    gateway,
    url: gateway.url,
    adminToken: ADMIN_TOKEN,
    dataDir,
    register: (agentId, principalId = `principal-of-${agentId}`, extra = {}) =>
      registerTestAgent(gateway.url, agentId, principalId, extra),
    close: async () => {
      await gateway.close();
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function registerTestAgent(
  url: string,
  agentId: string,
  principalId: string,
  extra: Record<string, unknown> = {},
): Promise<TestAgent> {
  const identity = generateIdentity(agentId, principalId);
  const res = await fetch(`${url}/api/v1/agents`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ ...registrationOf(publicIdentity(identity)), ...extra }),
  });
  if (res.status !== 201) throw new Error(`register ${agentId}: ${res.status} ${await res.text()}`);
  const { api_key: apiKey } = (await res.json()) as { api_key: string };
  return {
    identity,
    sender: { agentId, principalId, layers: [0, 1, 2] },
    signer: createSigner(identity),
    apiKey,
  };
}

/**
 * Registers `agentId` as a custodial agent (the gateway holds its keys) over REST, as
 * `acp agent register --custodial` does; its principal is `principal-<agentId>` unless given.
 * Returns the answer: 201 `{agent_id, api_key, …}`, or the refusal.
 */
export function registerCustodial(
  url: string,
  agentId: string,
  options: { principalId?: string; capabilities?: string[]; adminToken?: string } = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  return api(url, "/api/v1/agents", {
    headers: { authorization: `Bearer ${options.adminToken ?? ADMIN_TOKEN}` },
    body: {
      agent_id: agentId,
      principal_id: options.principalId ?? `principal-${agentId}`,
      ...(options.capabilities ? { capabilities: options.capabilities } : {}),
      custodial: true,
    },
  });
}

/** POSTs a body to the gateway as an agent; returns status, headers and parsed JSON. */
export async function api(
  url: string,
  path: string,
  options: {
    method?: string;
    apiKey?: string;
    body?: unknown;
    rawBody?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: options.method ?? (options.body !== undefined || options.rawBody !== undefined ? "POST" : "GET"),
    headers: {
      ...(options.apiKey ? { "x-api-key": options.apiKey } : {}),
      ...(options.body !== undefined || options.rawBody !== undefined
        ? { "content-type": "application/json" }
        : {}),
      ...options.headers,
    },
    ...(options.rawBody !== undefined
      ? { body: options.rawBody }
      : options.body !== undefined
        ? { body: JSON.stringify(options.body) }
        : {}),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

/** A raw WebSocket client with a frame queue, for gateway-level tests. */
export class FrameClient {
  private readonly frames: ServerFrame[] = [];
  private waiters: (() => void)[] = [];
  closed: { code: number; reason: string } | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => {
      this.frames.push(JSON.parse(data.toString()) as ServerFrame);
      for (const wake of this.waiters.splice(0)) wake();
    });
    ws.on("close", (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  static async connect(wsUrl: string, apiKey?: string): Promise<FrameClient> {
    const ws = new WebSocket(wsUrl, apiKey ? { headers: { "x-api-key": apiKey } } : {});
    const client = new FrameClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return client;
  }

  send(frame: unknown): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The next frame matching `predicate` (consumed), waiting up to `timeoutMs`. */
  async next<T extends ServerFrame["type"]>(
    type: T,
    predicate: (frame: Extract<ServerFrame, { type: T }>) => boolean = () => true,
    timeoutMs = 10_000,
  ): Promise<Extract<ServerFrame, { type: T }>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.frames.findIndex(
        (f) => f.type === type && predicate(f as Extract<ServerFrame, { type: T }>),
      );
      if (index >= 0) return this.frames.splice(index, 1)[0] as Extract<ServerFrame, { type: T }>;
      if (this.closed)
        throw new Error(`socket closed (${this.closed.code} ${this.closed.reason}) waiting for ${type}`);
      const remaining = deadline - Date.now();
      if (remaining <= 0)
        throw new Error(
          `timed out waiting for a ${type} frame; have ${JSON.stringify(this.frames.map((f) => f.type))}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Frames received and not yet consumed. */
  pending(): ServerFrame[] {
    return [...this.frames];
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await new Promise<void>((resolve) => {
      this.ws.once("close", () => resolve());
      this.ws.close();
    });
  }
}
