import type { Broker } from "../../broker/index.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { Presence } from "../../wire/api.js";
import type { VersionDeprecation } from "../../wire/versions.js";
import type { Scope } from "./viewer.js";

/** One side of a pair's handshake as the gateway saw it relayed (bucket `handshakes`). */
interface StoredSide {
  kid: string;
  layers: number[];
  announced: boolean;
  capabilities: boolean;
  at: string;
}

export interface HandshakeSide {
  announced: boolean;
  capabilitiesExchanged: boolean;
  /** The skill layers declared in this side's announce. */
  layers: number[];
  at: string;
}

export interface PeerView {
  peer: string;
  peerPrincipal: string | null;
  /**
   * `established`: both sides announced and exchanged capabilities, so substantive messages are
   * relayed; `in-progress`: some steps seen. Trust levels are calibrated by each agent, not the gateway.
   */
  handshake: "established" | "in-progress";
  self?: HandshakeSide;
  peerSide?: HandshakeSide;
}

export interface DashboardAgent {
  agentId: string;
  principalId: string;
  capabilities: string[];
  protocolVersions: string[];
  /** The newest version it speaks is deprecated: since when, and when the gateway will refuse it. */
  deprecation?: VersionDeprecation;
  /** The agent registered an X25519 key, so peers can encrypt to it end to end. */
  acceptsEncryption: boolean;
  /** The gateway generated and holds the agent's keys, and signs its messages on its behalf. */
  custodial: boolean;
  createdAt: string;
  revokedAt?: string;
  presence: Presence;
  peers: PeerView[];
}

const HANDSHAKES_BUCKET = "handshakes";

function sideOf(stored: StoredSide | undefined): HandshakeSide | undefined {
  if (!stored) return undefined;
  return {
    announced: stored.announced,
    capabilitiesExchanged: stored.capabilities,
    layers: stored.layers,
    at: stored.at,
  };
}

/** Every pair's handshake state, keyed by agent id. Pair keys are `<a>.<b>`; agent ids hold no dots. */
async function handshakesByAgent(
  broker: Broker,
): Promise<Map<string, { peer: string; state: Record<string, StoredSide> }[]>> {
  const bucket = broker.kv<Record<string, StoredSide>>(HANDSHAKES_BUCKET);
  const keys = await bucket.keys();
  const entries = await Promise.all(keys.map((key) => bucket.get(key)));
  const byAgent = new Map<string, { peer: string; state: Record<string, StoredSide> }[]>();
  entries.forEach((entry, i) => {
    const [a, b] = (keys[i] ?? "").split(".");
    if (!entry || !a || !b) return;
    for (const [self, peer] of [
      [a, b],
      [b, a],
    ] as const) {
      const list = byAgent.get(self) ?? [];
      list.push({ peer, state: entry.value });
      byAgent.set(self, list);
    }
  });
  return byAgent;
}

function deprecationOf(ctx: GatewayContext, versions: string[]): { deprecation?: VersionDeprecation } {
  const deprecation = ctx.registry.versions.deprecationOf(versions);
  return deprecation ? { deprecation } : {};
}

/** The viewer's agents with presence, load and health, and what the gateway knows of each peer. */
export async function dashboardAgents(ctx: GatewayContext, scope: Scope): Promise<DashboardAgent[]> {
  const pairs = await handshakesByAgent(ctx.broker);
  return Promise.all(
    scope.agents().map(async (record) => {
      const peers = (pairs.get(record.agentId) ?? [])
        .map(({ peer, state }): PeerView => {
          const self = sideOf(state[record.agentId]);
          const peerSide = sideOf(state[peer]);
          const done = (side: HandshakeSide | undefined) => side?.announced && side.capabilitiesExchanged;
          return {
            peer,
            peerPrincipal: scope.principalOf(peer),
            handshake: done(self) && done(peerSide) ? "established" : "in-progress",
            ...(self ? { self } : {}),
            ...(peerSide ? { peerSide } : {}),
          };
        })
        .sort((x, y) => x.peer.localeCompare(y.peer));
      return {
        agentId: record.agentId,
        principalId: record.principalId,
        capabilities: record.capabilities,
        protocolVersions: record.protocolVersions,
        ...deprecationOf(ctx, record.protocolVersions),
        acceptsEncryption: record.encryption !== undefined,
        custodial: record.custodial === true,
        createdAt: record.createdAt,
        ...(record.revokedAt ? { revokedAt: record.revokedAt } : {}),
        presence: await ctx.presence.get(record.agentId),
        peers,
      };
    }),
  );
}
