/**
 * The client side of `acp/sign`: an MCP client that holds its agent's key signs the task-lifecycle
 * messages the gateway asks for (and nothing else), so the key never leaves the client.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { z } from "zod";
import {
  AcpError,
  buildNotification,
  createSigner,
  type PrivateIdentity,
  signMessage,
} from "../protocol/index.js";
import { ACP_SIGN_METHOD, ACP_SIGNING_CAPABILITY, AcpSignParams } from "./messages.js";
import { describeIssues } from "./protocol.js";

export interface AcpSigningOptions {
  /** skill-layers-loaded declared on the signed messages (what the agent declares in its handshakes). Default [0, 1]. */
  layers?: number[];
  /** Told about each signature, e.g. to log it for the person whose key it is. */
  onSign?: (params: AcpSignParams) => void;
}

/** The capabilities a signing client declares (merge into the SDK Client's `capabilities`). */
export const ACP_SIGNING_CAPABILITIES = { experimental: { [ACP_SIGNING_CAPABILITY]: {} } };

/** Answers one `acp/sign` request: validates it (only task-lifecycle methods), builds and signs the notification. */
export function signForGateway(
  identity: PrivateIdentity,
  params: unknown,
  options: AcpSigningOptions = {},
): { message: Record<string, unknown> } {
  const parsed = AcpSignParams.safeParse(params);
  if (!parsed.success) {
    throw new AcpError("InvalidParams", `refused to sign: ${describeIssues(parsed.error.issues).summary}`);
  }
  const request = parsed.data;
  const self = {
    agentId: identity.agentId,
    principalId: identity.principalId,
    layers: options.layers ?? [0, 1],
  };
  const message = buildNotification(self, request.to, request.body, { method: request.method });
  message.params.headers["trust-layer-version"] = request.trustLayerVersion;
  options.onSign?.(request);
  return { message: signMessage(message, createSigner(identity)) as unknown as Record<string, unknown> };
}

const AcpSignRequest = z.object({ method: z.literal(ACP_SIGN_METHOD), params: z.unknown().optional() });

/**
 * Makes an SDK `Client` answer `acp/sign` with `identity`. The client must also declare
 * `ACP_SIGNING_CAPABILITIES` when it is constructed (capabilities are fixed at initialize).
 */
export function registerAcpSigning(
  client: Client,
  identity: PrivateIdentity,
  options: AcpSigningOptions = {},
): void {
  client.setRequestHandler(AcpSignRequest, async (request) =>
    signForGateway(identity, request.params, options),
  );
}
