/**
 * What the relay takes and gives: its options and services, what a submission may say, and what it
 * tells its listeners (relay.ts).
 */
import type { AuditEntryInput, SummaryContext } from "../audit/index.js";
import type { Broker, SubmitResult } from "../broker/index.js";
import type { BrokerKind } from "../broker/types.js";
import type { AcpMessage, EnvelopeHeaders, Priority } from "../protocol/index.js";
import type { HandshakeGate } from "./handshake-gate.js";
import type { Metrics } from "./metrics.js";
import type { RateLimiter } from "./rate-limit.js";
import type { Registry, ResolvedAgent } from "./registry.js";
import type { RelayAudit } from "./relay-audit.js";
import type { ArrivedFrom } from "./remote.js";
import type { StorageFloor } from "./storage-floor.js";

export interface RelayOptions {
  maxEnvelopeBytes: number;
  /** Allowed clock skew of a message's timestamp (default ±5 min). */
  skewMs: number;
  /** The broker's kind, for audit channel names (`embedded:agent.<id>.inbox`). */
  brokerKind: BrokerKind;
  /**
   * Largest `agent.announce` / `agent.capabilities` envelope from a sender whose handshake with
   * the recipient is not complete (anyone may send those, so anyone could fill inboxes with them).
   */
  handshakeBytes: number;
  /** Refuses new submissions while storage is below its floor. */
  storage: StorageFloor;
}

/**
 * A message the relay accepted and handed to the broker. Emitted before the broker has it (its
 * change event may come first), so a listener learns of `stored`'s outcome from the promise.
 */
export interface AcceptedMessage {
  /** The message-id header. */
  id: string;
  /** Its audit entry, with the one-line summary principals see. */
  entry: AuditEntryInput;
  /** The broker's answer: rejected when it refused the write; `duplicate` for a resubmission. */
  stored: Promise<SubmitResult>;
  /** The recipient's agent id. */
  to: string;
  /** The text stored and delivered, and the message parsed (and validated) from it. */
  envelope: string;
  message: AcpMessage;
  /**
   * The registered key this relay verified the signature against; undefined when it did not
   * re-verify a signature made in this process (`signedHere`).
   */
  verifiedKid: string | undefined;
}

export type AcceptedListener = (accepted: AcceptedMessage) => void;

/**
 * Runs on a message that arrived from a peer gateway once every relay check passed and before it is
 * stored: an extension applies what it means to state it keeps (a negotiation's next move), or
 * throws an AcpError to refuse it (the peer hears the refusal). Must be idempotent: a message
 * forwarded twice is checked twice.
 */
export type ArrivalCheck = (arrival: {
  sender: ResolvedAgent;
  message: AcpMessage;
  headers: EnvelopeHeaders;
}) => Promise<void>;

export interface SubmitOptions {
  /**
   * The signature was made in this process with the private key of the sender's registered key,
   * proven by an earlier message of the same signer that this relay verified (the gateway's own
   * agents, InProcessConnection): the relay checks that it names that key and skips the Ed25519
   * verify. Every other check runs; the recipient still verifies the signature.
   */
  signedHere?: boolean;
  /**
   * What the submitting extension knows beyond the message (a negotiation's round limit, a vote's
   * question), for the summary the gateway writes when the sender gave none.
   */
  summaryContext?: SummaryContext;
  /** How the message ranks in the recipient's queue (default medium): the sender's choice, not signed. */
  priority?: Priority;
  /**
   * When the gateway first took this envelope in (ms), for one it held back (a handoff offer kept
   * until its pair's handshake completed): freshness is judged at that time. Only the gateway's own
   * code passes it; an HTTP or WebSocket submission never does.
   */
  receivedAt?: number;
  /**
   * The message arrived from a peer gateway (federation) on behalf of `sender`, an agent of that
   * peer's domain resolved from its home directory (its address and qualified principal in
   * `record`). It is stored as from the peer's inbox, and may be as old as the peer's queue kept it.
   */
  arrived?: ArrivedFrom;
  /**
   * The route of the socket it came through (`<broker instance>/<socket>`): the answer to a
   * request, and the peer's handshake replies to an announce, go back to that socket.
   */
  replyTo?: string;
}

/** The gateway services the relay uses. */
export interface RelayDeps {
  broker: Broker;
  registry: Registry;
  gate: HandshakeGate;
  limiter: RateLimiter;
  metrics: Metrics;
  /** The relay audit log; omitted when the gateway keeps none. */
  audit: RelayAudit | undefined;
}
