/**
 * The messaging platform's own way to send (`POST /api/v1/messages` with
 * `{recipient_id, message_type, content, priority}`, no signature). ACP messages are signed by
 * their sender, so the gateway takes this shape only from an agent whose keys it holds (custodial,
 * src/extensions/custody): it builds the message, signs it with the agent's key as the MCP task
 * tools do, and relays it like any other, marked in the audit as signed by the gateway. An agent
 * that holds its own key is told how to sign instead.
 */
import { z } from "zod";
import { AcpError, AgentId, buildNotification, type Priority, problemsOf } from "../protocol/index.js";
import { PriorityInput, type SubmitResponse } from "../wire/api.js";
import { custodialAnnounce, custodialSender, submitInCustody } from "./custodial.js";
import type { GatewayContext } from "./context.js";
import type { ResolvedAgent } from "./registry.js";

/** A custodial agent's announce to a peer that has not answered is sent again after this long. */
const REANNOUNCE_AFTER_MS = 60_000;

/** The body in the platform's shape; fields it does not define are refused by name. */
const PlatformMessage = z.strictObject({
  recipient_id: AgentId,
  /** The ACP method is `agent.<message_type>` (`notification`: agent.notification). */
  message_type: z
    .string()
    .regex(
      /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/,
      "must be lower-case words joined by '_' or '.' (e.g. negotiation, status_update)",
    )
    .max(64),
  content: z.record(z.string(), z.json(), { error: "must be a JSON object (the message's body)" }),
  priority: PriorityInput.optional(),
});

/**
 * Types that are ACP exchanges of their own: a request waits for a response, the handshake and a
 * handoff carry protocol state. They need the agent's own signed envelope (or the collaboration
 * endpoints, for handoffs).
 */
const NEEDS_AN_ENVELOPE = new Set(["request", "response", "error", "announce", "capabilities", "handoff"]);

/**
 * The body of a POST /messages in the platform's shape, or undefined for anything else (a signed
 * ACP envelope, which has `jsonrpc`). Only a body that mentions `recipient_id` is parsed here, so
 * envelopes, the usual case, are parsed once, by the relay.
 */
export function platformMessageOf(text: string): Record<string, unknown> | undefined {
  if (!text.includes('"recipient_id"')) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined; // the relay answers the parse error
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  return "recipient_id" in value && !("jsonrpc" in value) ? (value as Record<string, unknown>) : undefined;
}

export interface PlatformSendResult extends SubmitResponse {
  /** The gateway signed it with the key it holds for the sender. */
  signed_by: "gateway";
}

/** Validates, signs in custody and relays one message in the platform's shape. */
export async function sendPlatformMessage(
  ctx: Pick<GatewayContext, "registry" | "relay">,
  sender: ResolvedAgent,
  body: Record<string, unknown>,
): Promise<PlatformSendResult> {
  const parsed = PlatformMessage.safeParse(body);
  if (!parsed.success) {
    throw new AcpError("InvalidParams", "invalid message", {
      problems: problemsOf(
        parsed.error.issues.map((issue) => ({
          path: issue.path,
          message:
            issue.code === "unrecognized_keys" ? `unknown field(s): ${issue.keys.join(", ")}` : issue.message,
        })),
      ),
    });
  }
  const { recipient_id: to, message_type: type, content, priority } = parsed.data;
  const custodian = ctx.registry.custodian;
  if (!sender.record.custodial || !custodian) throw signatureRequired(sender.record.agentId);
  if (NEEDS_AN_ENVELOPE.has(type)) {
    throw new AcpError("InvalidParams", `a ${type} needs its sender's signed ACP envelope`, {
      problems: [
        {
          path: "/message_type",
          message: `${type} is an exchange of its own in ACP: send notifications this way, other types as agent.<type>`,
        },
      ],
    });
  }
  const recipient = await ctx.registry.resolve(to);
  if (!recipient) {
    throw new AcpError("UnknownRecipient", `no agent ${to} is registered here`, {
      problems: [{ path: "/recipient_id", message: "not a registered agent" }],
    });
  }
  const self = sender.record;
  const from = custodialSender(ctx.registry, self, recipient.record);
  if (from.trustLayerVersion === undefined) {
    throw new AcpError("NoCommonVersion", `${self.agentId} and ${to} share no protocol version`, {
      problems: [{ path: "/recipient_id", message: "speaks none of the sender's protocol versions" }],
    });
  }
  const method = type === "notification" ? "agent.notification" : `agent.${type}`;
  const message = buildNotification(from, to, content, { method });
  const options = priority === undefined ? {} : { priority: priority as Priority };
  try {
    const [result] = await submitInCustody(custodian, ctx.relay, sender, [message], options);
    return { ...(result as SubmitResponse), signed_by: "gateway" };
  } catch (err) {
    if (!(err instanceof AcpError) || err.kind !== "HandshakeRequired") throw err;
    // The platform has no handshake; ACP relays nothing before one. Its first step goes out now,
    // unless it went out lately: a client sending again while the peer has not answered (or is
    // offline) must not restart the peer's side of the handshake each time.
    const announced = await ctx.relay.announcedAt(self.agentId, to);
    if (announced === undefined || Date.now() - announced > REANNOUNCE_AFTER_MS) {
      await submitInCustody(custodian, ctx.relay, sender, [custodialAnnounce(from, self, to, false)]);
    }
    throw new AcpError(
      "HandshakeRequired",
      `${self.agentId} and ${to} have not completed ACP's handshake yet: the gateway sent ${to} ${self.agentId}'s announce; send again once ${to} has answered it`,
      { peer: to, handshake: "started", retry: true },
    );
  }
}

/** For an agent that holds its own key: the gateway cannot sign for it, and says how to. */
function signatureRequired(agentId: string): AcpError {
  return new AcpError(
    "SignatureMissing",
    `${agentId} holds its own signing key: POST a signed ACP envelope instead (the gateway signs only for custodial agents)`,
    {
      expected:
        "a signed ACP message: {jsonrpc, method, params: {headers, body}, signature} (docs/protocol.md)",
      how: [
        "acp send --key AGENT.json --to RECIPIENT --method agent.notification --body '{…}'",
        "the SDK: new AcpAgent({ gateway, apiKey, identity }).notify(recipient, body)",
        "acp sign --key AGENT.json --to RECIPIENT message.json, then POST the output here",
      ],
      custodial: "an agent registered with custodial: true has its messages signed by the gateway",
    },
  );
}
