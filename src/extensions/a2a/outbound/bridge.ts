import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Broker, Delivery, Inbox, KvBucket, Unsubscribe } from "../../../broker/index.js";
import { refKey } from "../../../broker/validation.js";
import type { PresenceTracker } from "../../../gateway/presence.js";
import type { Registry } from "../../../gateway/registry.js";
import type { Relay } from "../../../gateway/relay.js";
import type { SecretBox } from "../../../gateway/secrets.js";
import { Handshakes } from "../../../handshake/index.js";
import type { OutboundPolicy } from "../../../http/outbound.js";
import { TrustLedger } from "../../../identity/index.js";
import {
  AcpError,
  buildErrorResponse,
  buildNotification,
  buildResponse,
  type JsonRpcId,
  type SenderIdentity,
  type Signer,
  signMessage,
  type VerifiedEnvelope,
  verifyEnvelope,
} from "../../../protocol/index.js";
import { A2A_CAPABILITY } from "../../../wire/a2a.js";
import type { OutboundAgentRecord } from "../../../wire/a2a-outbound.js";
import type { BridgeSigningKey } from "./bridge-key.js";

/** The bridge key of this gateway: made (and sealed) at the first registration made here. */
export interface BridgeKey {
  /** The key, when this gateway has one; it serves only the agents registered with it. */
  readonly current: BridgeSigningKey | undefined;
  ensure(): Promise<BridgeSigningKey>;
}

import { A2AClient } from "./a2a-client.js";
import { A2AMethods } from "./convert.js";
import { CredentialStore } from "./credentials.js";
import { Exchanges } from "./exchanges.js";
import { checkEndpointOrigin, registerOutbound, remoteCapabilities } from "./registration.js";
import { TaskLinks } from "./tasks.js";

/** What the bridge uses of the gateway: the registry, the relay pipeline, the broker and presence, in-process. */
export interface A2AOutboundBridgeDeps {
  broker: Broker;
  registry: Registry;
  relay: Relay;
  presence: PresenceTracker;
  logger: Logger;
  /** Every call of an A2A agent's card, key set and endpoint goes through it. */
  outbound: OutboundPolicy;
}

export interface A2AOutboundBridgeOptions {
  /** Calls of an unreachable A2A agent per request before the caller gets an error. Default 3. */
  attempts?: number;
  /** Wait before the second call; doubled each time. Default 1000 ms. */
  retryDelayMs?: number;
  /** `agent.a2a.progress` notifications per request, at most (interim text, artifacts). Default 1000. */
  maxProgressPerRequest?: number;
}

/** One A2A agent the bridge answers for: its inbox, its handshakes, its signer. */
export interface Served {
  record: OutboundAgentRecord;
  sender: SenderIdentity;
  signer: Signer;
  client: A2AClient;
  handshakes: Handshakes;
  inbox?: Inbox;
  pump?: Promise<void>;
  /** Keeps the agent's presence online while the bridge serves it. */
  heartbeat?: NodeJS.Timeout;
  /**
   * The relay verified a submission signed by `signer` in full: later ones are passed as
   * `signedHere` (signed in this process with the registered key), so it skips the Ed25519 verify.
   */
  keyProven?: boolean;
}

const LAYERS = [0, 1];

/**
 * The outbound half of the A2A bridge: each registered A2A agent is an ACP agent id whose inbox the
 * bridge consumes in-process. Handshakes are answered automatically with the bridge key; each
 * `agent.request` becomes an A2A exchange (Exchanges) whose outcome goes back through the relay as
 * a signed `agent.response` (so it is validated, stored, delivered and audited like any message).
 */
export class A2AOutboundBridge {
  private readonly records: KvBucket<OutboundAgentRecord>;
  private readonly credentials: CredentialStore;
  private readonly served = new Map<string, Served>();
  private readonly handlers = new Set<Promise<void>>();
  /** Deliveries being processed, by message id. */
  private readonly inHand = new Set<string>();
  private readonly exchanges: Exchanges;
  private unwatch: Unsubscribe | undefined;
  private closed = false;

