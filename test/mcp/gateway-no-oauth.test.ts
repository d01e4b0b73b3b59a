import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { NO_OAUTH_MESSAGE } from "../../src/extensions/mcp-endpoint/no-oauth.js";
import { useMcpGateway } from "../helpers/mcp-gateway.js";

/** An OAuth-capable client as MCP Inspector builds one: it would register, then send the user to log in. */
function inspectorLikeProvider(redirects: URL[]): OAuthClientProvider {
  let client: unknown;
  return {
    get redirectUrl() {
      return "http://127.0.0.1:6274/oauth/callback";
    },
    get clientMetadata() {
      return { redirect_uris: ["http://127.0.0.1:6274/oauth/callback"], client_name: "inspector-like" };
    },
    clientInformation: () => client as undefined,
    saveClientInformation: (info) => {
      client = info;
    },
    tokens: () => undefined,
    saveTokens: () => undefined,
    redirectToAuthorization: (url) => {
      redirects.push(url);
    },
    saveCodeVerifier: () => undefined,
    codeVerifier: () => "verifier",
  };
}

/** Every request the client makes, with the status it got. */
function recordingFetch(seen: string[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input));
    seen.push(`${init?.method ?? "GET"} ${url.pathname} ${response.status}`);
    return response;
  };
}

describe("a 401 from /mcp never sends a client into an OAuth flow the gateway does not offer", () => {
  const bed = useMcpGateway();

  it("a client without OAuth shows the gateway's message", async () => {
    const client = new Client({ name: "no-key", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${bed.gw.url}/mcp`));
    await expect(client.connect(transport)).rejects.toThrow(
      /send an API key \(X-API-Key, Api-Key or Authorization: Bearer\)/,
    );
    const wrong = new StreamableHTTPClientTransport(new URL(`${bed.gw.url}/mcp`), {
      requestInit: { headers: { "x-api-key": "acp_not-a-key" } },
    });
    await expect(new Client({ name: "wrong-key", version: "1.0.0" }).connect(wrong)).rejects.toThrow(
      /unknown or revoked API key/,
    );
  });

  it("an OAuth-capable client (as MCP Inspector) finds metadata with no authorization server and ends with the gateway's message", async () => {
    const seen: string[] = [];
    const redirects: URL[] = [];
    const client = new Client({ name: "inspector-like", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${bed.gw.url}/mcp`), {
      authProvider: inspectorLikeProvider(redirects),
      fetch: recordingFetch(seen),
    });
    await expect(client.connect(transport)).rejects.toThrow(NO_OAUTH_MESSAGE);
    expect(redirects).toEqual([]); // nobody is sent to a login page
    expect(seen).toEqual([
      "POST /mcp 401",
      "GET /.well-known/oauth-protected-resource/mcp 200",
      "GET /.well-known/oauth-authorization-server 404",
      "GET /.well-known/openid-configuration 404",
      "POST /register 400",
    ]);
  });

  it("serves RFC 9728 metadata for /mcp, and names it in the 401's challenge", async () => {
    const res = await fetch(`${bed.gw.url}/mcp`, { method: "POST", body: "{}" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(
      `Bearer realm="acp", resource_metadata="${bed.gw.url}/.well-known/oauth-protected-resource/mcp"`,
    );
    const metadata = await (await fetch(`${bed.gw.url}/.well-known/oauth-protected-resource/mcp`)).json();
    expect(metadata).toEqual({
      resource: `${bed.gw.url}/mcp`,
      resource_name: "ACP gateway MCP endpoint",
      bearer_methods_supported: ["header"],
      acp_note: NO_OAUTH_MESSAGE,
    });
    // Other endpoints keep the plain challenge.
    const other = await fetch(`${bed.gw.url}/api/v1/agents`);
    expect(other.headers.get("www-authenticate")).toBe('Bearer realm="acp"');
  });
});
