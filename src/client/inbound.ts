import { HANDSHAKE_METHODS } from "../handshake/handshake.js";
import type { PeerHandshake } from "../handshake/index.js";
import {
  AcpError,
  type AcpMessage,
  buildErrorResponse,
  decryptBody,
  headersOf,
  isEncryptedBody,
  type JsonRpcId,
  type VerifiedEnvelope,
} from "../protocol/index.js";
import { headerPointer } from "../protocol/validate.js";
import type { AgentCore } from "./agent-core.js";
import { type DeliveredFrame, type DeliveredRef, deliveredKey, type NewMessageFrame } from "./connection.js";
import { errorFromObject, GatewayUnreachableError } from "./errors.js";
import type { HandledRecord } from "./handled-store.js";
import { HandshakeRecovery } from "./handshake-recovery.js";
import { HandshakeSteps, inboundView, runNotificationHandlers } from "./inbound-steps.js";
import { ConcurrencyLimiter } from "./limiter.js";
import { submissionUnsettled } from "./outbox.js";
import { Responder } from "./responder.js";
import type { InboundContext } from "./types.js";

type MethodMessage = Extract<AcpMessage, { method: string }>;

/**
 * The receive side. Deliveries are verified one at a time in arrival order (signature against the
 * sender's registered key, timestamp window, recipient, handshake gate, decryption), so handshake
 * state is always current when the next message is checked. Handlers then run concurrently, each
 * acknowledging its delivery only after it finished and its response was accepted by the gateway.
 */
export class Inbound {
  private chain: Promise<void> = Promise.resolve();
  private readonly tasks = new Set<Promise<void>>();
  private stopping = false;
  /** Handlers running at once (`flow.concurrency`); the rest wait their turn, in arrival order. */
  private readonly handlerSlots: ConcurrencyLimiter;
  /** Deliveries taken and not settled yet: the gateway hears every third of its ack wait that they are in hand. */
  private readonly inHand = new Map<string, DeliveredRef>();
  private keepAlive: NodeJS.Timeout | undefined;
  private readonly responder: Responder;
  private readonly recovery: HandshakeRecovery;
  private readonly handshakeSteps: HandshakeSteps;

  constructor(private readonly core: AgentCore) {
    this.handlerSlots = new ConcurrencyLimiter(core.settings.concurrency);
    this.responder = new Responder(core);
    this.handshakeSteps = new HandshakeSteps(core, {
      refuse: (frame, err) => this.refuse(frame, err),
      complete: (frame) => this.complete(frame),
    });
    this.recovery = new HandshakeRecovery(core, (peer, failure) => {
      this.chain = this.chain
        .then(() => this.release(peer, failure))
        .catch((err: unknown) => this.core.emit("error", err as Error));
    });
  }

  /**
   * Connected, to a gateway with this ack wait: a delivery in hand (running, or waiting for a
   * handler slot) gets a `working` notice every third of it, so however long it takes its message
   * is neither redelivered nor dead-lettered (JetStream's in-progress acknowledgement).
   */
  connected(ackWaitMs: number): void {
    clearInterval(this.keepAlive);
    this.keepAlive = setInterval(
      () => {
        for (const message of this.inHand.values()) this.core.connection.working(message);
      },
      Math.max(50, Math.floor(ackWaitMs / 3)),
    );
    this.keepAlive.unref();
  }

  onFrame(frame: DeliveredFrame): void {
    if (this.stopping) return;
    const { ledger, connection, settings } = this.core;
    // Per sender: another agent's message with the same id is another message.
    const key = deliveredKey(frame);
    const state = ledger.state(key);
    if (state === "done") {
      connection.acknowledge(frame);
      return;
    }
    if (state === "processing") return;
    if (settings.consume === "replies" && !this.isReply(frame)) {
      return; // someone else's work: leave it unacknowledged for the agent's real consumer
    }
    ledger.start(key);
    this.inHand.set(key, { id: frame.id, from: frame.from });
    this.chain = this.chain
      .then(() => this.process(frame))
      .catch((err: unknown) => {
        this.markHandled(frame);
        this.core.emit("error", err as Error);
      });
  }

