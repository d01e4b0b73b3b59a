import { createHash } from "node:crypto";
import type { Broker, KvBucket } from "../broker/index.js";
import { isWriteConflict } from "../broker/errors.js";
import { WatchedReads } from "../broker/watched-reads.js";
import { AcpError, type EnvelopeHeaders } from "../protocol/index.js";

/** One side of a pair's handshake, as the gateway saw it relayed. */
interface Side {
  kid: string;
  layers: number[];
  announced: boolean;
  capabilities: boolean;
  at: string;
  /** The route of the socket this side's last handshake message came through: its replies go there. */
  replyTo?: string;
}

type PairState = Record<string, Side>;

/**
 * One agent's side of its latest handshake with another, as relayed: its signed `agent.announce`
 * and `agent.capabilities` (the envelope texts). Bucket `handshake-proofs`, key `<from>.<to>`.
 */
export interface HandshakeProof {
  announce: string;
  capabilities?: string;
}

/** Complete pairs kept in memory (least recently used dropped first); the rest are read again. */
const CACHED_PAIRS = 100_000;

/**
 * The gateway's view of each pair's four-step handshake (bucket `handshakes`, key `<a>.<b>` with
 * a < b), built from the announce and capabilities messages it relays. Substantive messages between
 * a pair are relayed only once both sides announced and exchanged capabilities, signed with the
 * keys and declaring the layers they announced; any change resets the pair (the ACP core protocol: "no
 * substantive messages before the four-step handshake completes").
 */
export class HandshakeGate {
  private readonly bucket: KvBucket<PairState>;
  /**
   * Complete pairs only: an incomplete one is read again, so it cannot stick once completed
   * elsewhere. The bucket's watch drops a pair changed anywhere (another gateway on the same NATS
   * too), a read overtaken by such a change is not kept, and an entry is re-read once a minute old.
   */
  private readonly pairs: WatchedReads<PairState | undefined>;

  private readonly proofs: KvBucket<HandshakeProof>;

  constructor(broker: Broker, options: { now?: () => number } = {}) {
    this.bucket = broker.kv<PairState>("handshakes");
    this.proofs = broker.kv<HandshakeProof>("handshake-proofs");
    this.pairs = new WatchedReads<PairState | undefined>(this.bucket, {
      max: CACHED_PAIRS,
      ...(options.now ? { now: options.now } : {}),
    });
  }

  start(): Promise<void> {
    return this.pairs.start();
  }

  stop(): void {
    this.pairs.close();
  }

  /**
   * Records an announce or capabilities message being relayed from `headers.agent-id`, sent
   * through the socket with route `via.replyTo`, and keeps its signed text (`envelope`) as that
   * side's proof for the recipient (`proof`). Returns the route it goes to when it answers the
   * recipient's own handshake (`via.isReply`: a reply announce, or capabilities): the socket the
   * recipient's last handshake message came through.
   */
  async observe(
    method: "agent.announce" | "agent.capabilities",
    headers: EnvelopeHeaders,
    kid: string,
    envelope?: string,
    via: { replyTo?: string | undefined; isReply?: boolean } = {},
  ): Promise<string | undefined> {
    const route = await this.observeState(method, headers, kid, via);
    if (envelope !== undefined) await this.keepProof(method, headers, envelope);
    return route;
  }

  /**
   * The signed announce and capabilities `from` last sent `to` (a completed side has both): what
   * `to` needs to re-establish a handshake it lost its record of, verifiable against `from`'s key.
   */
  async proof(from: string, to: string): Promise<HandshakeProof | undefined> {
    return (await this.proofs.get(proofKey(from, to)))?.value ?? undefined;
  }

  private async keepProof(
    method: "agent.announce" | "agent.capabilities",
    headers: EnvelopeHeaders,
    envelope: string,
  ): Promise<void> {
    const key = proofKey(headers["agent-id"], headers["recipient-id"]);
    if (method === "agent.announce") {
      await this.proofs.put(key, { announce: envelope }); // a fresh announce starts the side over
      return;
    }
    const current = (await this.proofs.get(key))?.value;
    if (current) await this.proofs.put(key, { announce: current.announce, capabilities: envelope });
  }

  private async observeState(
    method: "agent.announce" | "agent.capabilities",
    headers: EnvelopeHeaders,
    kid: string,
    via: { replyTo?: string | undefined; isReply?: boolean },
  ): Promise<string | undefined> {
    const from = headers["agent-id"];
    const key = pairKey(from, headers["recipient-id"]);
    for (let attempt = 0; attempt < 5; attempt++) {
      const entry = await this.bucket.get(key);
      const state: PairState = { ...(entry?.value ?? {}) };
      const side = state[from];
      const at = new Date().toISOString();
      const replyTo = via.replyTo ? { replyTo: via.replyTo } : {};
      if (method === "agent.announce") {
        state[from] = {
          kid,
          layers: [...headers["skill-layers-loaded"]],
          announced: true,
          capabilities: false,
          at,
          ...replyTo,
        };
      } else {
        if (!side?.announced || side.kid !== kid) {
          throw new AcpError(
            "HandshakeRequired",
            "agent.capabilities before a verified agent.announce with the same key",
            {
              peer: headers["recipient-id"],
            },
          );
        }
        state[from] = { ...side, capabilities: true, at, ...replyTo };
      }
      try {
        if (entry) await this.bucket.update(key, state, entry.revision);
        else await this.bucket.create(key, state);
        if (isComplete(state, from, headers["recipient-id"])) this.pairs.remember(key, state);
        else this.pairs.forget(key);
        return via.isReply ? state[headers["recipient-id"]]?.replyTo : undefined;
      } catch (err) {
        if (!isWriteConflict(err)) throw err;
      }
    }
    throw new AcpError("Conflict", "the handshake state changed concurrently; retry");
  }

