import type { HandshakeStep } from "../audit/entry.js";
import type { TrustLedger, TrustRecord } from "../identity/trust.js";
import {
  AcpError,
  type AnnounceBody,
  buildAnnounce,
  buildCapabilities,
  type CapabilitiesBody,
  type EnvelopeHeaders,
  type MethodMessage,
  type SenderIdentity,
  type VerifiedEnvelope,
} from "../protocol/index.js";

/** Where a peer's handshake stands: `established` once all four steps are done. */
export type HandshakeState = "none" | "announcing" | "exchanging-capabilities" | "established";

export interface PeerHandshake {
  peer: string;
  state: HandshakeState;
  announceSent: boolean;
  announceReceived: boolean;
  capabilitiesSent: boolean;
  capabilitiesReceived: boolean;
  principalId?: string;
  /** Key id that signed the peer's announce: later messages must be signed by the same key. */
  kid?: string;
  layers?: number[];
  announce?: AnnounceBody;
  capabilities?: CapabilitiesBody;
  /** Layers both sides declared: communicate at this level, assume nothing above it. */
  commonLayers?: number[];
  /** True when the peer declared no layers and policy accepted it with maximum caution. */
  maximumCaution?: boolean;
  trust?: TrustRecord;
  establishedAt?: string;
}

export interface HandshakeOptions {
  self: SenderIdentity;
  announce: AnnounceBody;
  capabilities: CapabilitiesBody;
  trust: TrustLedger;
  /** What to do with a peer that declares no skill layers: decline (default) or accept with maximum caution. */
  undeclaredLayers?: "decline" | "maximum-caution";
  now?: () => Date;
}

export interface HandshakeEvent {
  peer: string;
  step: HandshakeStep;
  direction: "sent" | "received" | "local";
  state: HandshakeState;
}

/** The methods of the handshake itself: they pass before a peer is established. */
export const HANDSHAKE_METHODS: ReadonlySet<string> = new Set(["agent.announce", "agent.capabilities"]);

/**
 * Layers both declared; the core protocol's "lowest common layer": never assume one the other did not
 * declare.
 */
export function commonLayers(mine: readonly number[], theirs: readonly number[]): number[] {
  const set = new Set(theirs);
  return [...new Set(mine)].filter((layer) => set.has(layer)).sort((a, b) => a - b);
}

/** Same declared layers, in any order (duplicates count). */
function sameLayers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  const sortedB = [...b].sort((x, y) => x - y);
  return [...a].sort((x, y) => x - y).every((layer, i) => layer === sortedB[i]);
}

/**
 * The four-step handshake of the ACP core protocol as an explicit state machine per peer:
 *   1 announce     both sides send a signed `agent.announce` (identity, capabilities, purpose)
 *   2 verify       each verifies the other's signature against the registered key (done by the
 *                  caller's verifyEnvelope before a message reaches this class)
 *   3 capabilities both sides send `agent.capabilities` (tools, domains, limits, requests)
 *   4 trust        each calibrates its trust in the other; the relationship is `established`
 * Only then may substantive messages flow. A message whose signing key, declared layers or principal
 * differ from those seen in the handshake resets the peer to `none`: a new handshake is required.
 * This class does no I/O: it returns the messages to send; the caller signs, sends and audits them.
 */
export class Handshakes {
  private readonly peers = new Map<string, PeerHandshake>();
  private readonly now: () => Date;

  constructor(
    private readonly options: HandshakeOptions,
    private readonly onEvent: (event: HandshakeEvent) => void = () => {},
  ) {
    this.now = options.now ?? (() => new Date());
  }

  /** A copy of the handshake record with `peer` (state `none` if none began). */
  get(peer: string): PeerHandshake {
    return structuredClone(this.peer(peer));
  }

  /** Copies of every peer's handshake record. */
  list(): PeerHandshake[] {
    return [...this.peers.values()].map((p) => structuredClone(p));
  }

  /** Whether all four steps with `peer` completed: only then may other messages flow. */
  isEstablished(peer: string): boolean {
    return this.peers.get(peer)?.state === "established";
  }

  /** Step 1, initiating side: the announce to send to `peer`. */
  start(peer: string): MethodMessage[] {
    const record = this.peer(peer);
    if (record.state === "established") return [];
    return this.sendAnnounce(record);
  }

  /**
   * Handles a verified handshake message from a peer (announce or capabilities) and returns what to
   * send back. Throws LayersDeclined for a peer that declares no layers (unless policy accepts it).
   */
  receive(verified: VerifiedEnvelope): MethodMessage[] {
    const { message, headers, kid } = verified;
    if (!("method" in message))
      throw new AcpError("InvalidRequest", "a handshake message must be a notification");
    const peer = headers["agent-id"];
    if (message.method === "agent.announce") {
      // A fresh announce (the peer restarted, or changed its key) restarts the relationship at step 1.
      if (this.peers.get(peer)?.announceReceived) this.reset(peer);
      return this.receiveAnnounce(this.peer(peer), headers, kid, message.params.body as AnnounceBody);
    }
    const record = this.peer(peer);
    if (message.method === "agent.capabilities") {
      return this.receiveCapabilities(record, kid, message.params.body as CapabilitiesBody);
    }
    throw new AcpError("InvalidRequest", `${message.method} is not a handshake message`);
  }

