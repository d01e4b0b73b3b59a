import { describe, expect, it } from "vitest";
import { runAcp } from "../helpers/cli.js";
import { dashboard, principalToken, useCast } from "../helpers/dashboard.js";

describe("principal tokens", () => {
  const cast = useCast();

  it("are issued, listed and revoked with the admin token; a token signs in as its principal", async () => {
    const { gw } = await cast();
    const token = await principalToken(gw, "alice");
    expect(token).toMatch(/^acppr_[A-Za-z0-9_-]{43}$/);

    const me = await dashboard(gw, token, "/me");
    expect(me.status).toBe(200);
    expect(me.json).toMatchObject({
      viewer: { kind: "principal", principal_id: "alice", principalId: "alice" },
      agents: ["alice-scheduler"],
      relay_audit: expect.any(Boolean),
      admin_views: [],
    });
    expect(me.json.relayAudit).toBe(me.json.relay_audit); // the camelCase names, for the deprecation period
    const asAdmin = await dashboard(gw, gw.adminToken, "/me");
    expect(asAdmin.json).toMatchObject({ viewer: { kind: "admin" } });
    expect(asAdmin.json.agents).toEqual(["alice-scheduler", "bob-scheduler", "carol-agent"]);

    const listed = await dashboard(gw, gw.adminToken, "/principals");
    const createdAt = expect.any(String);
    // snake_case, and the camelCase names still sent for the deprecation period.
    expect(listed.json.principals).toEqual([
      { principal_id: "alice", created_at: createdAt, principalId: "alice", createdAt },
    ]);
    expect(JSON.stringify(listed.json)).not.toContain(token);

    // The deprecated camelCase name is still read.
    const again = await dashboard(gw, gw.adminToken, "/principals", { body: { principalId: "alice" } });
    expect(again.status).toBe(409);
    expect(again.json.error).toMatchObject({
      message: "principal alice already has a token; revoke it first",
    });

    const revoked = await dashboard(gw, gw.adminToken, "/principals/alice/revoke", { method: "POST" });
    expect(revoked.json).toMatchObject({ principal_id: "alice", revoked_at: expect.any(String) });
    expect(revoked.json.revokedAt).toBe(revoked.json.revoked_at);
    const refused = await dashboard(gw, token, "/me");
    expect(refused.status).toBe(401);
    expect(refused.json.error).toMatchObject({ message: "unknown or revoked principal token" });

    // A revoked principal can be given a new token; the old one stays dead.
    const fresh = await principalToken(gw, "alice");
    expect((await dashboard(gw, fresh, "/me")).status).toBe(200);
    expect((await dashboard(gw, token, "/me")).status).toBe(401);
  });

  it("principal ids that are not valid KV keys work (they are stored by hash)", async () => {
    const { gw } = await cast();
    const token = await principalToken(gw, "alice@example.com");
    const me = await dashboard(gw, token, "/me");
    expect(me.json).toMatchObject({ viewer: { principal_id: "alice@example.com" }, agents: [] });
    const revoked = await dashboard(
      gw,
      gw.adminToken,
      `/principals/${encodeURIComponent("alice@example.com")}/revoke`,
      {
        method: "POST",
      },
    );
    expect(revoked.status).toBe(200);
  });

  it("refuses bad input, missing credentials, agents' API keys, and principals managing principals", async () => {
    const { gw, alice } = await cast();
    const bad = await dashboard(gw, gw.adminToken, "/principals", { body: { principal_id: "has space" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({
      data: {
        problems: [{ path: "/principal_id", message: "must not contain whitespace or control characters" }],
      },
    });
    const extra = await dashboard(gw, gw.adminToken, "/principals", {
      body: { principal_id: "x", role: "admin" },
    });
    expect(extra.status).toBe(400);

    const none = await dashboard(gw, undefined, "/me");
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="acp"');
    const agentKey = await dashboard(gw, alice.apiKey, "/me");
    expect(agentKey.status).toBe(401);

    const token = await principalToken(gw, "alice");
    for (const [path, method] of [
      ["/principals", "GET"],
      ["/principals", "POST"],
      ["/principals/alice/revoke", "POST"],
    ] as const) {
      const res = await dashboard(gw, token, path, {
        method,
        ...(method === "POST" ? { body: { principal_id: "mallory" } } : {}),
      });
      expect(res.status, `${method} ${path}`).toBe(403);
    }
    const unknown = await dashboard(gw, gw.adminToken, "/principals/nobody/revoke", { method: "POST" });
    expect(unknown.status).toBe(404);
  });
});

describe("acp principal", () => {
  const cast = useCast();

  it("adds, lists and revokes, for people and with --json", async () => {
    const { gw } = await cast();
    const common = ["--gateway", gw.url, "--admin-token", gw.adminToken];
    const added = await runAcp(["principal", "add", "alice", ...common, "--json"]);
    expect(added.code, added.stderr).toBe(0);
    const { token } = JSON.parse(added.stdout) as { token: string };
    expect((await dashboard(gw, token, "/me")).json).toMatchObject({ viewer: { principal_id: "alice" } });

    const human = await runAcp(["principal", "add", "bob", ...common]);
    expect(human.stdout).toContain("principal bob added");
    expect(human.stdout).toMatch(/token \(shown once; the gateway keeps only its hash\): acppr_/);
    expect(human.stdout).toContain(`sign in at ${gw.url}/`);

    const list = await runAcp(["principal", "list", ...common]);
    expect(list.stdout).toMatch(/^alice\tactive since .+\nbob\tactive since .+\n$/);

    const revoked = await runAcp(["principal", "revoke", "alice", "--gateway", gw.url], {
      env: { ACP_ADMIN_TOKEN: gw.adminToken },
    });
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toMatch(/^principal alice revoked at /);
    const listing = await runAcp(["principal", "list", ...common, "--json"]);
    expect(listing.code, listing.stderr).toBe(0);
    const listed = JSON.parse(listing.stdout) as {
      principals: { principal_id: string; revoked_at?: string }[];
    };
    expect(listed.principals.map((p) => [p.principal_id, Boolean(p.revoked_at)])).toEqual([
      ["alice", true],
      ["bob", false],
    ]);
  });

  it("says what is wrong: no admin token, a wrong one, a bad id, an unreachable gateway", async () => {
    const { gw } = await cast();
    const noToken = await runAcp(["principal", "list", "--gateway", gw.url], {
      env: { ACP_ADMIN_TOKEN: "" },
    });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain(
      "this needs the gateway's admin token: pass --admin-token TOKEN or set ACP_ADMIN_TOKEN",
    );

    const wrong = await runAcp(["principal", "list", "--gateway", gw.url, "--admin-token", "nope"]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("unknown or revoked principal token");

    const badId = await runAcp([
      "principal",
      "add",
      "two words",
      "--gateway",
      gw.url,
      "--admin-token",
      gw.adminToken,
    ]);
    expect(badId.code).toBe(1);
    expect(badId.stderr).toContain("(/principal_id: must not contain whitespace or control characters)");

    const away = await runAcp(["principal", "list", "--gateway", "http://127.0.0.1:1", "--admin-token", "x"]);
    expect(away.code).toBe(1);
    expect(away.stderr).toContain("cannot reach the gateway at http://127.0.0.1:1");
  });
});
