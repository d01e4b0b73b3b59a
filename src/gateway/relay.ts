import type { AuditEntryInput } from "../audit/index.js";
import { brokerToAcp } from "../broker/errors.js";
import type { Broker, MessageRef, SubmitInput, SubmitResult } from "../broker/index.js";
import { SerialByKey } from "../broker/serial-by-key.js";
import { HANDSHAKE_METHODS } from "../handshake/handshake.js";
import { refuseDeepNesting } from "../http/server.js";
import {
  AcpError,
  type AcpMessage,
  type EnvelopeHeaders,
  headersOf,
  MessageId,
  messageKind,
  parseMessageText,
  ReplayGuard,
  validateMessage,
} from "../protocol/index.js";
import { signatureKeyId } from "../protocol/jws.js";
import { headerPointer } from "../protocol/validate.js";
import type { SubmitResponse } from "../wire/api.js";
import { negotiateVersion } from "../wire/versions.js";
import { routeOf, senderNames } from "./addressing.js";
import type { HandshakeGate } from "./handshake-gate.js";
import type { Metrics } from "./metrics.js";
import type { RateLimiter } from "./rate-limit.js";
import type { Registry, ResolvedAgent } from "./registry.js";
import { type RelayAudit, RequestLabels, relayedEntryFor } from "./relay-audit.js";
import type {
  AcceptedListener,
  AcceptedMessage,
  ArrivalCheck,
  RelayDeps,
  RelayOptions,
  SubmitOptions,
} from "./relay-types.js";
import { refuseClaimedIdentity } from "./sender-binding.js";
import { SignatureVerifier } from "./signature-verifier.js";

/**
 * The relay pipeline behind POST /api/v1/messages and the WebSocket `submit` frame, in this order:
 * size, rate limit, parse, validate (before any processing), verify the signature against the
 * registry, refuse impersonation (of another agent or principal), check freshness, recipient, protocol version and handshake, then
 * persist (dedup by message-id), audit, and answer with the id and status.
 */
export class Relay {
  private readonly freshness: ReplayGuard;
  /**
   * One sender's messages pass the asynchronous checks (registry, handshake gate) and reach the
   * broker in the order they arrived, even when pipelined: otherwise an `agent.capabilities` could
   * be overtaken by the request it unlocks, or two messages swap places in the inbox. The lane is
   * released once the broker has the write, not when it commits, so group commit still batches.
   */
  private readonly senderLanes = new SerialByKey();
  private readonly acceptedListeners = new Set<AcceptedListener>();
  private readonly arrivalChecks = new Set<ArrivalCheck>();
  /** The Ed25519 verifies, batched per turn on a thread of their own. */
  private readonly verifier = new SignatureVerifier();
  /** Recent requests' actions, so an answer's summary names what it answers. */
  private readonly requestLabels = new RequestLabels();
  /**
   * Set by an extension that posts every accepted message's summary to a human chat channel (the
   * dashboard's summary webhooks): the relay audit then records `discord_summary: true`.
   */
  summariesPostedToChat = false;

  private readonly broker: Broker;
  private readonly registry: Registry;
  private readonly gate: HandshakeGate;
  private readonly limiter: RateLimiter;
  private readonly metrics: Metrics;
  private readonly audit: RelayAudit | undefined;

  constructor(
    deps: RelayDeps,
    private readonly options: RelayOptions,
  ) {
    this.broker = deps.broker;
    this.registry = deps.registry;
    this.gate = deps.gate;
    this.limiter = deps.limiter;
    this.metrics = deps.metrics;
    this.audit = deps.audit;
    this.freshness = new ReplayGuard({ skewMs: options.skewMs });
  }

