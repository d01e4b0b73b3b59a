/**
 * Who may talk to this gateway, and with which key: the admission policy (allow list or open),
 * blocks, and key pinning. Every request from a peer passes `authenticate` (its signature by a
 * pinned key, its date, its destination); every call to a peer goes through `admitted`.
 */
import type { IncomingMessage } from "node:http";
import { AcpError, FederationDomain } from "../../protocol/index.js";
import { type GatewayKey, PeerHeader } from "../../wire/federation.js";
import { signingKid, verifyGatewaySignature } from "./gateway-key.js";
import type { PeerLinks } from "./links.js";
import { type PeerClient, pinnableKeys, requestSignatureInput } from "./peer-client.js";
import { notAPeer, type PeerRecord, type PeerStore } from "./peers.js";

/** How far a request's date may be from this gateway's clock. */
const DATE_SKEW_MS = 5 * 60_000;
/** A peer's `/.well-known/acp` is fetched again at most this often (a forged request cannot make it more). */
const REFRESH_INTERVAL_MS = 30_000;
/** How refusals of a domain that is no peer are counted: strangers do not get a series each. */
export const UNKNOWN_PEER = "(unknown)";

export interface PeerGateOptions {
  domain: string;
  /** Any domain whose `/.well-known/acp` verifies may talk to this gateway (pinned at first contact). */
  open: boolean;
  /** Where a domain's `/.well-known/acp` is (the configured resolution, else `https://<domain>`). */
  urlOf(domain: string): string;
}

export class PeerGate {
  private readonly refreshed = new Map<string, number>();
  private readonly refreshing = new Map<string, Promise<PeerRecord>>();

  constructor(
    private readonly peers: PeerStore,
    private readonly client: PeerClient,
    private readonly links: PeerLinks,
    private readonly options: PeerGateOptions,
  ) {}

  /** The label a domain's refusals are counted under. */
  labelOf(domain: string): string {
    return this.peers.get(domain) ? domain : UNKNOWN_PEER;
  }

  /**
   * A peer this gateway talks to, with its endpoint and pinned keys: an allowed peer, or under the
   * open policy any domain whose `/.well-known/acp` verifies (admitted now). Blocked: Forbidden.
   */
  async admitted(domain: string): Promise<PeerRecord> {
    let peer = this.peers.get(domain);
    if (peer?.state === "blocked") {
      throw new AcpError("Forbidden", `${domain} is blocked by this gateway's admin`);
    }
    if (!peer) {
      if (!this.options.open) {
        throw new AcpError(
          "Forbidden",
          `${domain} is not a peer of ${this.options.domain} (an admin adds it: acp federation add ${domain})`,
        );
      }
      peer = await this.admitOnFirstContact(domain);
    }
    if (peer.pinned.length === 0 || peer.endpoint === undefined) peer = await this.refresh(peer, true);
    return peer;
  }

  /**
   * Checks a request from a peer: origin an admitted peer, destination this gateway, date within
   * five minutes, signed by a pinned key of the origin over method, path, the four headers and the
   * body's digest. A key the origin's `/.well-known/acp` now shows but nobody pinned is held for an
   * admin and refused meanwhile. Returns the peer.
   */
  async authenticate(req: IncomingMessage, path: string, body: string): Promise<PeerRecord> {
    const header = (name: string) => {
      const value = req.headers[name];
      return typeof value === "string" ? value : undefined;
    };
    const origin = header(PeerHeader.Origin);
    const destination = header(PeerHeader.Destination);
    const date = header(PeerHeader.Date);
    const signature = header(PeerHeader.Signature);
    if (origin === undefined || !FederationDomain.safeParse(origin).success) {
      throw unauthorized(`${PeerHeader.Origin} is missing or not a domain`);
    }
    const label = this.labelOf(origin);
    try {
      if (destination !== this.options.domain) {
        throw new AcpError("Forbidden", `this gateway is ${this.options.domain}, not ${String(destination)}`);
      }
      const at = date === undefined ? Number.NaN : Date.parse(date);
      if (!Number.isFinite(at) || Math.abs(at - Date.now()) > DATE_SKEW_MS) {
        throw unauthorized(`${PeerHeader.Date} is missing or more than 5 minutes from this gateway's clock`);
      }
      const kid = signingKid(signature);
      if (kid === undefined) throw unauthorized(`${PeerHeader.Signature} is missing or not a detached JWS`);
      const peer = await this.admitted(origin);
      if (!peer.pinned.some((k) => k.kid === kid)) await this.unpinnedKey(peer, kid);
      const signed = requestSignatureInput(req.method ?? "", path, origin, destination, date as string, body);
      try {
        verifyGatewaySignature(signed, signature, peer.pinned);
      } catch (err) {
        throw unauthorized(`the request's signature does not verify: ${(err as Error).message}`);
      }
      this.links.contact(origin);
      return peer;
    } catch (err) {
      this.links.refused(label, err instanceof AcpError ? err.kind : "InternalError");
      throw err;
    }
  }

