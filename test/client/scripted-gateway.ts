/**
 * A gateway played by the test, at the socket: a WebSocket server on 127.0.0.1 that speaks the
 * wire protocol (`ready`, `submit` → `submitted`, `new_message`) and routes each submission to its
 * recipient's socket, and an in-memory registry (the agent's `directory`). Everything of the SDK is
 * real: its WebSocket connection, verification, handshake, ledger files and audit log. The test
 * decides what the gateway does with a submission (`onSubmit`: pass, drop, refuse) and hands an
 * agent any delivery it likes (`deliver`), then reads how the agent settled it (`sentBy`, `settled`).
 * Starting one and connecting two agents takes milliseconds, not the seconds of a real gateway.
 */
import { createServer, type IncomingMessage } from "node:http";
import { afterEach, beforeEach } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { type AuditEntry, readAudit } from "../../src/audit/index.js";
import {
  AcpAgent,
  type AcpAgentOptions,
  type AgentDirectory,
  type DegradedInfo,
  type InboundContext,
} from "../../src/client/index.js";
import type { HandshakeEvent } from "../../src/handshake/index.js";
import {
  AcpError,
  type AcpMessage,
  buildNotification,
  buildRequest,
  createSigner,
  generateIdentity,
  headersOf,
  messageKind,
  type PrivateIdentity,
  publicIdentity,
  type SenderIdentity,
  type Signer,
  signMessage,
} from "../../src/protocol/index.js";
import type { AgentView } from "../../src/wire/agents.js";
import type { HandshakeProofView, ServerFrame } from "../../src/wire/api.js";
import { SCHEDULING_ANNOUNCE } from "./fixtures.js";

export type Delivery = Extract<ServerFrame, { type: "new_message" }>;
type ClientFrame = Record<string, unknown> & { type: string };

export interface ScriptedAgent {
  identity: PrivateIdentity;
  sender: SenderIdentity;
  signer: Signer;
  apiKey: string;
}

/** What the gateway does with a submission: relay it (default), keep it, or refuse it with an error. */
export type SubmitDecision = "relay" | "drop" | { code: number; message: string; data?: unknown };

export interface ScriptedGateway {
  readonly url: string;
  /** The registry the agents read (pass it as the agent's `directory`). */
  readonly directory: AgentDirectory & {
    failing: Error | undefined;
    proofs: Map<string, HandshakeProofView>;
  };
  register(agentId: string, principalId?: string): ScriptedAgent;
  /** An AcpAgent on this gateway, its state and audit log under `dir`. */
  agent(who: ScriptedAgent, dir: string, options?: Partial<AcpAgentOptions>): AcpAgent;
  /** Decides about each submission before it is answered (`undefined`: relay everything). */
  onSubmit(decide: ((envelope: AcpMessage, from: string) => SubmitDecision) | undefined): void;
  /** Hands `to` a delivery of `envelope` (from its signer unless `from` says otherwise). */
  deliver(to: string, envelope: object, overrides?: Partial<Delivery>): Delivery;
  /** The frames `agentId` sent (acknowledge, reject, working, submit…), in order. */
  sentBy(agentId: string): ClientFrame[];
  /** Resolves with `agentId`'s `acknowledge` or `reject` of delivery `id`. */
  settled(agentId: string, id: string): Promise<ClientFrame>;
  /** Resolves when `agentId`'s current socket closes. */
  closedSocket(agentId: string): Promise<void>;
  /** Ends `agentId`'s socket, as a gateway that restarts does; the agent reconnects. */
  disconnect(agentId: string): void;
  /** The envelopes `agentId` submitted, in order. */
  submittedBy(agentId: string): AcpMessage[];
  close(): Promise<void>;
}