  constructor(
    private readonly deps: A2AOutboundBridgeDeps,
    private readonly key: BridgeKey,
    secrets: SecretBox,
    options: A2AOutboundBridgeOptions = {},
  ) {
    this.records = deps.broker.kv<OutboundAgentRecord>("a2a-outbound");
    this.credentials = new CredentialStore(deps.broker, secrets);
    this.exchanges = new Exchanges(new TaskLinks(deps.broker), deps.logger, {
      attempts: options.attempts ?? 3,
      retryDelayMs: options.retryDelayMs ?? 1000,
      maxProgress: options.maxProgressPerRequest ?? 1000,
      notify: (served, to, method, body) =>
        this.send(served, buildNotification(served.sender, to, body, { method })),
      connected: async (agentId) => (await deps.presence.get(agentId)).state !== "offline",
    });
  }

  async start(): Promise<void> {
    // Registrations made through another gateway on the same NATS reach this one too.
    this.unwatch = await this.records.watch((change) => {
      if (change.op === "delete") void this.stopServing(change.key);
      else if (change.value) void this.serve(change.value);
    });
    for (const key of await this.records.keys()) {
      const entry = await this.records.get(key);
      if (entry) await this.serve(entry.value);
    }
  }

  async register(input: unknown): Promise<OutboundAgentRecord> {
    const { record, headers } = await registerOutbound(input, this.deps, await this.key.ensure());
    if (Object.keys(headers).length > 0) await this.credentials.save(record.agentId, headers);
    else await this.credentials.delete(record.agentId);
    await this.records.put(record.agentId, record);
    await this.serve(record);
    this.deps.logger.info({ agent: record.agentId, endpoint: record.endpoint }, "A2A agent registered");
    for (const warning of record.warnings ?? []) this.deps.logger.warn({ agent: record.agentId }, warning);
    return record;
  }

  async list(): Promise<OutboundAgentRecord[]> {
    const entries = await Promise.all((await this.records.keys()).map((k) => this.records.get(k)));
    return entries.flatMap((e) => (e ? [e.value] : []));
  }

  async get(agentId: string): Promise<OutboundAgentRecord> {
    const record = (await this.records.get(agentId))?.value;
    if (!record) throw new AcpError("NotFound", `no registered A2A agent ${agentId}`);
    return record;
  }

  /** Revokes the agent id (the registry keeps the record for audit) and stops serving it. */
  async remove(agentId: string): Promise<void> {
    await this.get(agentId);
    await this.deps.registry.revoke(agentId);
    await this.records.delete(agentId);
    await this.credentials.delete(agentId);
    await this.stopServing(agentId);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unwatch?.();
    // Exchanges under way are abandoned unacknowledged: the broker redelivers them after a restart.
    this.exchanges.abortAll();
    await Promise.all([...this.served.keys()].map((id) => this.stopServing(id)));
    await Promise.allSettled([...this.handlers]);
  }

