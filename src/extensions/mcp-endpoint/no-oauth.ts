/**
 * The MCP endpoint authenticates with an agent's API key, and the gateway offers no OAuth. MCP
 * clients with an OAuth provider (MCP Inspector, the SDK's `authProvider`) start OAuth on any 401
 * whatever its challenge, so the gateway makes that discovery end at once with its own message
 * instead of a dead end:
 * - the 401 names its RFC 9728 protected-resource metadata (`resource_metadata` in the challenge);
 * - that metadata (`/.well-known/oauth-protected-resource[/mcp]`) lists no authorization server
 *   and says the bearer goes in a header;
 * - the authorization-server metadata paths (RFC 8414, OpenID discovery) answer 404 with an OAuth
 *   error saying why, and the dynamic client registration the SDK falls back to (`POST /register`,
 *   RFC 7591) answers an OAuth error whose description is the gateway's message, which is what
 *   those clients show. Nothing is ever authorized here: every answer is a refusal.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { TLSSocket } from "node:tls";
import { type Router, sendJson } from "../../http/server.js";
import type { AcpError } from "../../protocol/index.js";

export const NO_OAUTH_MESSAGE =
  "this ACP gateway offers no OAuth: its MCP endpoint takes an agent's API key (X-API-Key, Api-Key or " +
  "Authorization: Bearer), issued by `acp agent register`";
const RESOURCE_METADATA = "/.well-known/oauth-protected-resource";

/** The origin the client used (the Host header), for URLs it must resolve itself. */
function originOf(req: IncomingMessage): string {
  return `${req.socket instanceof TLSSocket ? "https" : "http"}://${req.headers.host ?? "localhost"}`;
}

/**
 * A 401 from the MCP endpoint, its challenge (`challenge`, which the gateway's error answer puts in
 * `WWW-Authenticate`) pointing at the protected-resource metadata.
 */
export function mcpUnauthorized(err: AcpError, req: IncomingMessage, mcpPath: string): AcpError {
  const metadata = `${originOf(req)}${RESOURCE_METADATA}${mcpPath}`;
  return Object.assign(err, { challenge: `Bearer realm="acp", resource_metadata="${metadata}"` });
}

/** Mounts the metadata and refusals described above. */
export function noOAuthRoutes(router: Router, mcpPath: string): void {
  const protectedResource = (req: IncomingMessage, res: ServerResponse) =>
    sendJson(res, 200, {
      resource: `${originOf(req)}${mcpPath}`,
      resource_name: "ACP gateway MCP endpoint",
      bearer_methods_supported: ["header"],
      // No `authorization_servers`: the bearer is an API key from the gateway's admin, not a token.
      acp_note: NO_OAUTH_MESSAGE,
    });
  router.add("GET", `${RESOURCE_METADATA}${mcpPath}`, protectedResource);
  router.add("GET", RESOURCE_METADATA, protectedResource);

  const noServer = (_req: IncomingMessage, res: ServerResponse) =>
    sendJson(res, 404, { error: "invalid_request", error_description: NO_OAUTH_MESSAGE });
  router.add("GET", "/.well-known/oauth-authorization-server", noServer);
  router.add("GET", "/.well-known/openid-configuration", noServer);
  router.add("POST", "/register", (_req, res) =>
    sendJson(res, 400, { error: "unsupported_registration", error_description: NO_OAUTH_MESSAGE }),
  );
}
