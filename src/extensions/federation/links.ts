/**
 * Each peer link's health as this gateway process sees it (last contact, the last failure,
 * refusals, messages forwarded and received), for `acp federation status`, the dashboard and
 * /metrics. In memory: at most one entry per known domain (peers, and domains refused while
 * unknown, capped), reset by a restart.
 */
import type { Metrics } from "../../gateway/metrics.js";
import type { PeerLink } from "../../wire/federation.js";

interface LinkState {
  lastContactAt: string | null;
  lastError: string | null;
  refusals: Record<string, number>;
  forwarded: number;
  received: number;
  /** The queuedAt of the oldest message the forwarder holds (undefined when it holds none). */
  oldestHeld: string | undefined;
  /** Messages waiting in its outbound queue, as last counted (`queued`). */
  queued: number;
}

/** Domains remembered at once: refusals of strangers must not grow this without bound. */
const MAX_LINKS = 2000;

export class PeerLinks {
  private readonly links = new Map<string, LinkState>();

  constructor(private readonly metrics: Metrics) {
    metrics.describe("acp_federation_forwarded_total", "messages handed to a peer gateway, by peer");
    metrics.describe("acp_federation_received_total", "messages a peer gateway delivered here, by peer");
    metrics.describe(
      "acp_federation_refusals_total",
      "requests or messages of a peer refused, by peer and reason",
    );
    metrics.describe("acp_federation_peer_up", "1 while the last call to the peer succeeded, by peer");
    metrics.addCollector(() => {
      const peers = [...this.links].filter(([, link]) => link.queued > 0 || link.lastContactAt !== null);
      return [
        {
          name: "acp_federation_queue_depth",
          help: "messages waiting in a peer's outbound queue here, by peer",
          type: "gauge",
          samples: peers.map(([peer, link]) => ({ labels: { peer }, value: link.queued })),
        },
        {
          name: "acp_federation_oldest_queued_seconds",
          help: "age of the oldest message waiting for a peer, by peer (0 when none waits)",
          type: "gauge",
          samples: peers.map(([peer]) => ({
            labels: { peer },
            value: this.view(peer, this.links.get(peer)?.queued ?? 0).oldestQueuedSeconds ?? 0,
          })),
        },
      ];
    });
  }

  /** How many messages wait in the peer's outbound queue (counted by the broker). */
  queued(domain: string, count: number): void {
    this.state(domain).queued = count;
  }

  private state(domain: string): LinkState {
    let link = this.links.get(domain);
    if (!link) {
      if (this.links.size >= MAX_LINKS) {
        const oldest = this.links.keys().next().value;
        if (oldest !== undefined) this.links.delete(oldest);
      }
      link = {
        lastContactAt: null,
        lastError: null,
        refusals: {},
        forwarded: 0,
        received: 0,
        oldestHeld: undefined,
        queued: 0,
      };
      this.links.set(domain, link);
    }
    return link;
  }

  /** The peer answered (or called) us. */
  contact(domain: string): void {
    const link = this.state(domain);
    link.lastContactAt = new Date().toISOString();
    link.lastError = null;
    this.metrics.gauge("acp_federation_peer_up", 1, { peer: domain });
  }

  /** A call to the peer failed. */
  failed(domain: string, error: string): void {
    this.state(domain).lastError = error;
    this.metrics.gauge("acp_federation_peer_up", 0, { peer: domain });
  }

  refused(domain: string, reason: string): void {
    const link = this.state(domain);
    link.refusals[reason] = (link.refusals[reason] ?? 0) + 1;
    this.metrics.count("acp_federation_refusals_total", { peer: domain, reason });
  }

  forwarded(domain: string, count: number): void {
    this.state(domain).forwarded += count;
    this.metrics.count("acp_federation_forwarded_total", { peer: domain }, count);
  }

  received(domain: string, count: number): void {
    this.state(domain).received += count;
    this.metrics.count("acp_federation_received_total", { peer: domain }, count);
  }

  holding(domain: string, oldestQueuedAt: string | undefined): void {
    this.state(domain).oldestHeld = oldestQueuedAt;
  }

  view(domain: string, queued: number): PeerLink {
    const link = this.links.get(domain);
    const oldest = link?.oldestHeld === undefined ? undefined : Date.parse(link.oldestHeld);
    return {
      queued,
      oldestQueuedSeconds:
        oldest === undefined || queued === 0 ? null : Math.max(0, Math.round((Date.now() - oldest) / 1000)),
      lastContactAt: link?.lastContactAt ?? null,
      lastError: link?.lastError ?? null,
      refusals: { ...(link?.refusals ?? {}) },
      forwarded: link?.forwarded ?? 0,
      received: link?.received ?? 0,
    };
  }
}
