/**
 * A2A agents that need credentials: given at registration (REST body, CLI flags), sealed at rest,
 * sent on the card fetch and every call, never returned; clear errors for missing, refused or
 * malformed credentials.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { credentialsOf } from "../../../../src/cli/commands/agent-a2a.js";
import { CliError } from "../../../../src/cli/io.js";
import { agentFor } from "../../../client/fixtures.js";
import { runAcp } from "../../../helpers/cli.js";
import { filesContaining } from "../../../helpers/files.js";
import { ADMIN_TOKEN, api, startTestGateway } from "../../../helpers/gateway.js";
import { useTmpDir } from "../../../helpers/tmp.js";
import { startA2AServer } from "./a2a-server.js";
import { useOutboundBed } from "./testbed.js";

const SECRET = "k3y-0f-the-a2a-agent-5ecret";
const tmp = useTmpDir("acp-a2a-cred-");

const errorOf = (json: Record<string, unknown>) =>
  json.error as { message: string; data: { problems: { path: string }[] } };

describe("A2A out: agents that need credentials", () => {
  const bed = useOutboundBed();

  it("sends an API key header on the card fetch and every call, and never shows it", async () => {
    const server = await bed.a2a({ requireHeaders: { "X-API-Key": SECRET } });
    const missing = await bed.addA2A({ url: server.url, agent_id: "locked" });
    expect(missing.status).toBe(400);
    expect(errorOf(missing.json).message).toMatch(
      /answered HTTP 401: the A2A agent needs credentials: give them with --header-env, --bearer-env or --header/,
    );

    const wrong = await bed.addA2A({
      url: server.url,
      agent_id: "locked",
      credentials: { headers: { "X-API-Key": "not-it" } },
    });
    expect(wrong.status).toBe(400);
    expect(errorOf(wrong.json).message).toMatch(/refused the credentials given \(X-API-Key\)/);
    expect(JSON.stringify(wrong.json)).not.toContain("not-it");

    const added = await bed.addA2A({
      url: server.url,
      agent_id: "locked",
      credentials: { headers: { "X-API-Key": SECRET } },
    });
    expect(added.status, JSON.stringify(added.json)).toBe(201);
    expect(added.json.credentials).toEqual(["X-API-Key"]);
    const listed = await api(bed.gw.url, "/api/v1/a2a/remote-agents", {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(JSON.stringify([added.json, listed.json])).not.toContain(SECRET);

    const alice = await bed.caller();
    expect(await alice.request("locked", { text: "open up" })).toMatchObject({
      a2a: { state: "completed" },
    });
    expect(filesContaining(bed.gw.dataDir, SECRET)).toEqual([]);
  });

  it("refuses malformed credentials, naming the field and never the value", async () => {
    const server = await bed.a2a();
    const cases: [Record<string, unknown>, string][] = [
      [{ headers: { "Bad Name": "v" } }, "/credentials/headers/Bad Name"],
      [{ headers: { "X-Key": "line\r\nInjected: yes" } }, "/credentials/headers/X-Key"],
      [{ headers: { "Content-Type": "text/plain" } }, "/credentials/headers/Content-Type"],
      [{ bearer: "has spaces in it" }, "/credentials/bearer"],
      [{ bearer: "tok", headers: { authorization: "Bearer other" } }, "/credentials/bearer"],
      [{}, "/credentials"],
    ];
    for (const [credentials, path] of cases) {
      const refused = await bed.addA2A({ url: server.url, credentials });
      expect(refused.status, path).toBe(400);
      const problems = errorOf(refused.json).data.problems;
      expect(problems.map((p) => p.path)).toContain(path);
      expect(JSON.stringify(refused.json)).not.toMatch(/Injected|has spaces|Bearer other/);
    }
  });
});

describe("A2A out: a bearer token across a restart, and the CLI flags", () => {
  it("a token from --bearer-env and a header from --header-env are sealed, and still sent after a restart", async () => {
    const data = join(tmp(), "data");
    const orgSecret = "org-secret-5f1c2a9e7d";
    const server = await startA2AServer({
      requireHeaders: { authorization: `Bearer ${SECRET}`, "x-org-key": orgSecret },
    });
    let gw = await startTestGateway({ dataDir: data, allowPrivateUrls: true });
    try {
      const added = await runAcp(
        [
          "agent",
          "add-a2a",
          server.url,
          "--id",
          "bearer",
          "--bearer-env",
          "A2A_TOKEN",
          "--header-env",
          "X-Org-Key: A2A_ORG_KEY",
        ],
        {
          env: {
            ACP_GATEWAY: gw.url,
            ACP_ADMIN_TOKEN: ADMIN_TOKEN,
            A2A_TOKEN: SECRET,
            A2A_ORG_KEY: orgSecret,
          },
        },
      );
      expect(added.stderr).toBe("");
      expect(added.stdout).toMatch(
        /sends {5}(Authorization, X-Org-Key|X-Org-Key, Authorization) \(sealed at the gateway\)/,
      );
      expect(added.stdout).not.toContain(SECRET);
      expect(added.stdout).not.toContain(orgSecret);
      await gw.close();
      gw = await startTestGateway({ dataDir: data, allowPrivateUrls: true });
      const test = await gw.register("alice", "principal-alice");
      const alice = agentFor(gw, test, join(data, "..", "alice"));
      await alice.connect();
      try {
        expect(await alice.request("bearer", { text: "after restart" })).toMatchObject({
          a2a: { state: "completed" },
        });
      } finally {
        await alice.close();
      }
      expect(filesContaining(data, SECRET)).toEqual([]);
      expect(filesContaining(data, orgSecret)).toEqual([]);
    } finally {
      await gw.close();
      await server.close();
    }
  });

  it("names a bad --header, --header-env or --bearer-env without echoing values", () => {
    const message = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        expect(err).toBeInstanceOf(CliError);
        return (err as Error).message;
      }
      throw new Error("expected a CliError");
    };
    expect(message(() => credentialsOf({ header: ["X-API-Key secret-value"] }))).toBe(
      '--header (the 1st): expected "Name: value", e.g. --header "X-API-Key: …"',
    );
    expect(message(() => credentialsOf({ header: ["A: 1", "A: 2"] }))).toBe("--header A: given twice");
    expect(message(() => credentialsOf({ bearerEnv: "NO_SUCH_VAR" }, {}))).toBe(
      "--bearer-env NO_SUCH_VAR: the environment variable NO_SUCH_VAR is not set (or empty)",
    );
    expect(message(() => credentialsOf({ headerEnv: ["X-Key: NO_SUCH_VAR"] }, {}))).toBe(
      "--header-env X-Key: the environment variable NO_SUCH_VAR is not set (or empty)",
    );
    expect(message(() => credentialsOf({ headerEnv: ["X-Key"] }, {}))).toBe(
      '--header-env (the 1st): expected "Name: VARIABLE", e.g. --header-env "X-API-Key: BILLING_KEY"',
    );
    expect(
      message(() => credentialsOf({ header: ["X-Key: v"], headerEnv: ["X-Key: K"] }, { K: "secret" })),
    ).toBe("--header-env X-Key: given twice");
    expect(
      credentialsOf(
        { header: ["X-API-Key: v1"], headerEnv: ["X-Org: ORG"], bearerEnv: "T" },
        {
          T: " tok ",
          ORG: "acme",
        },
      ),
    ).toEqual({ headers: { "X-API-Key": "v1", "X-Org": "acme" }, bearer: "tok" });
    expect(credentialsOf({})).toBeUndefined();
  });
});
