/**
 * A federating gateway's parts, wired together: its key and document, its peers and their gate,
 * the directory (its own agents' records, and other domains'), a forwarder per admitted peer, the
 * receiver of transfers, the log of forwarded messages. It is the core's `registry.remote`
 * (`RemoteAgents`): the relay asks it about agents of other domains.
 */
import { readFileSync } from "node:fs";
import { QUOTA_RETRY_AFTER_SECONDS } from "../../broker/errors.js";
import type { KvBucket, MessageRecord } from "../../broker/index.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { AgentRecord, ResolvedAgent } from "../../gateway/registry.js";
import { RateLimiter } from "../../gateway/rate-limit.js";
import type { RemoteAgents, RemoteProgress, RemoteRecipient } from "../../gateway/remote.js";
import { AcpError, domainOf, jwkThumbprint } from "../../protocol/index.js";
import type { AgentView } from "../../wire/agents.js";
import {
  FEDERATION_PREFIX,
  type FederationDocument,
  type GatewayKey,
  type PeerView,
  StatusResponse,
} from "../../wire/federation.js";
import { peerInbox, RemoteDirectory, remoteAgentOf } from "./directory.js";
import { ForwardedLog, type SentRef } from "./forwarded.js";
import { Forwarder, type RetryOptions } from "./forwarder.js";
import { GatewaySigner } from "./gateway-key.js";
import { DEFAULT_PEER_INBOUND, PeerInbound } from "./inbound.js";
import { PeerLinks } from "./links.js";
import { type FederationListener, listen } from "./listener.js";
import { PeerClient } from "./peer-client.js";
import { PeerGate } from "./peer-gate.js";
import { type PeerRecord, PeerStore } from "./peers.js";
import { Receiver } from "./receiver.js";

/** How often the peers' queue depths are counted for /metrics. */
const QUEUE_COUNT_MS = 5_000;

export interface FederationOptions {
  /** This gateway's federation name: its agents are `agent-id@<domain>` to other domains. */
  domain: string;
  /** The gateway's data directory: the federation key is `<data>/federation/gateway-key.json`. */
  data: string;
  /** The federation listener. Default 127.0.0.1:8448. */
  listen?: { host?: string; port?: number };
  /** Its TLS certificate and key (PEM files). Required unless `insecureLoopback`. */
  tls?: { cert: string; key: string };
  /** CA certificates (PEM files) trusted for peers besides the system's. */
  ca?: string[];
  /** The listener's URL as peers see it (behind a proxy); default the address bound. */
  publicUrl?: string;
  /** Any domain whose `/.well-known/acp` verifies may talk to this gateway (default: admitted peers only). */
  open?: boolean;
  /**
   * Where some domains' gateways are, by domain (`{"b.example": "https://gw.b.example:8448"}`):
   * the URL of the `/.well-known/acp` of a peer added without one, and of a first contact under the
   * open policy, instead of `https://<domain>`. Configuration only (no request sets it); each URL
   * still passes the TLS rule and the outbound URL policy, and the document there must be the
   * domain's own, signed by its keys.
   */
  resolve?: Record<string, string>;
  /** Test mode: plain HTTP on loopback, for the listener and for peers' URLs. Never in production. */
  insecureLoopback?: boolean;
  /** The backoff of a forwarder while its peer cannot be reached (default 1 s doubling to 5 min). */
  retry?: RetryOptions;
  /** How often peers are asked about forwarded messages not settled yet. Default 2 s. */
  statusPollMs?: number;
  /** How long another domain's directory record is used before it is fetched again. Default 60 s. */
  directoryTtlMs?: number;
  /** Messages per second one peer may deliver (burst 2×). Default 1,000. */
  peerRatePerSecond?: number;
  /** How old an arriving message may be (the gateway's retention). Default 7 days. */
  retentionMs?: number;
  /** How long a call to a peer may take. Default 10 s. */
  timeoutMs?: number;
  /**
   * What one peer's outbound queue here may hold (messages not yet at the peer): past either, a
   * local sender's message to that domain is refused with -32013 and nothing is stored, so a peer
   * down for good cannot fill the disk. Defaults: 100,000 messages, 1 GiB.
   */
  peerQueue?: { messages?: number; bytes?: number };
  /**
   * What one peer's agents may have pending here (stored, not yet acknowledged, failed or
   * expired): past either, the peer's next message is refused with -32013 for now, and its gateway
   * sends it again after its backoff. Defaults: 100,000 messages, 1 GiB.
   */
  peerInbound?: { messages?: number; bytes?: number };
}