  /** When `from` last announced itself to `to` (its side of the pair), if it has. */
  async announcedAt(from: string, to: string): Promise<number | undefined> {
    const side = (await this.bucket.get(pairKey(from, to)))?.value?.[from];
    return side?.announced ? Date.parse(side.at) : undefined;
  }

  /** Whether `from` and `to` completed the handshake (cached like `require`'s reads). */
  async completed(from: string, to: string): Promise<boolean> {
    const key = pairKey(from, to);
    const state = await this.pairs.read(key, async () => (await this.bucket.get(key))?.value);
    const complete = state !== undefined && isComplete(state, from, to);
    if (!complete) this.pairs.forget(key);
    return complete;
  }

  /**
   * Throws HandshakeRequired unless the pair completed the handshake with these keys and layers.
   * A response answers a request that already passed this gate; while the pair re-handshakes it is
   * still relayed as long as its signer announced with the same key, so a reply in flight is not lost.
   */
  async require(headers: EnvelopeHeaders, kid: string, isResponse = false): Promise<void> {
    const from = headers["agent-id"];
    const to = headers["recipient-id"];
    const key = pairKey(from, to);
    const state = await this.pairs.read(key, async () => (await this.bucket.get(key))?.value);
    const complete = state !== undefined && isComplete(state, from, to);
    // Another gateway may complete the pair at any moment: an incomplete state is read again.
    if (!complete) this.pairs.forget(key);
    const mine = state?.[from];
    if (isResponse && mine?.announced && mine.kid === kid) return;
    if (!complete || !mine) {
      throw new AcpError(
        "HandshakeRequired",
        `complete the four-step handshake between ${from} and ${to} first`,
        { peer: to, missing: missingSteps(state, from, to) },
      );
    }
    const sameLayers = sameLayerSet(headers["skill-layers-loaded"], mine.layers);
    if (mine.kid !== kid || !sameLayers) {
      await this.bucket.delete(key);
      this.pairs.forget(key);
      throw new AcpError(
        "HandshakeRequired",
        mine.kid !== kid
          ? "the signing key changed since the handshake; handshake again"
          : "declared skill layers changed since the handshake; handshake again",
        { peer: to },
      );
    }
  }
}

function isComplete(state: PairState, a: string, b: string): boolean {
  const [one, other] = [state[a], state[b]];
  return Boolean(one?.announced && one.capabilities && other?.announced && other.capabilities);
}

/** One agent's handshake message, as named in a refusal's `data.missing`. */
interface HandshakeStep {
  agentId: string;
  method: "agent.announce" | "agent.capabilities";
}

/** The handshake messages the gateway has not relayed yet for the pair, in protocol order. */
function missingSteps(state: PairState | undefined, a: string, b: string): HandshakeStep[] {
  const missing: HandshakeStep[] = [];
  for (const agentId of [a, b])
    if (!state?.[agentId]?.announced) missing.push({ agentId, method: "agent.announce" });
  for (const agentId of [a, b])
    if (!state?.[agentId]?.capabilities) missing.push({ agentId, method: "agent.capabilities" });
  return missing;
}

const sortedKey = (layers: readonly number[]) => [...layers].sort((a, b) => a - b).join(",");

/** The same layers in any order. Checked on every message: the usual case (same order) allocates nothing. */
function sameLayerSet(declared: readonly number[], handshaken: readonly number[]): boolean {
  if (declared.length !== handshaken.length) return false;
  for (let i = 0; i < declared.length; i++) {
    if (declared[i] !== handshaken[i]) return sortedKey(declared) === sortedKey(handshaken);
  }
  return true;
}

function proofKey(from: string, to: string): string {
  if (!from.includes("@") && !to.includes("@")) return `${from}.${to}`;
  return `fed/${createHash("sha256").update(`${from} ${to}`).digest("base64url")}`;
}

/**
 * `<a>.<b>` with a < b. A pair with an agent of another domain (an address, docs/federation.md) is
 * named by a hash instead: `@` is not a key character, and two addresses may exceed a key's length.
 */
function pairKey(a: string, b: string): string {
  const [first, second] = a < b ? [a, b] : [b, a];
  if (!first.includes("@") && !second.includes("@")) return `${first}.${second}`;
  return `fed/${createHash("sha256").update(`${first} ${second}`).digest("base64url")}`;
}