  /** Checks a record a peer signed (its directory) against the peer's pinned keys. */
  async verifyRecord(peer: PeerRecord, value: { signature: string }): Promise<void> {
    const kid = signingKid(value.signature);
    if (kid !== undefined && !peer.pinned.some((k) => k.kid === kid)) await this.unpinnedKey(peer, kid);
    verifyGatewaySignature(value, value.signature, peer.pinned);
  }

  /** Accepts a peer's pending key change: its pinned keys become those last seen. */
  acceptKeys(domain: string): Promise<PeerRecord> {
    return this.peers.update(domain, (current) => {
      if (!current.pending) {
        throw new AcpError("Conflict", `${domain} has no pending key change`, {
          problems: [{ path: "/domain", message: "no pending key change" }],
        });
      }
      const { pending, ...rest } = current;
      return { ...rest, pinned: pending.keys };
    });
  }

  /**
   * Fetches the peer's `/.well-known/acp` again (at most every 30 s unless `force`): its endpoint;
   * keys pinned at first contact when none are; a set other than the pinned one held as pending.
   */
  refresh(peer: PeerRecord, force = false): Promise<PeerRecord> {
    const last = this.refreshed.get(peer.domain) ?? 0;
    if (!force && Date.now() - last < REFRESH_INTERVAL_MS) return Promise.resolve(peer);
    let running = this.refreshing.get(peer.domain);
    if (!running) {
      this.refreshed.set(peer.domain, Date.now());
      running = this.fetchKeys(peer).finally(() => this.refreshing.delete(peer.domain));
      this.refreshing.set(peer.domain, running);
    }
    return running;
  }

  private async fetchKeys(peer: PeerRecord): Promise<PeerRecord> {
    let doc: Awaited<ReturnType<PeerClient["document"]>>;
    try {
      doc = await this.client.document(peer.url, peer.domain);
    } catch (err) {
      this.links.failed(peer.domain, (err as Error).message);
      throw new AcpError(
        "StorageUnavailable",
        `cannot read ${peer.domain}'s /.well-known/acp: ${(err as Error).message}`,
      );
    }
    const keys = pinnableKeys(doc);
    return this.peers.update(peer.domain, (current) => {
      const next: PeerRecord = { ...current, endpoint: doc.endpoint };
      if (current.pinned.length === 0) return { ...next, pinned: keys };
      if (sameKeys(current.pinned, keys)) {
        const { pending: _resolved, ...rest } = next;
        return rest;
      }
      if (current.pending && sameKeys(current.pending.keys, keys)) return next;
      return { ...next, pending: { keys, seenAt: new Date().toISOString() } };
    });
  }

  /** A request or record signed by a key that is not pinned: a held key change, or a forgery. */
  private async unpinnedKey(peer: PeerRecord, kid: string): Promise<never> {
    const now = await this.refresh(peer).catch(() => peer);
    if (now.pending?.keys.some((k) => k.kid === kid)) {
      throw unauthorized(
        `${peer.domain} now signs with key ${kid}, which is not pinned here: an admin must accept it (acp federation accept-key ${peer.domain})`,
      );
    }
    throw unauthorized(`key ${kid} is not a key of ${peer.domain}`);
  }

  private async admitOnFirstContact(domain: string): Promise<PeerRecord> {
    const url = this.options.urlOf(domain);
    const doc = await this.client.document(url, domain).catch((err: Error) => {
      throw new AcpError(
        "Forbidden",
        `${domain} is not a peer, and its /.well-known/acp does not verify: ${err.message}`,
      );
    });
    const record: PeerRecord = {
      domain,
      state: "allowed",
      url,
      endpoint: doc.endpoint,
      admittedBy: "open-policy",
      pinned: pinnableKeys(doc),
      addedAt: new Date().toISOString(),
    };
    this.refreshed.set(domain, Date.now());
    return this.peers.create(record).catch(() => this.peers.get(domain) ?? Promise.reject(notAPeer(domain)));
  }
}

function sameKeys(a: readonly GatewayKey[], b: readonly GatewayKey[]): boolean {
  const kids = new Set(a.map((k) => k.kid));
  return a.length === b.length && b.every((k) => kids.has(k.kid));
}

function unauthorized(message: string): AcpError {
  return new AcpError("Unauthorized", message);
}