export async function startScriptedGateway(options: { ackWaitMs?: number } = {}): Promise<ScriptedGateway> {
  const views = new Map<string, AgentView>();
  const agentOfKey = new Map<string, string>();
  const sockets = new Map<string, WebSocket>();
  const sent = new Map<string, ClientFrame[]>();
  const waiting = new Map<string, Delivery[]>();
  const listeners = new Set<() => void>();
  let decide: ((envelope: AcpMessage, from: string) => SubmitDecision) | undefined;

  const directory: ScriptedGateway["directory"] = {
    failing: undefined,
    proofs: new Map(),
    async getAgent(agentId) {
      if (directory.failing) throw directory.failing;
      const view = views.get(agentId);
      if (!view) throw new AcpError("NotFound", `no agent ${agentId}`, { httpStatus: 404 });
      return view;
    },
    async updatePresence() {
      return {};
    },
    async handshakeProof(peer) {
      return directory.proofs.get(peer);
    },
  };

  const push = (to: string, frame: Delivery) => {
    const socket = sockets.get(to);
    if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
    else waiting.set(to, [...(waiting.get(to) ?? []), frame]);
  };

  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server });
  wss.on("connection", (socket: WebSocket, req: IncomingMessage) => {
    const agentId = agentOfKey.get(String(req.headers["x-api-key"]));
    if (!agentId) {
      socket.close(4401, "unknown API key");
      return;
    }
    sockets.set(agentId, socket);
    sent.set(agentId, sent.get(agentId) ?? []);
    socket.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as ClientFrame;
      sent.get(agentId)?.push(frame);
      for (const listener of listeners) listener();
      if (frame.type === "submit") submitted(agentId, socket, frame);
    });
    socket.on("close", () => {
      if (sockets.get(agentId) === socket) sockets.delete(agentId);
    });
    socket.send(
      JSON.stringify({
        type: "ready",
        agentId,
        gateway: "scripted",
        heartbeatMs: 30_000,
        ackWaitMs: options.ackWaitMs ?? 30_000,
        maxAckPending: 256,
      }),
    );
    for (const frame of waiting.get(agentId) ?? []) socket.send(JSON.stringify(frame));
    waiting.delete(agentId);
  });

  function submitted(from: string, socket: WebSocket, frame: ClientFrame): void {
    const envelope = frame.envelope as AcpMessage;
    const headers = headersOf(envelope);
    const decision = decide?.(envelope, from) ?? "relay";
    if (typeof decision === "object") {
      socket.send(JSON.stringify({ type: "error", ref: frame.ref, error: decision }));
      return;
    }
    const id = headers?.["message-id"] ?? "";
    socket.send(
      JSON.stringify({ type: "submitted", ref: frame.ref, id, status: "queued", duplicate: false }),
    );
    if (decision === "relay" && headers) push(String(headers["recipient-id"]), deliveryOf(envelope, from));
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("the scripted gateway has no address");

  const gateway: ScriptedGateway = {
    url: `http://127.0.0.1:${address.port}`,
    directory,
    register(agentId, principalId = `principal-of-${agentId}`) {
      const identity = generateIdentity(agentId, principalId);
      const apiKey = `key-of-${agentId}`;
      const pub = publicIdentity(identity);
      const now = new Date().toISOString();
      views.set(agentId, {
        agent_id: agentId,
        principal_id: principalId,
        signing: pub.signing,
        ...(pub.encryption ? { encryption: pub.encryption } : {}),
        capabilities: [],
        protocol_versions: ["1.0.0"],
        created_at: now,
        presence: {
          state: "online",
          load: 0,
          metrics: { response_time_ms: 0, error_rate: 0 },
          active_tasks: 0,
          tasks: [],
          last_seen: now,
          connections: 1,
        },
      });
      agentOfKey.set(apiKey, agentId);
      return {
        identity,
        apiKey,
        sender: { agentId, principalId, layers: [0, 1] },
        signer: createSigner(identity),
      };
    },
    agent(who, dir, agentOptions = {}) {
      return new AcpAgent({
        gateway: gateway.url,
        identity: who.identity,
        apiKey: who.apiKey,
        directory,
        announce: SCHEDULING_ANNOUNCE,
        audit: { root: `${dir}/audit` },
        state: { root: `${dir}/state` },
        reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
        requestTimeoutMs: 5_000,
        ...agentOptions,
      });
    },
    onSubmit(given) {
      decide = given;
    },
    deliver(to, envelope, overrides = {}) {
      const frame = {
        ...deliveryOf(envelope as AcpMessage, headersOf(envelope as AcpMessage)?.["agent-id"] ?? ""),
        ...overrides,
      };
      push(to, frame);
      return frame;
    },
    sentBy: (agentId) => [...(sent.get(agentId) ?? [])],
    settled: (agentId, id) =>
      new Promise((resolve) => {
        const check = () => {
          const frame = sent
            .get(agentId)
            ?.find((f) => (f.type === "acknowledge" || f.type === "reject") && f.id === id);
          if (!frame) return;
          listeners.delete(check);
          resolve(frame);
        };
        listeners.add(check);
        check();
      }),
    closedSocket: (agentId) =>
      new Promise((resolve) => {
        const socket = sockets.get(agentId);
        if (!socket) resolve();
        else socket.once("close", () => resolve());
      }),
    disconnect(agentId) {
      sockets.get(agentId)?.terminate();
    },
    submittedBy: (agentId) =>
      (sent.get(agentId) ?? []).filter((f) => f.type === "submit").map((f) => f.envelope as AcpMessage),
    async close() {
      for (const socket of wss.clients) socket.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return gateway;
}

/** The `new_message` frame a gateway makes of a submission, as the relay does. */
function deliveryOf(envelope: AcpMessage, from: string): Delivery {
  const kind = messageKind(envelope);
  return {
    type: "new_message",
    id: headersOf(envelope)?.["message-id"] ?? "",
    from,
    kind: kind === "error" ? "response" : kind,
    method: "method" in envelope ? envelope.method : kind,
    attempt: 1,
    priority: "medium",
    envelope: envelope as unknown as Record<string, unknown>,
  };
}

/** Alice and Bob on a scripted gateway, Bob's handshake with Alice established, and what Bob reports. */
export interface ScriptedPair {
  gw: ScriptedGateway;
  a: ScriptedAgent;
  b: ScriptedAgent;
  alice: AcpAgent;
  bob: AcpAgent;
  /** Bob's state and audit root. */
  dir: string;
  /** Bob's `error` events. */
  errors: Error[];
  /** Bob's `degraded` events. */
  degraded: DegradedInfo[];
  /** The notifications Bob's handler was given, with their context. */
  handled: { body: Record<string, unknown>; context: InboundContext }[];
  /** Another agent on the gateway, connected, with `dir`'s state. */
  connect(who: ScriptedAgent, options?: Partial<AcpAgentOptions>): Promise<AcpAgent>;
}

/**
 * Starts a scripted gateway before each test, connects alice and bob (bob's options from
 * `bobOptions`), has alice handshake with bob, and closes everything after the test.
 */
export function useScriptedPair(
  tmp: () => string,
  bobOptions: () => Partial<AcpAgentOptions> = () => ({}),
  gatewayOptions: { ackWaitMs?: number } = {},
): ScriptedPair {
  const pair = {} as ScriptedPair;
  const agents: AcpAgent[] = [];
  beforeEach(async () => {
    const gw = await startScriptedGateway(gatewayOptions);
    const dir = tmp();
    const connect = async (who: ScriptedAgent, options: Partial<AcpAgentOptions> = {}) => {
      const agent = gw.agent(who, dir, options);
      agents.push(agent);
      await agent.connect();
      return agent;
    };
    const a = gw.register("alice-assistant", "alice");
    const b = gw.register("bob-assistant", "bob");
    const errors: Error[] = [];
    const degraded: DegradedInfo[] = [];
    const handled: ScriptedPair["handled"] = [];
    const bob = gw.agent(b, dir, bobOptions());
    agents.push(bob);
    bob.on("error", (err) => errors.push(err));
    bob.on("degraded", (info) => degraded.push(info));
    bob.onNotification((body, context) => {
      handled.push({ body, context });
    });
    await bob.connect();
    const alice = await connect(a);
    const bobEstablished = new Promise<void>((resolve) => {
      const listener = (event: HandshakeEvent) => {
        if (event.peer !== "alice-assistant" || event.state !== "established") return;
        bob.off("handshake", listener);
        resolve();
      };
      bob.on("handshake", listener);
    });
    await alice.handshake("bob-assistant");
    await bobEstablished;
    Object.assign(pair, { gw, a, b, alice, bob, dir, errors, degraded, handled, connect });
  });
  afterEach(async () => {
    await Promise.all(agents.splice(0).map((agent) => agent.close()));
    await pair.gw.close();
  });
  return pair;
}

/** A notification `from` signs to `to`. */
export function notification(
  from: ScriptedAgent,
  to: string,
  body: Record<string, unknown> = { n: 1 },
  now?: Date,
) {
  return signMessage(buildNotification(from.sender, to, body, now ? { now } : {}), from.signer);
}

/** A request `from` signs to `to`. */
export function request(from: ScriptedAgent, to: string, body: Record<string, unknown> = { n: 1 }) {
  return signMessage(buildRequest(from.sender, to, body), from.signer);
}

/** The entries of `agent`'s audit log under `dir` (close the agent first: its writes are then on disk). */
export async function auditEntries(dir: string, agent: string): Promise<AuditEntry[]> {
  const entries: AuditEntry[] = [];
  for await (const { entry } of readAudit({ root: `${dir}/audit`, agent })) entries.push(entry);
  return entries;
}