  async submit(
    sender: ResolvedAgent,
    input: string | object,
    size: number,
    options: SubmitOptions = {},
  ): Promise<SubmitResponse> {
    try {
      const result = await this.relay(sender, input, size, options);
      this.metrics.count("acp_messages_submitted_total", { duplicate: String(result.duplicate) });
      return result;
    } catch (thrown) {
      const err = brokerToAcp(thrown);
      this.metrics.count("acp_messages_rejected_total", {
        reason: err instanceof AcpError ? err.kind : "InternalError",
      });
      if (err instanceof AcpError && typeof err.data.quota === "string") {
        this.metrics.count("acp_quota_refusals_total", { quota: err.data.quota });
      }
      throw err;
    }
  }

  private async relay(
    sender: ResolvedAgent,
    input: string | object,
    size: number,
    options: SubmitOptions,
  ): Promise<SubmitResponse> {
    // Checked and verified on arrival, concurrently; then routed and stored in arrival order.
    const signed = this.checkSigned(sender, input, size, options);
    const { message, stored, entry } = await this.senderLanes.run(sender.record.agentId, () =>
      this.routeAndStore(sender, signed, options),
    );
    const result = await stored;
    if (result.duplicate) {
      const resubmitted = { from: options.arrived?.via ?? sender.record.agentId, id: result.id };
      await this.refuseReusedId(resubmitted, (message as { signature?: string }).signature);
    } else {
      this.audit?.record(entry);
    }
    return { id: result.id, status: result.status, duplicate: result.duplicate };
  }

  /** When `from` last announced itself to `to` through the relay (the handshake gate's record), if it has. */
  announcedAt(from: string, to: string): Promise<number | undefined> {
    return this.gate.announcedAt(from, to);
  }

  /** Lets the signature verifies under way finish and stops their thread. */
  close(): Promise<void> {
    return this.verifier.close();
  }

  /**
   * Calls `listener` for each message this relay accepts (the dashboard's live feed takes its
   * summary from here instead of reading the envelope back). Returns the unsubscribe function.
   */
  onAccepted(listener: AcceptedListener): () => void {
    this.acceptedListeners.add(listener);
    return () => this.acceptedListeners.delete(listener);
  }

  /** Adds a check of messages from peer gateways (see `ArrivalCheck`). Returns the removal function. */
  onArrival(check: ArrivalCheck): () => void {
    this.arrivalChecks.add(check);
    return () => this.arrivalChecks.delete(check);
  }

  /**
   * The checks that need nothing but the envelope and its sender, in the pipeline's order; the
   * signature's Ed25519 verify is started here (batched onto the verify thread) and awaited in `routeAndStore`.
   */
  private checkSigned(
    sender: ResolvedAgent,
    input: string | object,
    size: number,
    options: SubmitOptions,
  ): SignedSubmit {
    if (size > this.options.maxEnvelopeBytes) {
      throw new AcpError(
        "PayloadTooLarge",
        `the envelope exceeds the ${this.options.maxEnvelopeBytes}-byte limit`,
        {
          limit: this.options.maxEnvelopeBytes,
        },
      );
    }
    this.limiter.take(sender.record.agentId);
    this.options.storage.check();
    const parsed = typeof input === "string" ? parseMessageText(input) : input;
    refuseDeepNesting(parsed, "message");
    const message = validateMessage(parsed, { envelope: true });
    const headers = headersOf(message) as EnvelopeHeaders;
    const names = senderNames(sender, headers["recipient-id"], this.registry, message, !!options.arrived);
    refuseClaimedIdentity(message, headers, names);
    const signedHere = options.signedHere === true && signatureKeyId(message) === sender.kid;
    const verified = signedHere
      ? Promise.resolve(sender.kid)
      : this.verifier.verify(message, (agentId, signedBy) =>
          agentId === names.agentId && signedBy === sender.kid ? sender.key : undefined,
        );
    // Awaited later, in the sender's lane; until then a refusal must not count as unhandled.
    verified.catch(() => undefined);
    const envelope = typeof input === "string" ? input : JSON.stringify(input);
    return { message, headers, envelope, size, verified, signedHere };
  }

