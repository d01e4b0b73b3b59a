/**
 * The admin's side of federation, on the gateway's main listener (admin token): this gateway's
 * identity and policy, its peers and their links (`acp federation status|list`), admitting,
 * blocking, removing a peer and accepting its key change. Also `/.well-known/acp`, which is public.
 */
import { type Router, readJsonBody, sendJson } from "../../http/server.js";
import { type GatewayContext, requireAdmin } from "../../gateway/context.js";
import { restRecord } from "../../wire/deprecated-names.js";
import { AcpError, FederationDomain, problemsOf } from "../../protocol/index.js";
import {
  AddPeerRequest,
  FEDERATION_API,
  type FederationStatusView,
  WELL_KNOWN_PATH,
} from "../../wire/federation.js";
import type { Federation } from "./federation.js";
import { gatewayKid } from "./gateway-key.js";
import { pinnableKeys } from "./peer-client.js";
import type { PeerRecord } from "./peers.js";

/** `federation()` answers once the extension started (a request before that is 503). */
export function adminRoutes(router: Router, ctx: GatewayContext, federation: () => Federation): void {
  router.add("GET", WELL_KNOWN_PATH, async (_req, res) => {
    sendJson(res, 200, await federation().document());
  });

  router.add("GET", FEDERATION_API, async (req, res) => {
    await requireAdmin(ctx, req);
    const f = federation();
    const view: FederationStatusView = {
      domain: f.domain,
      endpoint: f.endpoint,
      policy: f.options.open ? "open" : "allow-list",
      keys: [f.signer.kid],
      peers: await f.peerViews(),
    };
    sendJson(res, 200, restRecord(view));
  });

  router.add("GET", `${FEDERATION_API}/peers`, async (req, res) => {
    await requireAdmin(ctx, req);
    sendJson(res, 200, restRecord({ peers: await federation().peerViews() }));
  });

  router.add("POST", `${FEDERATION_API}/peers`, async (req, res) => {
    await requireAdmin(ctx, req);
    const parsed = AddPeerRequest.safeParse(await readJsonBody(req, 64 * 1024));
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid peer", {
        problems: problemsOf(parsed.error),
      });
    }
    const f = federation();
    const { domain, url = f.urlOf(domain), keys } = parsed.data;
    if (domain === f.domain) {
      throw new AcpError("InvalidParams", `${domain} is this gateway's own domain`, {
        problems: [{ path: "/domain", message: "this gateway's own domain" }],
      });
    }
    f.client.checkUrl(url, "the peer's URL", "/url");
    for (const [i, key] of (keys ?? []).entries()) {
      if (key.kid !== gatewayKid(domain, key)) {
        throw new AcpError("InvalidParams", `key ${i} must have the id ${gatewayKid(domain, key)}`, {
          problems: [{ path: `/keys/${i}/kid`, message: `must be ${gatewayKid(domain, key)}` }],
        });
      }
    }
    const record: PeerRecord = {
      domain,
      state: "allowed",
      url,
      admittedBy: "admin",
      pinned: keys ? keys.map((k) => ({ kty: "OKP", crv: "Ed25519", x: k.x, kid: k.kid })) : [],
      addedAt: new Date().toISOString(),
    };
    // First contact now, when it can be made: the keys it shows are pinned (or checked against
    // those given); a peer that cannot be reached yet is pinned at its first contact.
    let warning: string | undefined;
    try {
      const doc = await f.client.document(url, domain);
      record.endpoint = doc.endpoint;
      if (!keys) record.pinned = pinnableKeys(doc);
      else if (!doc.keys.some((k) => record.pinned.some((p) => p.kid === k.kid))) {
        record.pending = { keys: pinnableKeys(doc), seenAt: new Date().toISOString() };
        warning = `${domain}'s /.well-known/acp shows none of the keys given: held as a pending key change`;
      }
    } catch (err) {
      warning = `${domain} cannot be reached now (${(err as Error).message}); its keys are pinned at the first contact`;
    }
    const created = await f.peers.create(record);
    ctx.logger.info({ peer: domain, pinned: created.pinned.map((k) => k.kid) }, "federation peer added");
    sendJson(res, 201, restRecord({ ...(await f.peerView(created)), ...(warning && { warning }) }));
  });

  const domainOf = (value: string | undefined): string => {
    if (!FederationDomain.safeParse(value).success) {
      throw new AcpError("InvalidParams", `${JSON.stringify(value)} is not a domain`, {
        problems: [{ path: "/domain", message: "not a domain" }],
      });
    }
    return value as string;
  };

  router.add("DELETE", `${FEDERATION_API}/peers/:domain`, async (req, res, params) => {
    await requireAdmin(ctx, req);
    const domain = domainOf(params.domain);
    await federation().peers.remove(domain);
    ctx.logger.info({ peer: domain }, "federation peer removed");
    sendJson(res, 200, { domain, removed: true });
  });

  for (const [action, state] of [
    ["block", "blocked"],
    ["unblock", "allowed"],
  ] as const) {
    router.add("POST", `${FEDERATION_API}/peers/:domain/${action}`, async (req, res, params) => {
      await requireAdmin(ctx, req);
      const f = federation();
      const domain = domainOf(params.domain);
      const existing = f.peers.get(domain);
      const updated = existing
        ? await f.peers.update(domain, (current) => ({ ...current, state }))
        : action === "block"
          ? await f.peers.create({
              domain,
              state,
              url: f.urlOf(domain),
              admittedBy: "admin",
              pinned: [],
              addedAt: new Date().toISOString(),
            })
          : await f.peers.update(domain, (current) => current);
      ctx.logger.info({ peer: domain }, `federation peer ${state}`);
      sendJson(res, 200, restRecord(await f.peerView(updated)));
    });
  }

  router.add("POST", `${FEDERATION_API}/peers/:domain/accept-key`, async (req, res, params) => {
    await requireAdmin(ctx, req);
    const f = federation();
    const domain = domainOf(params.domain);
    const updated = await f.gate.acceptKeys(domain);
    ctx.logger.info(
      { peer: domain, pinned: updated.pinned.map((k) => k.kid) },
      "federation peer key accepted",
    );
    sendJson(res, 200, restRecord(await f.peerView(updated)));
  });
}