  /**
   * What a replies-only agent (`consume: "replies"`) takes: responses, handshake messages, and the
   * notifications that report on a request of its own still awaiting its answer — from the peer it
   * went to, naming it in `body.messageId` (the A2A bridge's `agent.a2a.status` and `.progress`).
   * They come before the answer, so the session that waits for it is the one to take them: left,
   * they would pile up in the agent's inbox after the session ends.
   */
  private isReply(frame: NewMessageFrame): boolean {
    if (frame.kind === "response" || HANDSHAKE_METHODS.has(frame.method)) return true;
    if (frame.kind !== "notification") return false;
    const body = (frame.envelope as { params?: { body?: { messageId?: unknown } } }).params?.body;
    const about = body?.messageId;
    return typeof about === "string" && this.core.pending.expects(about, frame.from);
  }

  /** Stops taking deliveries and waits for the ones under way (their acks and responses go out). */
  async drain(): Promise<void> {
    this.stopping = true;
    for (const held of this.recovery.abandon()) this.abandon(held.frame);
    await this.chain;
    while (this.tasks.size > 0) await Promise.allSettled([...this.tasks]);
    clearInterval(this.keepAlive);
  }

  private async process(frame: DeliveredFrame): Promise<void> {
    let record: HandledRecord | undefined;
    try {
      record = await this.core.ledger.recorded(deliveredKey(frame));
    } catch (err) {
      // The application's store could not be read: nothing is decided, the redelivery asks again.
      this.abandon(frame);
      this.core.emit("error", err as Error);
      return;
    }
    const expectsAnswer = frame.kind === "request" || frame.kind === "handoff";
    if (record?.response) {
      this.track(
        this.responder.resend(peerOf(frame), record.response).then(() => this.complete(frame)),
        frame,
      );
      return;
    }
    if (record && (record.done || !expectsAnswer)) {
      this.complete(frame); // handled by an earlier run: only the ack is missing
      return;
    }
    let verified: VerifiedEnvelope;
    try {
      verified = await this.verify(frame);
    } catch (err) {
      if (notTheMessagesFault(err)) {
        // The registry could not be asked (gateway restarting, our key refused): try again on redelivery.
        this.abandon(frame);
        this.gatewayFailed(err as Error);
        return;
      }
      await this.refuse(frame, err);
      return;
    }
    const { message } = verified;
    if (record && "method" in message && "id" in message) {
      // A request the application recorded as handled, whose response never went out.
      const request = message as MethodMessage & { id: JsonRpcId };
      this.track(
        this.responder.answerRecorded(verified, request, record).then(() => this.complete(frame)),
        frame,
      );
      return;
    }
    if ("method" in message && HANDSHAKE_METHODS.has(message.method)) {
      await this.handshakeSteps.take(frame, verified, message);
    } else if ("method" in message) {
      await this.substantive(frame, verified, message);
    } else {
      await this.response(frame, verified);
    }
  }

  /** End-to-end verification, then the checks that tie the delivery to what was signed. */
  private async verify(frame: DeliveredFrame): Promise<VerifiedEnvelope> {
    const verified = frame.verifiedByRelay ?? (await this.core.verify(frame.envelope));
    const { headers } = verified;
    const base = headerPointer(verified.message);
    // core.verify checks this too; a delivery the relay verified comes here without it.
    if (!this.core.isSelf(headers["recipient-id"])) {
      throw new AcpError(
        "Misrouted",
        `addressed to ${headers["recipient-id"]}, not ${this.core.self.agentId}`,
        {
          problems: [{ path: `${base}/recipient-id`, message: `expected ${this.core.self.agentId}` }],
        },
      );
    }
    // Dedup happens on the gateway's id, so it must be the id the sender signed.
    if (headers["message-id"] !== frame.id) {
      throw new AcpError(
        "InvalidRequest",
        `delivered as ${frame.id} but signed as ${headers["message-id"]}`,
        {
          problems: [{ path: `${base}/message-id`, message: `does not match the delivery id ${frame.id}` }],
        },
      );
    }
    // Ids are deduplicated by the ledger; the guard bounds how old a delivered message may be.
    this.core.replay.checkTimestamp(headers.timestamp, base);
    await this.core.requireRegisteredPrincipal(verified);
    return verified;
  }