  private async routeAndStore(
    sender: ResolvedAgent,
    { message, headers, envelope, size, verified, signedHere }: SignedSubmit,
    { summaryContext, priority, receivedAt, arrived, replyTo }: SubmitOptions,
  ): Promise<{ message: AcpMessage; stored: Promise<SubmitResult>; entry: AuditEntryInput }> {
    const kid = await verified;
    const from = headers["agent-id"];
    // The sender was resolved when its connection authenticated: a revocation (or a new signing
    // key) since then, here or at another gateway, stops its submissions at once (cached lookup).
    // An agent of another domain was resolved from its home directory for this very message.
    const current = arrived ? sender : await this.registry.resolve(sender.record.agentId);
    if (current?.kid !== sender.kid) {
      throw new AcpError(
        "Unauthorized",
        `agent ${sender.record.agentId} was revoked (or its signing key replaced) after this connection signed in`,
        {
          problems: [
            { path: headerPointer(message, "agent-id"), message: "no longer a live registered agent" },
          ],
        },
      );
    }
    if (arrived) this.freshness.checkAge(headers.timestamp, arrived.maxAgeMs, headerPointer(message));
    else this.freshness.checkTimestamp(headers.timestamp, headerPointer(message), receivedAt);
    const to = headers["recipient-id"];
    const { recipient, inbox } = await routeOf(to, this.registry, message, !!arrived);
    this.checkVersion(sender, recipient, headers, message);
    const kind = messageKind(message);
    const method = "method" in message ? message.method : kind === "error" ? "error" : "response";
    let route: string | undefined;
    if (HANDSHAKE_METHODS.has(method)) {
      if (size > this.options.handshakeBytes) await this.refuseLargeHandshake(from, to, size);
      route = await this.gate.observe(method as "agent.announce", headers, kid, envelope, {
        replyTo,
        isReply: method === "agent.capabilities" || isReplyAnnounce(message),
      });
    } else if (kind !== "error") await this.gate.require(headers, kid, kind === "response");
    if (arrived) for (const check of this.arrivalChecks) await check({ sender, message, headers });

    // Built before the broker has it: its change event may reach the live feed before `submit` resolves.
    const inReplyTo = this.requestLabels.observe(message, headers);
    const context = inReplyTo === undefined ? summaryContext : { ...summaryContext, inReplyTo };
    const entry = relayedEntryFor(
      message,
      sender.record,
      recipient.record.principalId,
      `${this.options.brokerKind}:agent.${inbox}.inbox`,
      { ...(context ? { context } : {}), postedToChat: this.summariesPostedToChat },
    );
    const stored = this.broker.submit({
      id: headers["message-id"],
      from: arrived?.via ?? sender.record.agentId,
      to: inbox,
      kind: kind === "error" ? "response" : kind,
      method,
      envelope,
      submittedAt: headers.timestamp,
      ...(priority !== undefined && { priority }),
      ...routing(message, kind, replyTo, route),
    });
    // Awaited by `relay`, outside the lane; this keeps an early failure from going unhandled.
    stored.catch(() => undefined);
    if (this.acceptedListeners.size > 0)
      this.emitAccepted({
        id: headers["message-id"],
        entry,
        stored,
        to,
        envelope,
        message,
        verifiedKid: signedHere ? undefined : kid,
      });
    return { message, stored, entry };
  }

  /** A large announce or capabilities is relayed only between agents whose handshake is complete. */
  private async refuseLargeHandshake(from: string, to: string, size: number): Promise<void> {
    if (await this.gate.completed(from, to)) return;
    const limit = this.options.handshakeBytes;
    throw new AcpError(
      "RateLimited",
      `a handshake message from an agent that has not completed the handshake with ${to} may be ${limit} bytes at most; this one is ${size}`,
      { quota: "handshake-bytes", limit, size },
    );
  }

  private emitAccepted(accepted: AcceptedMessage): void {
    for (const listener of this.acceptedListeners) {
      try {
        listener(accepted);
      } catch {
        // A listener's failure is its own; the message is accepted either way.
      }
    }
  }

