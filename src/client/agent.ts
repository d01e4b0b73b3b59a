import type { HandshakeState, PeerHandshake } from "../handshake/index.js";
import { readIdentityFile, TrustLedger, type TrustRecord } from "../identity/index.js";
import { AcpError, buildHandoff, buildRequest, HandoffBody, problemsOf } from "../protocol/index.js";
import { PresenceUpdate } from "../wire/api.js";
import type { AgentCore } from "./agent-core.js";
import type { Handlers } from "./agent-core-deps.js";
import { AgentEventEmitter } from "./agent-events.js";
import { createCore, openConnection, stateRootOf } from "./agent-parts.js";
import { AgentAudit } from "./audit.js";
import type { ConnectionEvents } from "./connection.js";
import { SdkError } from "./errors.js";
import { exchange, notify } from "./exchange.js";
import { GatewayHealth } from "./health.js";
import { GatewayClient, normaliseGatewayUrl } from "./http.js";
import { Inbound } from "./inbound.js";
import { checkBody, checkOptions, checkPeer, invalidOption } from "./options.js";
import { adoptLegacyState } from "./state-dir.js";
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
  private readonly events = new AgentEventEmitter();
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
      const stateRoot = stateRootOf(this.options);
      // The default root used to be per working directory: an agent found only there moves here.
      const { state } = this.options;
      if (stateRoot && !(state && state.root !== undefined) && !process.env.ACP_STATE_DIR) {
        await adoptLegacyState(stateRoot, identity.agentId);
      }
      const connection = openConnection(
        this.gateway,
        this.options,
        identity.agentId,
        this.connectionEvents(),
      );
      this.core = createCore(this.options, identity, stateRoot, {
        http: this.http,
        connection,
        trust: this.trustLedger,
        audit,
        handlers: this.handlers,
        emit: this.emit,
        health: this.health,
      });
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
    const to = checkPeer(peer);
    return exchange(this.requireCore(), to, this.withTimeout(options), async (core) => {
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
    const to = checkPeer(peer);
    return exchange(this.requireCore(), to, this.withTimeout(options), async (core) => {
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
    return notify(this.requireCore(), to, body, this.withTimeout(options));
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
    this.events.on(event, listener);
    return this;
  }

  /** Like `on`, for the next occurrence only. */
  once<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): this {
    this.events.once(event, listener);
    return this;
  }

  /** Removes a listener added with `on` or `once`. */
  off<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): this {
    this.events.off(event, listener);
    return this;
  }

  /** `degraded` / `recovered`, from the failures the SDK works around (health.ts). */
  private readonly health = new GatewayHealth({
    degraded: (info) => this.emit("degraded", info),
    recovered: (info) => this.emit("recovered", info),
  });

  private readonly emit = this.events.emit;

  private get defaultTimeout(): number {
    return this.options.requestTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** The options with the timeout they name, else the agent's default. */
  private withTimeout<O extends { timeoutMs?: number }>(options: O): O & { timeoutMs: number } {
    return { ...options, timeoutMs: options.timeoutMs ?? this.defaultTimeout };
  }

  private requireCore(): AgentCore {
    if (this.state === "closed") throw new AcpError("Cancelled", "the agent is closed");
    if (!this.core) throw new SdkError("NotConnected", "call connect() first");
    return this.core;
  }

  /** The connection's events, told to the inbound pipeline, the health tracker and the user. */
  private connectionEvents(): ConnectionEvents {
    return {
      message: (frame) => this.inbound?.onFrame(frame),
      connected: ({ deprecation, ...info }) => {
        this.inbound?.connected(info.ackWaitMs);
        this.emit("connected", info);
        if (deprecation) this.events.warnDeprecated(deprecation);
      },
      disconnected: (info) => this.emit("disconnected", info),
      resubmit: (info) => this.emit("resubmit", info),
      degraded: (err) => this.health.failed(err),
      succeeded: () => this.health.succeeded(),
      error: (err) => this.emit("error", err),
    };
  }
}