/** The broker's default retention (7 days), when the gateway sets none. */
const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60_000;

/** The bound of each peer's outbound queue when none is configured. */
export const DEFAULT_PEER_QUEUE = { messages: 100_000, bytes: 1024 * 1024 * 1024 };

export class Federation implements RemoteAgents {
  readonly peers: PeerStore;
  readonly links: PeerLinks;
  readonly gate: PeerGate;
  readonly client: PeerClient;
  readonly directory: RemoteDirectory;
  readonly forwarded: ForwardedLog;
  readonly receiver: Receiver;
  readonly inbound: PeerInbound;
  private readonly forwarders = new Map<string, Forwarder>();
  private readonly keys: KvBucket<GatewayKey>;
  private readonly resolved: ReadonlyMap<string, string>;
  private listener: FederationListener | undefined;
  private unwatchPeers: (() => void) | undefined;
  private counting: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(
    readonly ctx: GatewayContext,
    readonly options: FederationOptions,
    readonly signer: GatewaySigner,
  ) {
    const ca = options.ca?.map((file) => readFileSync(file, "utf8"));
    this.peers = new PeerStore(ctx.broker);
    this.links = new PeerLinks(ctx.metrics);
    this.client = new PeerClient({
      signer,
      domain: options.domain,
      outbound: ctx.outbound,
      ca,
      insecureLoopback: options.insecureLoopback ?? false,
      timeoutMs: options.timeoutMs ?? 10_000,
    });
    this.resolved = new Map(Object.entries(options.resolve ?? {}));
    for (const [domain, url] of this.resolved) this.client.checkUrl(url, `the URL of ${domain} (resolve)`);
    this.gate = new PeerGate(this.peers, this.client, this.links, {
      domain: options.domain,
      open: options.open ?? false,
      urlOf: (domain) => this.urlOf(domain),
    });
    this.directory = new RemoteDirectory(this.gate, this.client, options.directoryTtlMs ?? 60_000);
    this.forwarded = new ForwardedLog(
      ctx.broker,
      options.domain,
      (peer, messages) => this.askStatus(peer, messages),
      options.statusPollMs ?? 2_000,
    );
    const rate = options.peerRatePerSecond ?? 1_000;
    this.inbound = new PeerInbound(
      ctx.broker,
      {
        messages: options.peerInbound?.messages ?? DEFAULT_PEER_INBOUND.messages,
        bytes: options.peerInbound?.bytes ?? DEFAULT_PEER_INBOUND.bytes,
      },
      this.retentionMs,
      ctx.metrics,
    );
    this.receiver = new Receiver({
      relay: ctx.relay,
      broker: ctx.broker,
      directory: this.directory,
      links: this.links,
      limiter: new RateLimiter(rate, rate * 2),
      inbound: this.inbound,
      maxAgeMs: this.retentionMs,
    });
    this.keys = ctx.broker.kv<GatewayKey>("federation-keys");
  }

  static async open(ctx: GatewayContext, options: FederationOptions): Promise<Federation> {
    const signer = await GatewaySigner.open(options.data, options.domain);
    return new Federation(ctx, options, signer);
  }

  get domain(): string {
    return this.options.domain;
  }

  /** The gateway's retention: how long a message may wait in a peer's queue, and how old one may arrive. */
  get retentionMs(): number {
    return this.options.retentionMs ?? DEFAULT_RETENTION_MS;
  }

  /** Where `domain`'s `/.well-known/acp` is, unless an admin gave its peer another URL. */
  urlOf(domain: string): string {
    return this.resolved.get(domain) ?? `https://${domain}`;
  }

  /** Where peers reach this gateway: the configured public URL, else the listener as bound. */
  get endpoint(): string {
    const base = this.options.publicUrl ?? this.listener?.url ?? "";
    return `${base.replace(/\/$/, "")}${FEDERATION_PREFIX}`;
  }

