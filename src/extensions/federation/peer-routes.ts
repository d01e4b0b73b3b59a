/**
 * What peers call on the federation listener: the domain's document, the directory of this
 * gateway's agents, transfers, the status of what they delivered, and notices of their agents'
 * key changes. Every route but the document authenticates the calling gateway first.
 */
import type { IncomingMessage } from "node:http";
import type { z } from "zod";
import { readBody, Router, refuseDeepNesting, sendJson } from "../../http/server.js";
import { AcpError, AgentId, problemsOf } from "../../protocol/index.js";
import {
  FEDERATION_PREFIX,
  MAX_TRANSFER_BYTES,
  NoticeRequest,
  StatusRequest,
  TransferRequest,
  WELL_KNOWN_PATH,
} from "../../wire/federation.js";
import { ownRecord } from "./directory.js";
import type { Federation } from "./federation.js";
import type { PeerRecord } from "./peers.js";

/** Agents a peer looked up, remembered so it hears of their key changes; bounded. */
const MAX_LOOKED_UP = 100_000;

export interface PeerRoutes {
  router: Router;
  /** The peers that looked `agentId` up (they get its notices). */
  lookedUpBy(agentId: string): ReadonlySet<string>;
}

export function peerRoutes(federation: Federation): PeerRoutes {
  const router = new Router();
  const lookedUp = new Map<string, Set<string>>();

  /** The calling peer, its signature checked over `body`; tells the forwarder the peer is up. */
  const caller = async (req: IncomingMessage, path: string, body: string): Promise<PeerRecord> => {
    const peer = await federation.gate.authenticate(req, path, body);
    federation.contacted(peer.domain);
    return peer;
  };

  router.add("GET", WELL_KNOWN_PATH, async (_req, res) => {
    sendJson(res, 200, await federation.document());
  });

  router.add("GET", `${FEDERATION_PREFIX}/agents/:agentId`, async (req, res, { agentId }, url) => {
    const peer = await caller(req, url.pathname, "");
    const id = agentId as string;
    const record = AgentId.safeParse(id).success ? await federation.ctx.registry.get(id) : undefined;
    if (!record) throw new AcpError("NotFound", `no agent ${id} at ${federation.domain}`);
    let peers = lookedUp.get(id);
    if (!peers) {
      if (lookedUp.size >= MAX_LOOKED_UP) lookedUp.delete(lookedUp.keys().next().value as string);
      peers = new Set();
      lookedUp.set(id, peers);
    }
    peers.add(peer.domain);
    sendJson(res, 200, ownRecord(record, federation.domain, federation.signer));
  });

  router.add("POST", `${FEDERATION_PREFIX}/transfers`, async (req, res, _params, url) => {
    const text = (await readBody(req, MAX_TRANSFER_BYTES)).toString("utf8");
    const peer = await caller(req, url.pathname, text);
    const request = parse(TransferRequest, text, "transfer");
    sendJson(res, 200, { results: await federation.receiver.receive(peer, request.messages) });
  });

  router.add("POST", `${FEDERATION_PREFIX}/status`, async (req, res, _params, url) => {
    const text = (await readBody(req, 64 * 1024)).toString("utf8");
    const peer = await caller(req, url.pathname, text);
    const request = parse(StatusRequest, text, "status request");
    sendJson(res, 200, { statuses: await federation.receiver.statuses(peer, request.messages) });
  });

  router.add("POST", `${FEDERATION_PREFIX}/notices`, async (req, res, _params, url) => {
    const text = (await readBody(req, 64 * 1024)).toString("utf8");
    const peer = await caller(req, url.pathname, text);
    const request = parse(NoticeRequest, text, "notice");
    // A notice only says "look again": the record itself comes from the peer's signed directory.
    for (const agentId of request.agents) {
      const address = `${agentId}@${peer.domain}`;
      federation.directory.invalidate(address);
      void federation.directory.lookup(address, { fresh: true }).catch(() => undefined);
    }
    sendJson(res, 200, { ok: true });
  });

  return { router, lookedUpBy: (agentId) => lookedUp.get(agentId) ?? new Set() };
}

function parse<T>(schema: z.ZodType<T>, text: string, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new AcpError("ParseError", `the ${what} is not JSON`);
  }
  refuseDeepNesting(value, what);
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new AcpError("InvalidParams", `invalid ${what}`, {
      problems: problemsOf(parsed.error),
    });
  }
  return parsed.data;
}
