import type { VerifiedEnvelope } from "../protocol/index.js";
import type { ServerFrame, SubmitResponse } from "../wire/api.js";
import type { VersionDeprecation } from "../wire/versions.js";
import type { ResubmitInfo, SubmitOptions } from "./outbox.js";

export type NewMessageFrame = Extract<ServerFrame, { type: "new_message" }>;

/**
 * A delivery as the agent receives it. `verifiedByRelay` is set only by a connection inside the
 * gateway (InProcessConnection) when the relay of that same process verified these exact bytes
 * (structure, and the signature against the sender's registered key): the agent then skips
 * verifying them again and still checks routing, id and freshness.
 */
export type DeliveredFrame = NewMessageFrame & { verifiedByRelay?: VerifiedEnvelope };

/** What names a delivered message: its id and its sender (message ids are per sender). */
export type DeliveredRef = Pick<NewMessageFrame, "id" | "from">;

/** The one string naming a delivered message in the agent's own records (its handled ledger). */
export function deliveredKey({ from, id }: DeliveredRef): string {
  return `${from}/${id}`;
}

export interface ReconnectOptions {
  /** First delay after a lost connection (default 250 ms); doubles per failed attempt. */
  initialDelayMs?: number;
  /** Upper bound of the delay (default 10 s). Each delay is jittered to 50-100 % of its value. */
  maxDelayMs?: number;
}

export interface ConnectionEvents {
  message(frame: DeliveredFrame): void;
  /** `deprecation`: the gateway announced that this agent's protocol version is deprecated. */
  connected(info: {
    gateway: string;
    heartbeatMs: number;
    /** A first delivery's ack wait at this gateway: held deliveries get `working` well within it. */
    ackWaitMs: number;
    reconnected: boolean;
    deprecation?: VersionDeprecation;
  }): void;
  disconnected(info: { code: number; reason: string; willReconnect: boolean }): void;
  resubmit(info: ResubmitInfo): void;
  /** A failure at the gateway that the SDK works around (see health.ts). */
  degraded(err: Error): void;
  /** The gateway did its part: a submission accepted, a delivery handed over. */
  succeeded(): void;
  error(err: Error): void;
}

/**
 * How an agent reaches its gateway: the WebSocket below, or (for a gateway's own agents, such as
 * its A2A bridge) a connection to the relay and broker in the same process.
 */
export interface AgentConnection {
  readonly isReady: boolean;
  /** Resolves once deliveries flow; rejects if this first attempt fails. */
  connect(): Promise<void>;
  /** Resolves with the gateway's acceptance of the signed envelope. */
  submit(envelope: Record<string, unknown>, options: SubmitOptions): Promise<SubmitResponse>;
  /** False when the message cannot be acknowledged now (the gateway redelivers it). */
  acknowledge(message: DeliveredRef): boolean;
  reject(message: DeliveredRef, reason: string): boolean;
  /** The agent is still working on delivery `message`: its ack wait starts again. False when not connected. */
  working(message: DeliveredRef): boolean;
  close(): Promise<void>;
}
