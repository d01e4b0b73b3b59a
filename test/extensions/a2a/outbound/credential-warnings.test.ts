/**
 * An A2A agent whose (public) card asks for credentials on its calls is registered, but the
 * registration says which credentials are missing: in the REST answer (and the record), on the
 * CLI's stderr, and in the gateway's log. Without that, the first call found out with HTTP 401.
 */
import type { AgentCard } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { runAcp } from "../../../helpers/cli.js";
import { ADMIN_TOKEN } from "../../../helpers/gateway.js";
import { useOutboundBed } from "./testbed.js";

const SECRET = "k3y-0f-the-a2a-agent-5ecret";

/** The card of an agent that takes an API key, or the same secret as a bearer token. */
function secured(card: AgentCard, alternatives: ("apiKey" | "bearer")[]): AgentCard {
  return {
    ...card,
    securitySchemes: {
      apiKey: {
        scheme: {
          $case: "apiKeySecurityScheme",
          value: { description: "", location: "header", name: "X-API-Key" },
        },
      },
      bearer: {
        scheme: {
          $case: "httpAuthSecurityScheme",
          value: { description: "", scheme: "Bearer", bearerFormat: "" },
        },
      },
    },
    securityRequirements: alternatives.map((name) => ({ schemes: { [name]: { list: [] } } })),
  };
}

describe("A2A out: a card that asks for credentials not given", () => {
  const bed = useOutboundBed();

  it("registers with a warning naming what the card asks for; none once they are given", async () => {
    const server = await bed.a2a({
      requireHeaders: { "X-API-Key": SECRET },
      publicCard: true,
      card: (card) => secured(card, ["apiKey"]),
    });
    const bare = await bed.addA2A({ url: server.url, agent_id: "bare" });
    expect(bare.status).toBe(201);
    expect(bare.json.warnings).toEqual([
      "the agent card asks for the header X-API-Key (apiKey), and no credentials were given: the agent " +
        "will likely refuse every call (HTTP 401) until it is registered again with them " +
        "(--header-env, --bearer-env or --header; credentials in the body)",
    ]);
    const listed = await bed.addA2A({
      url: server.url,
      agent_id: "other",
      credentials: { headers: { "X-Token": "x" } },
    });
    expect((listed.json.warnings as string[])[0]).toMatch(
      /^the agent card asks for the header X-API-Key \(apiKey\), and the credentials given \(X-Token\) do not carry it:/,
    );
    const given = await bed.addA2A({
      url: server.url,
      agent_id: "given",
      credentials: { headers: { "X-API-Key": SECRET } },
    });
    expect(given.status).toBe(201);
    expect(given.json.warnings).toBeUndefined();

    // The warning was right: the agent refuses the calls of the one registered without them.
    const alice = await bed.caller();
    const refused = await alice.request("bare", { text: "hello" }).catch((err: unknown) => err);
    expect((refused as Error).message).toMatch(/answered HTTP 401 to SendMessage/);
    expect(await alice.request("given", { text: "hello" })).toMatchObject({ a2a: { state: "completed" } });
  });

  it("is satisfied by any one of the card's alternatives", async () => {
    const server = await bed.a2a({ card: (card) => secured(card, ["apiKey", "bearer"]) });
    const added = await bed.addA2A({ url: server.url, agent_id: "either", credentials: { bearer: "tok" } });
    expect(added.status).toBe(201);
    expect(added.json.warnings).toBeUndefined();
    const none = await bed.addA2A({ url: server.url, agent_id: "neither" });
    expect((none.json.warnings as string[])[0]).toMatch(
      /^the agent card asks for the header X-API-Key \(apiKey\), or Authorization: Bearer \(bearer\), and no credentials were given/,
    );
  });

  it("reads an A2A 0.3 card's security too", async () => {
    const server = await bed.a2a({ legacy: true, card: (card) => secured(card, ["bearer"]) });
    const added = await bed.addA2A({ url: server.url, agent_id: "old" });
    expect(added.status, JSON.stringify(added.json)).toBe(201);
    expect((added.json.warnings as string[])[0]).toMatch(
      /^the agent card asks for Authorization: Bearer \(bearer\)/,
    );
  });

  it("acp agent add-a2a prints the warning on stderr", async () => {
    const server = await bed.a2a({ card: (card) => secured(card, ["apiKey"]) });
    const added = await runAcp([
      "agent",
      "add-a2a",
      server.url,
      "--id",
      "echo",
      "--gateway",
      bed.gw.url,
      "--admin-token",
      ADMIN_TOKEN,
    ]);
    expect(added.code).toBe(0);
    expect(added.stdout).toContain('registered A2A agent "Echo Agent" as echo');
    expect(added.stderr).toMatch(
      /^warning: the agent card asks for the header X-API-Key \(apiKey\), and no credentials/,
    );
  }, 60_000);
});
