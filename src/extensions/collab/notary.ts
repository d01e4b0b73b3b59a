/**
 * The collaboration's own ACP agent, which tells agents what the gateway decided by itself (an
 * offer nobody answered, a task past its deadline: see handoff-expiry.ts).
 *
 * Why an agent: every ACP message is signed by its sender and may only follow a handshake, and
 * the decision is the gateway's, not a party's. So the gateway signs as itself: an agent
 * `collab-<gateway>` of principal `acp-gateway-collab`, registered when the first notice needs it
 * and revoked when the gateway closes (orchestration/gateway-agent.ts). Recipients verify a real
 * signature and see the gateway's principal.
 */
import { GATEWAY_COLLAB_PRINCIPAL } from "../../collab/messages.js";
import type { GatewayContext } from "../../gateway/context.js";
import { GatewayAgent } from "../../orchestration/gateway-agent.js";

/** How long one notice may take, handshake included (the recipient is online when it is sent). */
const NOTICE_TIMEOUT_MS = 15_000;

export class CollabNotary {
  readonly #agent: GatewayAgent;

  constructor(ctx: GatewayContext) {
    this.#agent = new GatewayAgent(ctx, {
      agentId: `collab-${ctx.gatewayId.replaceAll("-", "").slice(0, 12)}`,
      principalId: GATEWAY_COLLAB_PRINCIPAL,
      capabilities: ["collab-notices"],
      purpose: `Tell the parties of handoffs what gateway ${ctx.gatewayId} decided (expiries)`,
      agent: { audit: false },
    });
  }

  /** A signed notification to `to` (handshaking first if needed); resolves once the gateway accepted it. */
  async notify(to: string, method: string, body: Record<string, unknown>, summary: string): Promise<void> {
    const agent = await this.#agent.agent();
    await agent.notify(to, body, { method, summary, timeoutMs: NOTICE_TIMEOUT_MS });
  }

  /** Notices still waiting for a handshake are given up. */
  close(): Promise<void> {
    return this.#agent.close();
  }
}