  /**
   * Gate for substantive messages: throws HandshakeRequired unless the handshake is complete and
   * the message is signed with the handshake's key, declares the same layers and the same
   * principal. A change resets the peer: a new handshake is required.
   */
  requireEstablished(headers: EnvelopeHeaders, kid: string): PeerHandshake {
    const peer = headers["agent-id"];
    const record = this.peers.get(peer);
    if (record?.state !== "established") {
      throw new AcpError(
        "HandshakeRequired",
        `complete the handshake with ${this.options.self.agentId} first`,
        {
          peer,
          state: record?.state ?? "none",
        },
      );
    }
    const changed =
      record.kid !== kid
        ? "signing key"
        : !sameLayers(record.layers ?? [], headers["skill-layers-loaded"])
          ? "declared skill layers"
          : record.principalId !== headers["principal-id"]
            ? "principal-id"
            : undefined;
    if (changed) {
      this.reset(peer);
      throw new AcpError("HandshakeRequired", `${changed} changed since the handshake; handshake again`, {
        peer,
        state: "none",
      });
    }
    return structuredClone(record);
  }

  /** Forgets the handshake with `peer`, so the next exchange starts a new one. */
  reset(peer: string): void {
    this.peers.delete(peer);
  }

  private peer(peer: string): PeerHandshake {
    let record = this.peers.get(peer);
    if (!record) {
      record = {
        peer,
        state: "none",
        announceSent: false,
        announceReceived: false,
        capabilitiesSent: false,
        capabilitiesReceived: false,
      };
      this.peers.set(peer, record);
    }
    return record;
  }

  /** `reply` marks an announce sent because the peer announced: a reply never triggers another. */
  private sendAnnounce(record: PeerHandshake, reply = false): MethodMessage[] {
    record.announceSent = true;
    this.advance(record);
    this.emit(record, "announce", "sent");
    const body = reply ? { ...this.options.announce, reply: true } : this.options.announce;
    return [buildAnnounce(this.options.self, record.peer, body, { now: this.now() })];
  }

  private sendCapabilities(record: PeerHandshake): MethodMessage[] {
    record.capabilitiesSent = true;
    this.advance(record);
    this.emit(record, "capabilities", "sent");
    return [
      buildCapabilities(this.options.self, record.peer, this.options.capabilities, { now: this.now() }),
    ];
  }

  private receiveAnnounce(
    record: PeerHandshake,
    headers: EnvelopeHeaders,
    kid: string,
    body: AnnounceBody,
  ): MethodMessage[] {
    const layers = headers["skill-layers-loaded"];
    if (layers.length === 0 && this.options.undeclaredLayers !== "maximum-caution") {
      this.reset(record.peer);
      throw new AcpError("LayersDeclined", `${record.peer} declares no skill layers; declined`, {
        problems: [
          { path: "/params/headers/skill-layers-loaded", message: "must declare at least one layer" },
        ],
      });
    }
    // Our announce is repeated only for an initiating announce (the peer may have lost ours); a
    // reply announce proves the peer has ours, so answering it with another would loop forever.
    const isReply = (body as { reply?: unknown }).reply === true;
    if (isReply) record.announceSent = true;
    Object.assign(record, {
      announceReceived: true,
      principalId: headers["principal-id"],
      kid,
      layers: [...layers],
      announce: body,
      commonLayers: commonLayers(this.options.self.layers, layers),
      maximumCaution: layers.length === 0,
    });
    this.advance(record);
    this.emit(record, "announce", "received");
    this.emit(record, "verify", "local");
    const out = record.announceSent ? [] : this.sendAnnounce(record, true);
    if (!record.capabilitiesSent) out.push(...this.sendCapabilities(record));
    this.advance(record);
    return out;
  }

  private receiveCapabilities(record: PeerHandshake, kid: string, body: CapabilitiesBody): MethodMessage[] {
    if (!record.announceReceived || record.kid !== kid) {
      throw new AcpError("HandshakeRequired", "capabilities before a verified announce from the same key", {
        peer: record.peer,
        state: record.state,
      });
    }
    record.capabilities = body;
    record.capabilitiesReceived = true;
    this.emit(record, "capabilities", "received");
    const out = record.capabilitiesSent ? [] : this.sendCapabilities(record);
    this.advance(record);
    return out;
  }

  private advance(record: PeerHandshake): void {
    const before = record.state;
    if (
      record.announceSent &&
      record.announceReceived &&
      record.capabilitiesSent &&
      record.capabilitiesReceived
    ) {
      if (before !== "established") {
        record.trust = this.options.trust.establish(
          record.peer,
          record.principalId ?? "",
          record.layers ?? [],
        );
        record.state = "established";
        record.establishedAt = this.now().toISOString();
        this.emit(record, "trust", "local");
      }
    } else if (record.announceSent && record.announceReceived) {
      record.state = "exchanging-capabilities";
    } else if (record.announceSent || record.announceReceived) {
      record.state = "announcing";
    }
  }

  private emit(record: PeerHandshake, step: HandshakeStep, direction: HandshakeEvent["direction"]): void {
    this.onEvent({ peer: record.peer, step, direction, state: record.state });
  }
}
