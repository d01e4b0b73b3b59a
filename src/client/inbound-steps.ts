import type { PeerHandshake } from "../handshake/index.js";
import {
  AcpError,
  type AcpMessage,
  type JsonRpcId,
  type MethodMessage,
  messageKind,
  type VerifiedEnvelope,
} from "../protocol/index.js";
import type { AgentCore } from "./agent-core.js";
import type { NewMessageFrame } from "./connection.js";
import type { InboundContext, InboundMessage } from "./types.js";

/**
 * Parts of the receive side (inbound.ts) that stand on their own: the handshake steps a peer
 * sends, the application's notification handlers, and the `message` event's view of a message.
 */

const MAX_ANNOUNCES = 5;
const ANNOUNCE_WINDOW_MS = 10_000;

/** What a handshake step needs from the delivery pipeline. */
export interface StepOutcome {
  refuse(frame: NewMessageFrame, err: unknown): Promise<void>;
  complete(frame: NewMessageFrame): void;
}

/** A peer's `agent.announce` and `agent.capabilities`: answered, remembered, audited. */
export class HandshakeSteps {
  private readonly announces = new Map<string, number[]>();

  constructor(
    private readonly core: AgentCore,
    private readonly outcome: StepOutcome,
  ) {}

  async take(frame: NewMessageFrame, verified: VerifiedEnvelope, message: MethodMessage): Promise<void> {
    const { core } = this;
    const peer = verified.headers["agent-id"];
    await core.record(message, "received", peer);
    core.emit("message", inboundView(verified, message.params.body, false));
    const wasEstablished = core.handshakes.isEstablished(peer);
    let replies: MethodMessage[];
    try {
      if (message.method === "agent.announce") this.checkAnnounceRate(peer);
      replies = core.handshakes.receive(verified);
    } catch (err) {
      await this.outcome.refuse(frame, err);
      return;
    }
    if (message.method === "agent.announce") {
      await core.record(message, "received", peer, {
        step: "verify",
        summary: `Verified ${peer}'s announce signature (key ${verified.kid}).`,
      });
    }
    for (const reply of replies) await core.send(reply, peer);
    await core.rememberHandshake(peer, message);
    const record = core.handshakes.get(peer);
    if (!wasEstablished && record.state === "established") {
      await core.record(message, "received", peer, { step: "trust", summary: trustSummary(record) });
    }
    core.handshakeProgressed(peer);
    this.outcome.complete(frame);
  }

  /**
   * Each repeated announce restarts the handshake and is answered with an announce. Two agents
   * whose handshake records got out of step could answer each other forever; a peer announcing
   * more than MAX_ANNOUNCES times in ANNOUNCE_WINDOW_MS is refused until it calms down.
   */
  private checkAnnounceRate(peer: string): void {
    const now = Date.now();
    const recent = (this.announces.get(peer) ?? []).filter((at) => now - at < ANNOUNCE_WINDOW_MS);
    recent.push(now);
    this.announces.set(peer, recent);
    if (recent.length > MAX_ANNOUNCES) {
      throw new AcpError(
        "Conflict",
        `${peer} announced ${recent.length} times within ${ANNOUNCE_WINDOW_MS} ms; ignored`,
      );
    }
  }
}

function trustSummary(record: PeerHandshake): string {
  const trust = record.trust;
  const level = trust ? `${trust.level} (score ${trust.score})` : "unknown";
  return `Handshake with ${record.peer} complete; initial trust ${level}; common layers [${(record.commonLayers ?? []).join(", ")}].`;
}

/**
 * Runs the notification handlers from `from` on, one after another: a promise if one of them
 * returned one, nothing when all ran synchronously. A handler that throws is reported and the
 * next one still runs.
 */
export function runNotificationHandlers(
  core: AgentCore,
  body: Record<string, unknown>,
  context: InboundContext,
  from = 0,
): Promise<void> | undefined {
  const handlers = core.handlers.notifications;
  for (let i = from; i < handlers.length; i++) {
    let result: unknown;
    try {
      result = handlers[i]!(body, context);
    } catch (err) {
      core.emit("error", err as Error);
      continue;
    }
    if (isThenable(result)) {
      return Promise.resolve(result).then(
        () => runNotificationHandlers(core, body, context, i + 1),
        (err: unknown) => {
          core.emit("error", err as Error);
          return runNotificationHandlers(core, body, context, i + 1);
        },
      );
    }
  }
  return undefined;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** The `message` event's view of a verified message (`body` decrypted, if it was encrypted). */
export function inboundView(
  verified: VerifiedEnvelope,
  body: Record<string, unknown> | undefined,
  encrypted: boolean,
): InboundMessage {
  const { message, headers } = verified;
  return {
    kind: messageKind(message as AcpMessage),
    method: "method" in message ? message.method : "agent.response",
    from: headers["agent-id"],
    principalId: headers["principal-id"],
    messageId: headers["message-id"],
    id: "id" in message ? (message.id as JsonRpcId | null) : undefined,
    headers,
    body,
    error: "error" in message ? message.error : undefined,
    encrypted,
    envelope: message,
  };
}