  /** Opens the listener (with `router`), the peers, and a forwarder per admitted peer. */
  async start(router: Parameters<typeof listen>[1]): Promise<void> {
    await this.keys.put(jwkThumbprint(this.signer.publicKey), this.signer.publicKey);
    await this.peers.start();
    this.listener = await listen(
      {
        host: this.options.listen?.host ?? "127.0.0.1",
        port: this.options.listen?.port ?? 8448,
        ...(this.options.tls && { tls: this.options.tls }),
        insecureLoopback: this.options.insecureLoopback ?? false,
      },
      router,
      this.ctx.logger,
    );
    await this.forwarded.start();
    await this.inbound.start();
    this.unwatchPeers = this.peers.onChange((domain, record) => void this.peerChanged(domain, record));
    for (const peer of this.peers.list()) await this.peerChanged(peer.domain, peer);
    // The queues' depths for /metrics (a scrape cannot wait for the broker).
    this.counting = setInterval(() => void this.countQueues(), QUEUE_COUNT_MS);
    this.counting.unref();
  }

  private async countQueues(): Promise<void> {
    for (const peer of this.peers.list()) {
      const usage = await this.ctx.broker.usage(peerInbox(peer.domain)).catch(() => undefined);
      if (usage) this.links.queued(peer.domain, usage.pendingMessages);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.counting);
    this.unwatchPeers?.();
    this.forwarded.stop();
    this.inbound.stop();
    await Promise.all([...this.forwarders.values()].map((f) => f.close()));
    this.forwarders.clear();
    await this.listener?.close();
    this.peers.stop();
  }

  /** GET /.well-known/acp: this domain, its gateways' keys, the endpoint, the versions; signed. */
  async document(): Promise<FederationDocument> {
    const keys: GatewayKey[] = [];
    for (const thumbprint of await this.keys.keys()) {
      const entry = await this.keys.get(thumbprint);
      if (entry) keys.push(entry.value);
    }
    if (!keys.some((k) => k.kid === this.signer.kid)) keys.push(this.signer.publicKey);
    return this.signer.sign({
      domain: this.domain,
      endpoint: this.endpoint,
      keys: keys.filter((k) => k.kid.startsWith(`${this.domain}#`)).slice(0, 16),
      versions: this.ctx.registry.versions.spoken(),
    });
  }

  /** A peer called: whatever waits for it is sent now. */
  contacted(domain: string): void {
    this.forwarders.get(domain)?.wake();
  }

  // RemoteAgents: what the core asks about agents of other domains.

  async recipient(address: string): Promise<RemoteRecipient> {
    const domain = domainOf(address) as string;
    await this.gate.admitted(domain);
    await this.checkQueueRoom(domain);
    const record = await this.directory.lookup(address);
    if (!record || record.revokedAt) {
      throw new AcpError(
        "UnknownRecipient",
        record ? `${address} was revoked by ${domain}` : `${domain} has no agent ${address}`,
        {
          problems: [
            { path: "/params/headers/recipient-id", message: record ? "revoked" : "not an agent there" },
          ],
        },
      );
    }
    return {
      ...(remoteAgentOf(record) as NonNullable<ReturnType<typeof remoteAgentOf>>),
      inbox: peerInbox(domain),
    };
  }

  /** Refuses a message for `domain` while its outbound queue here is at its bound (`peerQueue`). */
  private async checkQueueRoom(domain: string): Promise<void> {
    const usage = await this.ctx.broker.usage(peerInbox(domain));
    const messages = this.options.peerQueue?.messages ?? DEFAULT_PEER_QUEUE.messages;
    const bytes = this.options.peerQueue?.bytes ?? DEFAULT_PEER_QUEUE.bytes;
    const [quota, limit, used] =
      usage.pendingMessages >= messages
        ? (["peer-queue-messages", messages, usage.pendingMessages] as const)
        : usage.pendingBytes >= bytes
          ? (["peer-queue-bytes", bytes, usage.pendingBytes] as const)
          : [undefined, 0, 0];
    if (quota === undefined) return;
    const unit = quota === "peer-queue-messages" ? "messages" : "bytes";
    throw new AcpError(
      "RateLimited",
      `${used} ${unit} already wait here for ${domain}, the bound of its queue (${limit} ${unit}): ${domain} has not taken them yet; nothing was stored, try again once it has`,
      {
        quota,
        limit,
        used,
        retryAfterSeconds: QUOTA_RETRY_AFTER_SECONDS,
        problems: [{ path: "/params/headers/recipient-id", message: `${domain}'s queue here is full` }],
      },
    );
  }