  private async serve(record: OutboundAgentRecord): Promise<void> {
    // Only the gateway holding the registered key can sign for it.
    const identity = this.key.current;
    if (this.closed || this.served.has(record.agentId) || record.bridgeKey !== identity?.signing.x) return;
    try {
      // A record stored before endpoints had to share their card's origin is held to it too.
      checkEndpointOrigin(record.cardUrl, { url: record.endpoint, path: "/endpoint" }, record.endpointOrigin);
    } catch (err) {
      this.deps.logger.error(
        { agent: record.agentId, err: (err as Error).message },
        "A2A bridge does not serve the agent: remove it and register it again",
      );
      return;
    }
    const sender: SenderIdentity = {
      agentId: record.agentId,
      principalId: record.principalId,
      layers: LAYERS,
    };
    const served: Served = {
      record,
      sender,
      signer: identity.signerFor(record.agentId),
      client: new A2AClient(record.endpoint, this.deps.outbound, {
        legacy: record.protocolVersion !== undefined,
      }),
      handshakes: new Handshakes({
        self: sender,
        announce: {
          capabilities: remoteCapabilities(record.skills),
          purpose: `A2A agent "${record.name}" through the gateway's bridge`,
        },
        capabilities: { tools: record.skills, domains: ["a2a"], limits: [], requests: [] },
        trust: new TrustLedger(),
      }),
    };
    this.served.set(record.agentId, served);
    try {
      if (record.credentials)
        served.client = new A2AClient(record.endpoint, this.deps.outbound, {
          headers: await this.credentials.load(record.agentId),
          legacy: record.protocolVersion !== undefined,
        });
      await this.upgradeCapabilities(record).catch((err: unknown) =>
        this.deps.logger.warn(
          { agent: record.agentId, err: (err as Error).message },
          "A2A agent's capabilities not upgraded",
        ),
      );
      served.inbox = await this.deps.broker.openInbox(record.agentId);
    } catch (err) {
      this.served.delete(record.agentId);
      this.deps.logger.error(
        { agent: record.agentId, err: (err as Error).message },
        "A2A bridge cannot serve the agent (its credentials or its inbox)",
      );
      return;
    }
    served.pump = this.pump(served, served.inbox);
    // The agent is reachable while the bridge serves it: online, like an agent with a connection.
    const { presence } = this.deps;
    await presence.connected(record.agentId).catch(() => undefined);
    served.heartbeat = setInterval(
      () => void presence.heartbeat(record.agentId).catch(() => undefined),
      presence.staleAfterMs / 3,
    );
    served.heartbeat.unref();
  }

  private async stopServing(agentId: string): Promise<void> {
    const served = this.served.get(agentId);
    if (!served) return;
    this.served.delete(agentId);
    if (served.heartbeat) {
      clearInterval(served.heartbeat);
      await this.deps.presence.disconnected(agentId).catch(() => undefined);
    }
    await served.inbox?.close();
    await served.pump;
  }

  /**
   * An agent registered by an older gateway has the capability `a2a`, which publishes it to A2A
   * clients as an ACP agent: it gets the capabilities a registration gets now.
   */
  private async upgradeCapabilities(record: OutboundAgentRecord): Promise<void> {
    const current = await this.deps.registry.get(record.agentId);
    if (!current || current.revokedAt || !current.capabilities.includes(A2A_CAPABILITY)) return;
    await this.deps.registry.setCapabilities(record.agentId, remoteCapabilities(record.skills));
    this.deps.logger.info(
      { agent: record.agentId },
      "A2A agent's capabilities upgraded: no longer published to A2A clients",
    );
  }

  private async pump(served: Served, inbox: Inbox): Promise<void> {
    try {
      for await (const delivery of inbox) {
        const handled = this.handle(served, delivery).catch((err: unknown) =>
          this.deps.logger.error(
            { agent: served.record.agentId, id: delivery.id, err: (err as Error).message },
            "A2A bridge delivery failed",
          ),
        );
        this.handlers.add(handled);
        void handled.finally(() => this.handlers.delete(handled));
      }
    } catch (err) {
      if (!this.closed)
        this.deps.logger.error(
          { agent: served.record.agentId, err: (err as Error).message },
          "A2A bridge inbox ended",
        );
    }
  }

  private async handle(served: Served, delivery: Delivery): Promise<void> {
    // A redelivery of a request still in hand (its A2A task outlived the ack wait) is left alone:
    // the exchange under way acknowledges it when it answers.
    const key = refKey(delivery);
    if (this.inHand.has(key)) return;
    this.inHand.add(key);
    try {
      // A redelivery handed out just before the answer's acknowledgement: already answered.
      const settled = delivery.attempt > 1 ? (await this.deps.broker.status(delivery))?.status : undefined;
      if (settled === "acknowledged" || settled === "failed") return;
      await this.process(served, delivery);
    } finally {
      this.inHand.delete(key);
    }
  }

