import { EventEmitter } from "node:events";
import type { HandshakeState, PeerHandshake } from "../handshake/index.js";
import { readIdentityFile, TrustLedger, type TrustRecord } from "../identity/index.js";
import {
  AcpError,
  buildHandoff,
  buildNotification,
  buildRequest,
  HandoffBody,
  type PrivateIdentity,
  problemsOf,
} from "../protocol/index.js";
import { PresenceUpdate } from "../wire/api.js";
import type { VersionDeprecation } from "../wire/versions.js";
import { AgentCore, type Emit, type Handlers } from "./agent-core.js";
import { AgentAudit } from "./audit.js";
import { type AgentConnection, type ConnectionEvents, GatewayConnection } from "./connection.js";
import { SdkError } from "./errors.js";
import { HandshakeStore } from "./handshake-store.js";
import { GatewayHealth } from "./health.js";
import { GatewayClient, normaliseGatewayUrl } from "./http.js";
import { Inbound } from "./inbound.js";
import { DeliveryLedger } from "./ledger.js";
import {
  checkBody,
  checkOptions,
  checkPeer,
  agentCoreSettings,
  invalidOption,
  maxAckPendingOf,
} from "./options.js";
import { adoptLegacyState, resolveStateRoot } from "./state-dir.js";
import {
  type BodyOf,
  type BodySchema,
  isRequestSchemas,
  type RequestSchemas,
  type TypedRequestHandler,
  validatedHandler,
} from "./typed-handler.js";
import type {
  AcpAgentOptions,
  AgentDirectory,
  AgentEvents,
  AgentWarning,
  HandoffHandler,
  HandoffOptions,
  NotificationHandler,
  NotifyOptions,
  PresenceInput,
  RequestHandler,
  RequestOptions,
} from "./types.js";

const DEFAULT_TIMEOUT_MS = 30_000;
const DRAIN_ON_CLOSE_MS = 10_000;

/**
 * An ACP agent connected to a gateway: it handshakes with peers, sends signed (optionally
 * end-to-end encrypted) requests, notifications and handoffs, answers requests through handlers,
 * verifies everything it receives, keeps trust and an audit log, and survives reconnects.
 * See docs/sdk.md.
 *
 * @example Two agents on a running gateway, one asking and one answering (examples/quickstart.ts,
 * which `npm run check` type-checks; test/architecture/examples.test.ts keeps this copy identical)
 * ```ts
 * import { AcpAgent } from "acp-kit/client";
 *
 * // Keys from `acp keygen --agent-id agent-bob --principal-id bob` (and alice's), API keys from
 * // `acp agent register`.
 * const bob = new AcpAgent({
 *   gateway: "http://127.0.0.1:8080",
 *   keyFile: "bob.key",
 *   apiKey: process.env.BOB_API_KEY!,
 * });
 * bob.onRequest("agent.request", (body, ctx) => ({ echo: body, for: ctx.principalId }));
 * await bob.connect(); // handlers first: the offline queue is delivered right away
 *
 * const alice = new AcpAgent({
 *   gateway: "http://127.0.0.1:8080",
 *   keyFile: "alice.key",
 *   apiKey: process.env.ALICE_API_KEY!,
 * });
 * await alice.connect();
 * const answer = await alice.request("agent-bob", { action: "ping" }); // handshakes first if needed
 * console.log(answer); // { echo: { action: "ping" }, for: "alice" }: bob answered, for alice's principal
 *
 * await alice.close();
 * await bob.close();
 * ```
 */
export class AcpAgent {
  readonly gateway: string;
  private readonly emitter = new EventEmitter();
  private readonly handlers: Handlers = {
    byMethod: new Map(),
    anyRequest: undefined,
    handoff: undefined,
    notifications: [],
  };
  private readonly trustLedger: TrustLedger;
  private readonly http: AgentDirectory;
  private core: AgentCore | undefined;
  private inbound: Inbound | undefined;
  private state: "new" | "connecting" | "connected" | "closed" = "new";

  constructor(private readonly options: AcpAgentOptions) {
    this.gateway = normaliseGatewayUrl(options.gateway);
    checkOptions(options);
    this.http = options.directory ?? new GatewayClient({ gateway: this.gateway, apiKey: options.apiKey });
    this.trustLedger = new TrustLedger(options.trust);
    this.emitter.setMaxListeners(0);
  }

  /** The agent id (known once the identity is loaded: at once with `identity`, after connect with `keyFile`). */
  get agentId(): string | undefined {
    return this.core?.self.agentId ?? this.options.identity?.agentId;
  }

  /** Whether the WebSocket to the gateway is open now (false while it reconnects, and after close). */
  get connected(): boolean {
    return this.core?.connection.isReady ?? false;
  }

