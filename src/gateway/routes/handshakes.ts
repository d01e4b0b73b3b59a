import { AcpError } from "../../protocol/index.js";
import { type Router, sendJson } from "../../http/server.js";
import { announceDeprecation, authenticateAgent, type GatewayContext } from "../context.js";
import type { HandshakeGate } from "../handshake-gate.js";
import type { HandshakeProofView } from "../../wire/api.js";

/**
 * `GET /api/v1/handshakes/:peer`: the peer's side of its latest handshake with the calling agent
 * (the signed announce and capabilities it relayed), for an agent that lost its own record of it.
 * Only the recipient of those messages reads them (the key is the caller's own agent id), and they
 * prove nothing the caller does not verify itself against the peer's registered key.
 */
export function handshakeRoutes(router: Router, ctx: GatewayContext, gate: HandshakeGate): void {
  router.add("GET", "/api/v1/handshakes/:peer", async (req, res, { peer }) => {
    const caller = await authenticateAgent(ctx, req);
    announceDeprecation(ctx, res, { kind: "agent", agent: caller });
    const proof = await gate.proof(peer as string, caller.record.agentId);
    if (!proof?.capabilities) {
      throw new AcpError("NotFound", `no completed handshake from ${peer} to ${caller.record.agentId}`, {
        peer,
      });
    }
    const view: HandshakeProofView = {
      peer: peer as string,
      announce: JSON.parse(proof.announce) as Record<string, unknown>,
      capabilities: JSON.parse(proof.capabilities) as Record<string, unknown>,
    };
    sendJson(res, 200, view);
  });
}