  /** A delivery that fails verification is never acted on: it is rejected (dead-lettered) with the reason. */
  private async refuse(frame: NewMessageFrame, err: unknown): Promise<void> {
    const error = err instanceof AcpError ? err : new AcpError("InternalError", (err as Error).message);
    const peer = peerOf(frame);
    if (error.kind === "SignatureInvalid") this.core.trust.observe(peer, "bad-signature");
    if (HANDSHAKE_METHODS.has(frame.method) || error.kind.startsWith("Signature")) {
      await this.core.record(frame.envelope, "received", peer, {
        step: "verify",
        error: { code: error.code, message: error.message },
      });
    }
    this.core.connection.reject(frame, `${error.code} ${error.message}`);
    this.markHandled(frame);
    this.core.emit(
      "error",
      new AcpError(error.kind, `refused ${frame.id} from ${peer}: ${error.message}`, error.data),
    );
  }

  private async substantive(frame: NewMessageFrame, verified: VerifiedEnvelope, message: MethodMessage) {
    const { core } = this;
    const peer = verified.headers["agent-id"];
    if (this.recovery.holds(peer) || !core.handshakes.isEstablished(peer)) {
      // This agent has no handshake with a sender the gateway vouches completed one: it lost its
      // record. The message waits, unacknowledged, for a fresh handshake (handshake-recovery.ts).
      this.recovery.hold(peer, { frame, verified, message });
      return;
    }
    const expectsAnswer = "id" in message;
    let handshake: PeerHandshake;
    let body: Record<string, unknown>;
    const encrypted = isEncryptedBody(message.params.body);
    try {
      handshake = core.handshakes.requireEstablished(verified.headers, verified.kid);
      body = encrypted
        ? await decryptBody(message.params.body as { jwe: string }, core.identity, peer, core.address)
        : message.params.body;
    } catch (err) {
      const error =
        err instanceof AcpError ? err : new AcpError("DecryptionFailed", "the body cannot be decrypted");
      await this.gateRefused(frame, message, peer, error);
      return;
    }
    await core.record(message, "received", peer);
    core.emit("message", inboundView(verified, body, encrypted));
    const context: InboundContext = {
      from: peer,
      principalId: verified.headers["principal-id"],
      method: message.method,
      type: verified.headers["message-type"],
      id: "id" in message ? (message.id as JsonRpcId) : undefined,
      messageId: verified.headers["message-id"],
      headers: verified.headers,
      encrypted,
      handshake,
      trust: core.trust.get(peer),
    };
    const request = message as MethodMessage & { id: JsonRpcId };
    const run = (release: () => void): Promise<void> | undefined => {
      if (expectsAnswer) {
        return this.responder
          .answer(request, body, context)
          .finally(release)
          .then(() => this.complete(frame));
      }
      const handled = () => {
        release();
        this.complete(frame);
        core.trust.observe(peer, "clean-exchange");
      };
      const running = runNotificationHandlers(core, body, context);
      if (running) return running.then(handled);
      // Synchronous handlers are followed by the handled record in the same turn: nothing else runs
      // between the handler's effect and the record's write (see DeliveryLedger).
      handled();
      return undefined;
    };
    const free = this.handlerSlots.tryAcquire();
    const work = free ? run(free) : this.handlerSlots.acquire().then(run);
    if (work) this.track(work, frame);
  }

  /** A verified message the gate refuses: a notification is rejected, a request answered with the error. */
  private async gateRefused(frame: NewMessageFrame, message: MethodMessage, peer: string, error: AcpError) {
    const { core } = this;
    await core.record(message, "received", peer, { error: { code: error.code, message: error.message } });
    if (!("id" in message)) {
      await this.refuse(frame, error);
      return;
    }
    // The requester is verified, so it gets a signed error response rather than silence.
    await core.send(buildErrorResponse(core.self, message as MethodMessage & { id: JsonRpcId }, error), peer);
    this.complete(frame);
  }

  /** The handshake with `peer` completed (or failed): its held messages go through the gate, in order. */
  private async release(peer: string, failure: AcpError | undefined): Promise<void> {
    for (const { frame, verified, message } of this.recovery.take(peer)) {
      if (failure) await this.gateRefused(frame, message, peer, failure);
      else await this.substantive(frame, verified, message);
    }
  }

