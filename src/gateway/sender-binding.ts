import { AcpError, type AcpMessage, type EnvelopeHeaders } from "../protocol/index.js";
import { headerPointer } from "../protocol/validate.js";
import type { AgentRecord } from "./registry.js";

/**
 * The headers that name a message's sender must say what the gateway registered for the API key
 * that sent it: `agent-id` is the key's agent and `principal-id` the principal that agent was
 * registered for. The signature proves only that the agent's key signed the claim; the
 * registration is what ties the agent to a human. So a recipient, the relay audit and the dashboard
 * can take the principal of every message the gateway accepted from its header.
 */
export function refuseClaimedIdentity(
  message: AcpMessage,
  headers: Pick<EnvelopeHeaders, "agent-id" | "principal-id">,
  sender: Pick<AgentRecord, "agentId" | "principalId">,
): void {
  if (headers["agent-id"] !== sender.agentId) {
    throw new AcpError(
      "Forbidden",
      `this API key acts for ${sender.agentId}; it cannot send as ${headers["agent-id"]}`,
      { problems: [{ path: headerPointer(message, "agent-id"), message: `must be ${sender.agentId}` }] },
    );
  }
  if (headers["principal-id"] !== sender.principalId) {
    throw new AcpError(
      "Forbidden",
      `${sender.agentId} is registered for principal ${sender.principalId}; it cannot act for ${headers["principal-id"]}`,
      {
        problems: [
          { path: headerPointer(message, "principal-id"), message: `must be ${sender.principalId}` },
        ],
      },
    );
  }
}