  async view(address: string): Promise<AgentView | undefined> {
    const record = await this.directory.lookup(address).catch(() => null);
    if (!record) return undefined;
    return {
      agent_id: record.address,
      address: record.address,
      principal_id: record.principalId,
      signing: record.signing,
      ...(record.encryption && { encryption: record.encryption }),
      ...(record.keyHistory.length > 0 && { key_history: record.keyHistory }),
      capabilities: [],
      protocol_versions: record.protocolVersions,
      created_at: record.issuedAt,
      ...(record.revokedAt && { revoked_at: record.revokedAt }),
      // Presence stays with the agent's own gateway; the view shows what the directory says.
      presence: {
        state: "offline",
        load: 0,
        metrics: { response_time_ms: 0, error_rate: 0 },
        active_tasks: 0,
        tasks: [],
        last_seen: record.issuedAt,
        connections: 0,
      },
    };
  }

  known(): AgentRecord[] {
    const exchanging = new Set(
      this.peers
        .list()
        .filter((peer) => peer.state !== "blocked")
        .map((peer) => peer.domain),
    );
    return this.directory
      .cached()
      .filter((record) => !record.revokedAt && exchanging.has(domainOf(record.address) as string))
      .map((record) => (remoteAgentOf(record) as ResolvedAgent).record);
  }

  progress(record: MessageRecord): Promise<RemoteProgress | undefined> {
    return this.forwarded.progress(record);
  }

  // Peers, as the admin manages them.

  async peerViews(): Promise<PeerView[]> {
    return Promise.all(this.peers.list().map((peer) => this.peerView(peer)));
  }

  async peerView(peer: PeerRecord): Promise<PeerView> {
    const usage = await this.ctx.broker.usage(peerInbox(peer.domain)).catch(() => undefined);
    if (usage) this.links.queued(peer.domain, usage.pendingMessages);
    return {
      domain: peer.domain,
      state: peer.state,
      url: peer.url,
      ...(peer.endpoint && { endpoint: peer.endpoint }),
      admittedBy: peer.admittedBy,
      pinnedKeys: peer.pinned.map((k) => k.kid),
      ...(peer.pending && {
        pendingKeys: { kids: peer.pending.keys.map((k) => k.kid), seenAt: peer.pending.seenAt },
      }),
      addedAt: peer.addedAt,
      link: this.links.view(peer.domain, usage?.pendingMessages ?? 0),
    };
  }

  private async askStatus(peer: string, messages: SentRef[]) {
    const record = await this.gate.admitted(peer);
    return this.client.call(
      record.endpoint as string,
      peer,
      "POST",
      "/status",
      JSON.stringify({ messages }),
      StatusResponse,
    );
  }

  private async peerChanged(domain: string, record: PeerRecord | null): Promise<void> {
    if (this.closed) return;
    const running = this.forwarders.get(domain);
    if (record?.state === "allowed") {
      if (running) return;
      const forwarder = new Forwarder(domain, {
        broker: this.ctx.broker,
        gate: this.gate,
        client: this.client,
        links: this.links,
        forwarded: this.forwarded,
        logger: this.ctx.logger,
        retry: {
          initialMs: this.options.retry?.initialMs ?? 1_000,
          maxMs: this.options.retry?.maxMs ?? 300_000,
        },
        retentionMs: this.retentionMs,
      });
      this.forwarders.set(domain, forwarder);
      try {
        await forwarder.start();
      } catch (err) {
        this.forwarders.delete(domain);
        this.ctx.logger.error({ peer: domain, err: (err as Error).message }, "cannot start the forwarder");
      }
    } else if (running) {
      this.forwarders.delete(domain);
      await running.close();
    }
  }
}