  /**
   * Runs work on a delivery beside the others (drain waits for it). With `frame`, a failure leaves
   * the delivery for its redelivery when it says nothing about the message — a response that never
   * reached the gateway (it is down, the agent is closing) is recorded already and goes out again
   * then — and marks it handled otherwise.
   */
  private track(work: Promise<void>, frame?: NewMessageFrame): void {
    const task: Promise<void> = work
      .catch((err: unknown) => {
        const repaired = frame !== undefined && this.settleFailed(frame, err);
        if (repaired) this.gatewayFailed(err as Error);
        else this.core.emit("error", err as Error);
      })
      .finally(() => this.tasks.delete(task));
    this.tasks.add(task);
  }

  /** True when the failure is the gateway's and the redelivery repairs it (the delivery is left for it). */
  private settleFailed(frame: DeliveredRef, err: unknown): boolean {
    if (notTheMessagesFault(err) || submissionUnsettled(err)) {
      this.abandon(frame);
      return true;
    }
    this.markHandled(frame);
    return false;
  }

  /**
   * A failure at the gateway the redelivery repairs: nothing for the application to do while the
   * agent runs (its `degraded` event). One left behind by close() is an `error`: only a restart of
   * the agent repairs it.
   */
  private gatewayFailed(err: Error): void {
    if (this.stopping) this.core.emit("error", err);
    else this.core.health.failed(err);
  }

  private async response(frame: NewMessageFrame, verified: VerifiedEnvelope): Promise<void> {
    const { core } = this;
    const message = verified.message as Extract<AcpMessage, { id: unknown }>;
    const peer = verified.headers["agent-id"];
    const awaited = core.pending.expects(message.id, peer);
    let body: Record<string, unknown> | undefined;
    let encrypted = false;
    let outcome: Parameters<AgentCore["pending"]["settle"]>[1] | undefined;
    if ("error" in message) {
      outcome = { error: errorFromObject(message.error, { peer }) };
      if (awaited) core.trust.observe(peer, "rejected-request");
    } else if ("result" in message) {
      body = message.result.body;
      encrypted = isEncryptedBody(body);
      try {
        if (encrypted) body = await decryptBody(body as { jwe: string }, core.identity, peer, core.address);
        outcome = { body, encrypted };
        if (awaited) core.trust.observe(peer, "clean-exchange");
      } catch (err) {
        outcome = { error: err as AcpError };
      }
    }
    await core.record(message, "received", peer);
    core.emit("message", inboundView(verified, body, encrypted));
    if (awaited && outcome && message.id !== null) core.pending.settle(message.id, outcome);
    this.complete(frame);
  }

  /** Acknowledges once the ledger has the id on disk: a crash in between means a redelivery it recognises. */
  private complete(frame: NewMessageFrame): void {
    const { ledger, connection } = this.core;
    const acknowledged = ledger
      .finish(deliveredKey(frame))
      .catch((err: unknown) => this.core.emit("error", err as Error))
      .then(() => {
        this.inHand.delete(deliveredKey(frame));
        connection.acknowledge(frame);
      })
      .finally(() => this.tasks.delete(acknowledged));
    this.tasks.add(acknowledged);
  }

  /** Handled without an ack (refused, or failed for good): a redelivery is only acknowledged. */
  private markHandled(frame: DeliveredRef): void {
    const key = deliveredKey(frame);
    this.inHand.delete(key);
    this.core.ledger.finish(key).catch((err: unknown) => this.core.emit("error", err as Error));
  }

  /** Not handled after all: the redelivery runs it again. */
  private abandon(frame: DeliveredRef): void {
    const key = deliveredKey(frame);
    this.inHand.delete(key);
    this.core.ledger.abandon(key);
  }
}

/** A failed registry lookup (unreachable, or any HTTP answer) says nothing about the message itself. */
function notTheMessagesFault(err: unknown): boolean {
  return (
    err instanceof GatewayUnreachableError || (err instanceof AcpError && err.data.httpStatus !== undefined)
  );
}

/**
 * Who sent a delivery, as a peer: the frame's sender, or for a message of an agent of another
 * domain (which the gateway names by a system name, `_…`) the address its envelope gives.
 */
function peerOf(frame: NewMessageFrame): string {
  if (!frame.from.startsWith("_")) return frame.from;
  const sender = headersOf(frame.envelope as unknown as AcpMessage)?.["agent-id"];
  return typeof sender === "string" ? sender : frame.from;
}