  /** Where this agent's audit log is written, once connected (undefined when disabled). */
  get auditDirectory(): string | undefined {
    return this.core?.audit?.directory;
  }

  /** Loads the identity, opens the audit log, and connects the WebSocket; resolves on the gateway's `ready`. */
  async connect(): Promise<void> {
    if (this.state !== "new")
      throw new SdkError("AlreadyConnected", `connect() called on a ${this.state} agent`);
    this.state = "connecting";
    let audit: AgentAudit | undefined;
    try {
      const identity = this.options.identity ?? (await readIdentityFile(this.options.keyFile!));
      if (this.options.audit !== false) {
        audit = await AgentAudit.open(
          { agent: identity.agentId, principal: identity.principalId },
          this.options.audit ?? {},
          (err) => this.emit("error", err),
        );
      }
      const stateRoot = this.stateRoot();
      // The default root used to be per working directory: an agent found only there moves here.
      const { state } = this.options;
      if (stateRoot && !(state && state.root !== undefined) && !process.env.ACP_STATE_DIR) {
        await adoptLegacyState(stateRoot, identity.agentId);
      }
      const connection = this.openConnection(identity);
      this.core = this.createCore(identity, connection, audit, stateRoot);
      this.inbound = new Inbound(this.core);
      await this.core.peers.loadSelf(identity);
      await this.core.restoreHandshakes();
      await this.core.ledger.open();
      await connection.connect();
      if (this.isClosed()) throw new AcpError("Cancelled", "the agent was closed while connecting");
      this.state = "connected";
    } catch (err) {
      await audit?.close();
      await this.core?.ledger.close().catch(() => undefined);
      this.core = undefined;
      this.inbound = undefined;
      if (!this.isClosed()) this.state = "new"; // a failed connect may be retried
      throw err;
    }
  }