  /**
   * The sender's own id again (ids are per sender: another's never comes here). Same signed bytes:
   * an idempotent resubmission. Other content: a replay.
   */
  private async refuseReusedId(message: MessageRef, signature: string | undefined): Promise<void> {
    const { id } = message;
    const stored = await this.broker.get(message);
    // Past retention there is nothing left to compare, and nothing to deliver either way.
    if (stored?.status === "expired") return;
    if (!stored?.envelope) {
      // The broker knows the id but could not read the envelope back (on a NATS cluster, a
      // replica that has not caught up yet): that proves no replay, so ask for the same again.
      throw new AcpError(
        "StorageUnavailable",
        `message-id ${id} is stored, but its envelope could not be read back to compare; resubmit`,
        { messageId: id },
      );
    }
    const storedSignature = (JSON.parse(stored.envelope) as { signature?: string }).signature;
    if (storedSignature !== signature) {
      throw new AcpError("Replay", `message-id ${id} was already used for a different message`, {
        problems: [{ path: "/params/headers/message-id", message: "already used" }],
      });
    }
  }

  private checkVersion(
    sender: ResolvedAgent,
    recipient: ResolvedAgent,
    headers: EnvelopeHeaders,
    message: AcpMessage,
  ): void {
    // Only versions still spoken count: one past its sunset is blocked, whatever was registered.
    const { versions } = this.registry;
    const agreed = negotiateVersion(
      versions.usable(sender.record.protocolVersions),
      versions.usable(recipient.record.protocolVersions),
    );
    if (!agreed) {
      throw new AcpError(
        "NoCommonVersion",
        `${sender.record.agentId} and ${recipient.record.agentId} share no protocol version this gateway still speaks`,
        {
          sender: sender.record.protocolVersions,
          recipient: recipient.record.protocolVersions,
          supported: versions.spoken(),
        },
      );
    }
    if (headers["trust-layer-version"] !== agreed) {
      throw new AcpError(
        "NoCommonVersion",
        `this pair speaks protocol ${agreed}; ${headers["trust-layer-version"]} is refused`,
        {
          problems: [{ path: headerPointer(message, "trust-layer-version"), message: `must be ${agreed}` }],
          negotiated: agreed,
        },
      );
    }
  }
}

/**
 * How the broker routes it: a request or handoff keeps the route of the socket it came through, an
 * answer goes to the route of the request it answers (by its JSON-RPC id, the request's message id
 * when an ACP builder made it), a handshake reply to the route the gate recorded. A notification
 * naming a request in `body.messageId` (the A2A bridge's `agent.a2a.status`, `.progress`) goes
 * where that request's answer will.
 */
function routing(
  message: AcpMessage,
  kind: string,
  replyTo: string | undefined,
  route: string | undefined,
): Pick<SubmitInput, "replyTo" | "inReplyTo" | "route"> {
  if (route) return { route };
  if (replyTo && (kind === "request" || kind === "handoff")) return { replyTo };
  const answered = (message as { id?: unknown }).id;
  if ((kind === "response" || kind === "error") && MessageId.safeParse(answered).success)
    return { inReplyTo: answered as string };
  const about = "params" in message ? (message.params as { body?: { messageId?: unknown } }).body : undefined;
  if (kind === "notification" && MessageId.safeParse(about?.messageId).success)
    return { inReplyTo: about?.messageId as string };
  return {};
}

/** An `agent.announce` answering the peer's (its body says `reply: true`): part of the peer's handshake. */
function isReplyAnnounce(message: AcpMessage): boolean {
  const body = "params" in message ? (message.params as { body?: { reply?: unknown } }).body : undefined;
  return body?.reply === true;
}

interface SignedSubmit {
  message: AcpMessage;
  headers: EnvelopeHeaders;
  /** The text stored and delivered: exactly what was submitted. */
  envelope: string;
  /** Its size as received (bytes). */
  size: number;
  /** Resolves to the key id that signed the message. */
  verified: Promise<string>;
  /** The Ed25519 verify was skipped: a signature made in this process (SubmitOptions). */
  signedHere: boolean;
}