  private async process(served: Served, delivery: Delivery): Promise<void> {
    const agentId = served.record.agentId;
    const verified = await this.verify(served, delivery);
    if (!verified) {
      await this.deps.broker.reject(agentId, delivery, "not a valid signed ACP message");
      return;
    }
    const { message } = verified;
    const method = "method" in message ? message.method : "response";
    if (method === "agent.announce" || method === "agent.capabilities") {
      try {
        for (const out of served.handshakes.receive(verified)) await this.send(served, out);
      } catch (err) {
        this.deps.logger.warn(
          { agent: agentId, from: delivery.from, err: (err as Error).message },
          "A2A bridge handshake refused",
        );
      }
    } else if (method === A2AMethods.cancel) {
      await this.exchanges
        .cancel(served, verified)
        .catch((err: unknown) =>
          this.deps.logger.warn(
            { agent: agentId, from: delivery.from, err: (err as Error).message },
            "A2A cancel failed",
          ),
        );
    } else if ("id" in message && "params" in message) {
      const outcome = await this.exchanges.answer(served, verified);
      if (outcome === "abandoned") return;
      const refused = await this.reply(served, verified, message.id, outcome.body, outcome.error);
      const deadLetter = outcome.deadLetter ?? refused;
      if (deadLetter) {
        await this.deps.broker.reject(agentId, delivery, deadLetter);
        return;
      }
    }
    // Notifications of other methods and responses: nothing to do.
    await this.deps.broker.ack(agentId, delivery);
  }

  private async verify(served: Served, delivery: Delivery): Promise<VerifiedEnvelope | undefined> {
    try {
      const sender = await this.deps.registry.resolve(delivery.from);
      return verifyEnvelope(delivery.envelope, {
        resolveKey: (agentId, kid) =>
          sender && agentId === sender.record.agentId && kid === sender.kid ? sender.key : undefined,
        expectedRecipient: served.record.agentId,
      });
    } catch (err) {
      this.deps.logger.warn(
        { agent: served.record.agentId, id: delivery.id, err: (err as Error).message },
        "A2A bridge refused a delivery",
      );
      return undefined;
    }
  }

  /**
   * Answers the requester. An answer the relay refuses for good (too large for an envelope, the
   * requester revoked…) becomes an error answer or, failing that, the reason to dead-letter the
   * request: leaving it unacknowledged would only call the A2A agent again on each redelivery.
   */
  private async reply(
    served: Served,
    verified: VerifiedEnvelope,
    id: JsonRpcId,
    body: Record<string, unknown> | undefined,
    error: AcpError | undefined,
  ): Promise<string | undefined> {
    const request = { id, params: { headers: { "agent-id": verified.headers["agent-id"] } } };
    const answer = error
      ? buildErrorResponse(served.sender, request, error)
      : buildResponse(served.sender, request, body ?? {});
    try {
      await this.send(served, answer);
      return undefined;
    } catch (err) {
      if (!(err instanceof AcpError) || err.kind === "StorageUnavailable") throw err;
      if (err.kind === "PayloadTooLarge" && !error) {
        const tooLarge = new AcpError(
          "PayloadTooLarge",
          `the answer of ${served.record.agentId} exceeds the gateway's envelope limit; ask the A2A agent for less`,
          { ...err.data, a2a: { ...(body?.a2a as object) } },
        );
        return this.reply(served, verified, id, undefined, tooLarge);
      }
      this.deps.logger.warn(
        { agent: served.record.agentId, err: err.message },
        "A2A answer refused by the relay",
      );
      return `the answer was refused: ${err.message}`;
    }
  }

  /** Signs as the served agent and submits through the relay; a busy store is tried again. */
  private async send(served: Served, message: object): Promise<void> {
    const signed = JSON.stringify(signMessage(message, served.signer));
    for (let attempt = 1; ; attempt++) {
      const self = await this.deps.registry.resolve(served.record.agentId);
      if (!self) throw new AcpError("UnknownRecipient", `${served.record.agentId} is no longer registered`);
      try {
        const signedHere = served.keyProven === true;
        await this.deps.relay.submit(self, signed, Buffer.byteLength(signed), { signedHere });
        served.keyProven = true;
        return;
      } catch (err) {
        const retry =
          err instanceof AcpError && (err.kind === "StorageUnavailable" || err.kind === "RateLimited");
        if (!retry || attempt >= 5 || this.closed) throw err;
        await sleep(100 * 2 ** attempt);
      }
    }
  }
}