  /**
   * Stops taking deliveries, cancels pending requests, lets running handlers finish (their
   * responses and acks go out), then closes the WebSocket and the audit log.
   */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    this.health.close();
    const core = this.core;
    if (!core) return;
    core.pending.rejectAll(new AcpError("Cancelled", "the agent was closed"));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.inbound?.drain(),
      new Promise((resolve) => {
        timer = setTimeout(resolve, DRAIN_ON_CLOSE_MS);
      }),
    ]);
    clearTimeout(timer);
    await core.connection.close();
    await core.ledger.close();
    await core.audit?.close();
  }

  /** Read through a method: close() may change the state while connect() awaits. */
  private isClosed(): boolean {
    return this.state === "closed";
  }

  /** The four-step handshake with `peer`; resolves with its record once established. */
  async handshake(
    peer: string,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<PeerHandshake> {
    return this.requireCore().handshake(checkPeer(peer), {
      timeoutMs: options.timeoutMs ?? this.defaultTimeout,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  /** Sends a request and resolves with the peer's response body; an error response rejects with its AcpError. */
  async request(
    peer: string,
    body: Record<string, unknown>,
    options: RequestOptions = {},
  ): Promise<Record<string, unknown>> {
    checkBody(body);
    const method = options.method ?? "agent.request";
    if (method === "agent.handoff") throw invalidOption("method", "use handoff() for agent.handoff");
    return this.exchange(checkPeer(peer), options, async (core, to) => {
      const outgoing = options.encrypt ? await core.encryptFor(to, body) : body;
      return buildRequest(core.self, to, outgoing, { method });
    });
  }

  /** Transfers a task: what is completed, what remains, and all context. Resolves with the peer's answer. */
  async handoff(
    peer: string,
    handoff: HandoffBody,
    options: HandoffOptions = {},
  ): Promise<Record<string, unknown>> {
    const parsed = HandoffBody.safeParse(handoff);
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "a handoff needs completed, remaining and context", {
        problems: problemsOf(parsed.error),
      });
    }
    return this.exchange(checkPeer(peer), options, async (core, to) => {
      const outgoing = options.encrypt ? await core.encryptFor(to, handoff) : handoff;
      return buildHandoff(core.self, to, outgoing);
    });
  }

  /**
   * A one-way notification; resolves with its message id once the gateway accepted it (resent as
   * needed within `timeoutMs`, which covers the handshake too).
   */
  async notify(
    peer: string,
    body: Record<string, unknown>,
    options: NotifyOptions = {},
  ): Promise<{ id: string }> {
    checkBody(body);
    const to = checkPeer(peer);
    const core = this.requireCore();
    const deadline = Date.now() + (options.timeoutMs ?? this.defaultTimeout);
    const signal = options.signal ? { signal: options.signal } : {};
    for (let attempt = 0; ; attempt++) {
      await core.handshake(to, { timeoutMs: Math.max(1, deadline - Date.now()), ...signal });
      const outgoing = options.encrypt ? await core.encryptFor(to, body) : body;
      const message = buildNotification(core.self, to, outgoing, {
        method: options.method ?? "agent.notification",
      });
      try {
        const sent = await core.send(message, to, { summary: options.summary }, { deadline, ...signal });
        return { id: sent.id };
      } catch (err) {
        if (!this.retryAfterHandshakeLoss(err, to, attempt)) throw err;
      }
    }
  }

  /**
   * Handles requests of one method, or (without a method) every request no specific handler takes.
   * With `{ body: schema }` (zod, or any Standard Schema), the body is validated before the handler
   * runs and typed by the schema; a body that does not match is answered -32602 with `problems`.
   */
  onRequest(handler: RequestHandler): this;
  onRequest(method: string, handler: RequestHandler): this;
  onRequest<S extends BodySchema>(
    method: string,
    schemas: RequestSchemas<S>,
    handler: TypedRequestHandler<BodyOf<S>>,
  ): this;
  onRequest(
    methodOrHandler: string | RequestHandler,
    handlerOrSchemas?: RequestHandler | RequestSchemas<BodySchema>,
    typedHandler?: TypedRequestHandler<Record<string, unknown>>,
  ): this {
    if (typeof methodOrHandler === "function") {
      this.handlers.anyRequest = methodOrHandler;
      return this;
    }
    if (methodOrHandler === "agent.handoff")
      throw invalidOption("method", "use onHandoff() for agent.handoff");
    const handler = isRequestSchemas(handlerOrSchemas)
      ? typedHandler && validatedHandler(methodOrHandler, handlerOrSchemas, typedHandler)
      : handlerOrSchemas;
    if (!handler) throw invalidOption("handler", "is required");
    this.handlers.byMethod.set(methodOrHandler, handler);
    return this;
  }

  /**
   * Handles incoming handoffs (`agent.handoff`): the handler's return value is the signed answer,
   * e.g. `{ accepted: true }`; a throw answers with the error. Register before `connect()`, since
   * queued messages are delivered as soon as it resolves. One handler: a second call replaces it.
   */
  onHandoff(handler: HandoffHandler): this {
    this.handlers.handoff = handler;
    return this;
  }

  /**
   * Adds a handler for incoming notifications (every handler sees each one, in the order added).
   * A notification has no answer: a handler's throw is reported on the `error` event.
   */
  onNotification(handler: NotificationHandler): this {
    this.handlers.notifications.push(handler);
    return this;
  }

  /** Reports this agent's presence (busy/away, load, tasks, health metrics) to the gateway. */
  async setPresence(presence: PresenceInput): Promise<void> {
    const parsed = PresenceUpdate.safeParse(presence);
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid presence", {
        problems: problemsOf(parsed.error),
      });
    }
    await this.http.updatePresence(this.requireCore().self.agentId, parsed.data);
  }

  /** This agent's current trust in `peer` (after a handshake), recalibrated by every exchange. */
  trust(peer: string): TrustRecord | undefined {
    return this.trustLedger.get(peer);
  }

  /** Where the handshake with `peer` stands (`none` before any), without starting one. */
  handshakeState(peer: string): HandshakeState {
    return this.core?.handshakes.list().find((record) => record.peer === peer)?.state ?? "none";
  }

  /**
   * Listens to an agent event (`AgentEvents`: `message`, `error`, `warning`, `degraded`,
   * `recovered`, …). Without an `error` listener, errors become process warnings, not crashes.
   */
  on<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): this {
    this.emitter.on(event, listener);
    return this;
  }

  /** Like `on`, for the next occurrence only. */
  once<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): this {
    this.emitter.once(event, listener);
    return this;
  }

  /** Removes a listener added with `on` or `once`. */
  off<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): this {
    this.emitter.off(event, listener);
    return this;
  }

  /** `degraded` / `recovered`, from the failures the SDK works around (health.ts). */
  private readonly health = new GatewayHealth({
    degraded: (info) => this.emit("degraded", info),
    recovered: (info) => this.emit("recovered", info),
  });

  private readonly emit: Emit = (event, ...args) => {
    // An unheard "error" must not crash the process (EventEmitter would throw it): warn instead.
    if (event === "error" && this.emitter.listenerCount("error") === 0) {
      process.emitWarning(String((args[0] as Error | undefined)?.message), { code: "ACP_AGENT_ERROR" });
      return;
    }
    this.emitter.emit(event, ...args);
  };

  /** Each deprecation once per agent, not again at every reconnect. */
  private readonly deprecationsTold = new Set<string>();

  private warnDeprecated(deprecation: VersionDeprecation): void {
    const key = `${deprecation.version} ${deprecation.sunsetAt}`;
    if (this.deprecationsTold.has(key)) return;
    this.deprecationsTold.add(key);
    const warning: AgentWarning = {
      code: "ProtocolDeprecated",
      message: `protocol ${deprecation.version} is deprecated since ${deprecation.deprecatedAt} and will be refused from ${deprecation.sunsetAt}: register a newer version`,
      deprecation,
    };
    if (this.emitter.listenerCount("warning") === 0) {
      process.emitWarning(warning.message, { code: "ACP_PROTOCOL_DEPRECATED" });
      return;
    }
    this.emit("warning", warning);
  }

  private get defaultTimeout(): number {
    return this.options.requestTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /**
   * Request or handoff: handshake if needed, submit, await the correlated response. If the gateway
   * or the peer answers HandshakeRequired (the peer restarted and forgot us), handshake again and
   * retry once. The timeout covers everything, handshake included.
   */
  private async exchange(
    peer: string,
    options: { timeoutMs?: number; signal?: AbortSignal; summary?: string },
    build: (core: AgentCore, to: string) => Promise<{ id: string | number; method: string }>,
  ): Promise<Record<string, unknown>> {
    const core = this.requireCore();
    const timeoutMs = options.timeoutMs ?? this.defaultTimeout;
    const deadline = Date.now() + timeoutMs;
    const signal = options.signal ? { signal: options.signal } : {};
    const remaining = () => Math.max(1, deadline - Date.now());
    for (let attempt = 0; ; attempt++) {
      await core.handshake(peer, { timeoutMs: remaining(), ...signal });
      const message = await build(core, peer);
      const response = core.pending.wait(message.id, peer, {
        method: message.method,
        timeoutMs: remaining(),
        ...signal,
      });
      const submitted = core
        .send(message, peer, { summary: options.summary }, { deadline, ...signal })
        .catch((err: unknown) => {
          core.pending.drop(message.id);
          throw err;
        });
      try {
        const outcome = await Promise.race([response, submitted.then(() => response)]);
        if ("error" in outcome) throw outcome.error;
        return outcome.body;
      } catch (err) {
        if (!this.retryAfterHandshakeLoss(err, peer, attempt)) throw err;
      }
    }
  }

  private retryAfterHandshakeLoss(err: unknown, peer: string, attempt: number): boolean {
    if (attempt > 0 || !(err instanceof AcpError) || err.kind !== "HandshakeRequired") return false;
    this.core?.handshakes.reset(peer);
    return true;
  }

  private requireCore(): AgentCore {
    if (this.state === "closed") throw new AcpError("Cancelled", "the agent is closed");
    if (!this.core) throw new SdkError("NotConnected", "call connect() first");
    return this.core;
  }

  private openConnection(identity: PrivateIdentity): AgentConnection {
    const events: ConnectionEvents = {
      message: (frame) => this.inbound?.onFrame(frame),
      connected: ({ deprecation, ...info }) => {
        this.inbound?.connected(info.ackWaitMs);
        this.emit("connected", info);
        if (deprecation) this.warnDeprecated(deprecation);
      },
      disconnected: (info) => this.emit("disconnected", info),
      resubmit: (info) => this.emit("resubmit", info),
      degraded: (err) => this.health.failed(err),
      succeeded: () => this.health.succeeded(),
      error: (err) => this.emit("error", err),
    };
    if (this.options.connection) return this.options.connection(identity.agentId, events);
    return new GatewayConnection({
      baseUrl: this.gateway,
      apiKey: this.options.apiKey,
      agentId: identity.agentId,
      ...(this.options.reconnect ? { reconnect: this.options.reconnect } : {}),
      ...(this.options.submitRetry ? { submitRetry: this.options.submitRetry } : {}),
      maxAckPending: maxAckPendingOf(this.options),
      consume: this.options.consume ?? "all",
      events,
    });
  }

  /** Where this agent's state is kept (undefined with `state: false`). */
  private stateRoot(): string | undefined {
    return this.options.state === false ? undefined : resolveStateRoot(this.options.state?.root);
  }

  private createCore(
    identity: PrivateIdentity,
    connection: AgentConnection,
    audit: AgentAudit | undefined,
    root: string | undefined,
  ): AgentCore {
    const { options } = this;
    const settings = agentCoreSettings(options, identity);
    return new AgentCore({
      identity,
      settings,
      http: this.http,
      connection,
      trust: this.trustLedger,
      audit,
      handshakeStore: root === undefined ? undefined : new HandshakeStore(root, identity.agentId),
      ledger: new DeliveryLedger({
        retentionMs: settings.replayWindowMs,
        ...(root === undefined ? {} : { persist: { root, agentId: identity.agentId } }),
        ...(options.handledStore ? { store: options.handledStore } : {}),
      }),
      handlers: this.handlers,
      emit: this.emit,
      health: this.health,
    });
  }
}
