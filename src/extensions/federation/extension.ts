/**
 * Federation as a gateway extension (docs/federation.md): mounts the admin routes and
 * `/.well-known/acp` on the main listener, then on start opens the federation key, the federation
 * listener, the peers and their forwarders, and becomes the registry's `remote`, through which the
 * relay reaches agents of other domains. It tells the peers that looked an agent up when that
 * agent's record changes here (a revocation, a new key).
 */
import type { GatewayExtension } from "../../gateway/extension.js";
import { AcpError, FederationDomain } from "../../protocol/index.js";
import { NoticeRequest, NoticeResponse } from "../../wire/federation.js";
import { adminRoutes } from "./admin-routes.js";
import { Federation, type FederationOptions } from "./federation.js";
import { peerRoutes } from "./peer-routes.js";

export type { FederationOptions } from "./federation.js";

/** Changes told to peers wait this long for company, so a burst goes out as one notice. */
const NOTICE_DELAY_MS = 100;

/**
 * Federation with other organizations' gateways (docs/federation.md): the peers, their links and forwarders,
 * `/.well-known/acp` and the admin routes, so the relay reaches agents of other domains.
 */
export function federationExtension(options: FederationOptions): GatewayExtension {
  if (!FederationDomain.safeParse(options.domain).success) {
    throw new TypeError(`federation domain ${JSON.stringify(options.domain)} is not a lowercase DNS name`);
  }
  for (const domain of Object.keys(options.resolve ?? {})) {
    if (!FederationDomain.safeParse(domain).success || domain === options.domain) {
      throw new TypeError(`federation resolve: ${JSON.stringify(domain)} is not another domain's DNS name`);
    }
  }
  return {
    name: "federation",
    mount(context, router) {
      let federation: Federation | undefined;
      let unwatch: (() => void) | undefined;
      let noticeTimer: NodeJS.Timeout | undefined;
      const changed = new Set<string>();
      const started = () => {
        if (!federation) throw new AcpError("StorageUnavailable", "federation is starting");
        return federation;
      };
      adminRoutes(router, context, started);
      return {
        async start() {
          const f = await Federation.open(context, options);
          const routes = peerRoutes(f);
          await f.start(routes.router);
          federation = f;
          context.registry.remote = f;
          const sendNotices = () => {
            noticeTimer = undefined;
            const byPeer = new Map<string, string[]>();
            for (const agentId of changed) {
              for (const peer of routes.lookedUpBy(agentId))
                byPeer.set(peer, [...(byPeer.get(peer) ?? []), agentId]);
            }
            changed.clear();
            for (const [peer, agents] of byPeer) void notify(f, peer, agents);
          };
          unwatch = context.registry.onChange((agentId) => {
            changed.add(agentId);
            noticeTimer ??= setTimeout(sendNotices, NOTICE_DELAY_MS);
          });
        },
        async close() {
          unwatch?.();
          clearTimeout(noticeTimer);
          if (context.registry.remote === federation) context.registry.remote = undefined;
          await federation?.close();
        },
      };
    },
  };
}

/** Tells a peer that agents' records changed (best effort: its cache expires within a minute anyway). */
async function notify(f: Federation, peer: string, agents: string[]): Promise<void> {
  try {
    const record = await f.gate.admitted(peer);
    for (let i = 0; i < agents.length; i += 500) {
      const body = JSON.stringify(NoticeRequest.parse({ agents: agents.slice(i, i + 500) }));
      await f.client.call(record.endpoint as string, peer, "POST", "/notices", body, NoticeResponse);
    }
  } catch (err) {
    f.ctx.logger.info({ peer, err: (err as Error).message }, "could not tell a peer of a key change");
  }
}
