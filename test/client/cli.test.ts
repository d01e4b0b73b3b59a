import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readAudit } from "../../src/audit/index.js";
import type { AcpAgent } from "../../src/client/index.js";
import { ErrorCode } from "../../src/protocol/index.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { agentFor, eventually } from "./fixtures.js";

const tmp = useTmpDir("acp-client-cli-");

/** `acp inbox --follow --json` running in the background: what it printed so far, and a stop. */
function followInbox(env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI_PATH, "inbox", "--follow", "--json"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    stderr: () => stderr,
    bodies: () =>
      stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => (JSON.parse(line) as { body: Record<string, unknown> | null }).body ?? {}),
    exited: () => child.exitCode !== null || child.signalCode !== null,
    stop: async () => {
      child.kill("SIGTERM");
      await gone;
    },
  };
}

describe("acp agent / send / inbox / status against a real gateway", { timeout: 90_000 }, () => {
  let gw: TestGateway;
  let dir: string;
  let bob: AcpAgent;
  let env: Record<string, string>;

  beforeEach(async () => {
    gw = await startTestGateway();
    dir = tmp();
    const bobAgent = await gw.register("bob-assistant", "bob");
    bob = agentFor(gw, bobAgent, join(dir, "bob"));
    bob.onRequest((body, context) => ({
      available_slots: ["2026-02-18T10:00:00Z"],
      asked: body.action,
      by: context.from,
    }));
    await bob.connect();
    env = {
      ACP_GATEWAY: gw.url,
      ACP_KEY: join(dir, "alice.key"),
      ACP_AUDIT_DIR: join(dir, "audit"),
      ACP_STATE_DIR: join(dir, "state"),
    };
  });
  afterEach(async () => {
    await bob.close();
    await gw.close();
  });

  async function registerAlice(): Promise<string> {
    const keygen = await runAcp([
      "keygen",
      "--agent-id",
      "alice-assistant",
      "--principal-id",
      "alice",
      "--out",
      env.ACP_KEY!,
    ]);
    expect(keygen.code, keygen.stderr).toBe(0);
    const registered = await runAcp(["agent", "register", "--capability", "calendar", "--json"], {
      env: { ...env, ACP_ADMIN_TOKEN: ADMIN_TOKEN },
    });
    expect(registered.code, registered.stderr).toBe(0);
    const json = JSON.parse(registered.stdout) as { agent_id: string; api_key: string };
    // The API's answer as it is: snake_case, with the deprecated camelCase names beside.
    expect(json).toEqual({
      agent_id: "alice-assistant",
      api_key: expect.stringMatching(/^acp_/),
      agentId: "alice-assistant",
      apiKey: json.api_key,
    });
    env.ACP_API_KEY = json.api_key;
    return json.api_key;
  }

  it("registers an agent from its key file; refuses without the admin token or with a bad key file", async () => {
    await runAcp([
      "keygen",
      "--agent-id",
      "alice-assistant",
      "--principal-id",
      "alice",
      "--out",
      env.ACP_KEY!,
    ]);
    const noToken = await runAcp(["agent", "register"], { env: { ...env, ACP_ADMIN_TOKEN: "" } });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain("--admin-token TOKEN or set ACP_ADMIN_TOKEN");
    const badToken = await runAcp(["agent", "register", "--admin-token", "wrong", "--json"], { env });
    expect(badToken.code).toBe(1);
    expect(JSON.parse(badToken.stdout).code).toBe(ErrorCode.Unauthorized);
    const badKey = join(dir, "bad.key");
    writeFileSync(badKey, JSON.stringify({ agentId: "x", principalId: "y" }));
    const bad = await runAcp(["agent", "register", "--key", badKey], {
      env: { ...env, ACP_ADMIN_TOKEN: ADMIN_TOKEN },
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`${badKey}: field signing`);

    const human = await runAcp(["agent", "register"], { env: { ...env, ACP_ADMIN_TOKEN: ADMIN_TOKEN } });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/registered alice-assistant \(principal alice\)[\s\S]*\nacp_\S+\n$/);
    const again = await runAcp(["agent", "register"], { env: { ...env, ACP_ADMIN_TOKEN: ADMIN_TOKEN } });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`[${ErrorCode.Conflict} Conflict]`);
  });

  it("lists, shows, rotates and revokes agents", async () => {
    const apiKey = await registerAlice();
    const list = await runAcp(["agent", "list"], { env });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^AGENT\s+PRINCIPAL\s+PRESENCE/);
    expect(list.stdout).toMatch(/alice-assistant\s+alice\s+\w+\s+0%\s+calendar/);
    expect(list.stdout).toMatch(/bob-assistant\s+bob\s+online/);
    const show = await runAcp(["agent", "show", "bob-assistant", "--json"], { env });
    expect(JSON.parse(show.stdout)).toMatchObject({
      agent_id: "bob-assistant",
      principal_id: "bob",
      signing: { crv: "Ed25519" },
    });
    const missing = await runAcp(["agent", "show", "nobody"], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`[${ErrorCode.NotFound} NotFound]`);

    const rotated = await runAcp(["agent", "rotate", "alice-assistant", "--json"], { env });
    const newKey = (JSON.parse(rotated.stdout) as { api_key: string }).api_key;
    expect(newKey).not.toBe(apiKey);
    const oldKey = await runAcp(["agent", "list"], { env });
    expect(oldKey.code).toBe(1);
    expect(oldKey.stderr).toContain("Unauthorized");
    env.ACP_API_KEY = newKey;
    const notAdmin = await runAcp(["agent", "revoke", "alice-assistant"], { env });
    expect(notAdmin.stderr).toContain("ACP_ADMIN_TOKEN");
    const revoked = await runAcp(["agent", "revoke", "alice-assistant", "--admin-token", ADMIN_TOKEN], {
      env,
    });
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toMatch(/^revoked alice-assistant at \d{4}-/);
  });

  it("sends a request (handshaking first) and prints the response; notifications get a status", async () => {
    await registerAlice();
    const sent = await runAcp(
      ["send", "--to", "bob-assistant", "--body", '{"action":"get-availability"}', "--json"],
      { env },
    );
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stderr).toContain("handshaking with bob-assistant");
    const json = JSON.parse(sent.stdout);
    expect(json).toEqual({
      id: expect.any(String),
      from: "bob-assistant",
      response: {
        available_slots: ["2026-02-18T10:00:00Z"],
        asked: "get-availability",
        by: "alice-assistant",
      },
    });

    const bodyFile = join(dir, "note.json");
    writeFileSync(bodyFile, JSON.stringify({ status: "running late" }));
    const noticed: unknown[] = [];
    bob.onNotification((body) => {
      noticed.push(body);
    });
    const note = await runAcp(
      ["send", "--to", "bob-assistant", "--method", "agent.notification", "--body", `@${bodyFile}`, "--json"],
      { env },
    );
    expect(note.code, note.stderr).toBe(0);
    expect(note.stderr).not.toContain("handshaking"); // the handshake was kept from the first run
    const { id } = JSON.parse(note.stdout) as { id: string };
    await eventually(() => noticed.length === 1, "bob got the notification");
    let status: Record<string, unknown> = {};
    await eventually(async () => {
      status = JSON.parse((await runAcp(["status", id, "--json"], { env })).stdout);
      return status.status === "acknowledged";
    }, "acknowledged");
    expect(status).toMatchObject({ id, from: "alice-assistant", to: "bob-assistant", retry_count: 0 });
    const human = await runAcp(["status", id], { env });
    expect(human.stdout).toMatch(
      new RegExp(`^${id}: acknowledged \\(alice-assistant → bob-assistant\\)\\n  queued`),
    );

    const audit: string[] = [];
    for await (const { entry } of readAudit({ root: env.ACP_AUDIT_DIR!, agent: "alice-assistant" }))
      audit.push(entry.method);
    expect(audit).toContain("agent.request");
    expect(audit).toContain("agent.notification");
  });

  it("acp send beside the same agent's acp inbox --follow: both work, and both write its audit log", async () => {
    await registerAlice();
    const inbox = followInbox(env);
    try {
      await eventually(() => inbox.stderr().includes("following the inbox"), "the inbox is following");
      // bob handshakes with the running inbox (it answers for alice), then notifies.
      await bob.notify("alice-assistant", { n: 1 });
      await eventually(() => inbox.bodies().some((b) => b.n === 1), "the inbox printed the first note");
      // A one-shot command of the same agent meanwhile: it gets its own answer...
      const sent = await runAcp(
        ["send", "--to", "bob-assistant", "--body", '{"action":"beside"}', "--json"],
        {
          env,
        },
      );
      expect(sent.code, sent.stderr).toBe(0);
      expect(JSON.parse(sent.stdout).response).toMatchObject({ asked: "beside", by: "alice-assistant" });
      // ...and the inbox kept its socket and keeps receiving everything else.
      await bob.notify("alice-assistant", { n: 2 });
      await eventually(() => inbox.bodies().some((b) => b.n === 2), "the inbox printed the second note");
      expect(inbox.exited()).toBe(false);
      expect(inbox.stderr()).not.toContain("disconnected");
      expect(inbox.bodies().some((b) => "asked" in b)).toBe(false); // the answer went to `acp send`
    } finally {
      await inbox.stop();
    }
    const verify = await runAcp(["audit", "verify", "--agent", "alice-assistant", "--json"], { env });
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    const methods: string[] = [];
    for await (const { entry } of readAudit({ root: env.ACP_AUDIT_DIR!, agent: "alice-assistant" }))
      methods.push(`${entry.direction} ${entry.method}`);
    expect(methods).toContain("received agent.notification"); // written by the inbox
    expect(methods).toContain("sent agent.request"); // written by acp send
  });

  it("names what is wrong with a bad --body, a missing credential, or an error response", async () => {
    await registerAlice();
    const notJson = await runAcp(["send", "--to", "bob-assistant", "--body", "{nope"], { env });
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toContain("--body: not valid JSON");
    const array = await runAcp(["send", "--to", "bob-assistant", "--body", "[1]"], { env });
    expect(array.stderr).toContain("--body: must be a JSON object");
    const noKey = await runAcp(["send", "--to", "bob-assistant"], { env: { ...env, ACP_API_KEY: "" } });
    expect(noKey.stderr).toContain("--api-key KEY or set ACP_API_KEY");
    const handoff = await runAcp(
      ["send", "--to", "bob-assistant", "--method", "agent.handoff", "--body", '{"remaining":"x"}'],
      {
        env,
      },
    );
    expect(handoff.stderr).toMatch(/\(\/completed: /);
    const handoffBody = JSON.stringify({ completed: "a", remaining: "b", context: {} });
    const noHandler = await runAcp(
      ["send", "--to", "bob-assistant", "--method", "agent.handoff", "--body", handoffBody, "--json"],
      {
        env,
      },
    );
    expect(noHandler.code).toBe(1);
    expect(noHandler.stderr).toContain("bob-assistant has no handler for agent.handoff");
    expect(JSON.parse(noHandler.stdout)).toMatchObject({ code: ErrorCode.MethodNotFound });
    const badTimeout = await runAcp(["send", "--to", "bob-assistant", "--timeout", "soon"], { env });
    expect(badTimeout.code).toBe(1);
    expect(badTimeout.stderr).toContain(
      "option '--timeout <ms>' argument 'soon' is invalid. must be a positive whole number",
    );
  });

  it("acp inbox prints and acknowledges the queued messages, then exits", async () => {
    await registerAlice();
    expect((await runAcp(["send", "--to", "bob-assistant", "--body", "{}"], { env })).code).toBe(0);
    await bob.notify("alice-assistant", { status: "first" });
    await bob.notify("alice-assistant", { secret: "s3cr3t-diagnosis" }, { encrypt: true });
    const inbox = await runAcp(["inbox", "--json"], { env });
    expect(inbox.code, inbox.stderr).toBe(0);
    const lines = inbox.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines).toEqual([
      expect.objectContaining({
        kind: "notification",
        from: "bob-assistant",
        body: { status: "first" },
        encrypted: false,
      }),
      expect.objectContaining({
        kind: "notification",
        body: { secret: "s3cr3t-diagnosis" },
        encrypted: true,
      }),
    ]);
    const empty = await runAcp(["inbox"], { env });
    expect(empty.code).toBe(0);
    expect(empty.stdout).toBe("");
  });

  it("acp demo --once prints the whole exchange and exits 0", async () => {
    const result = await runAcp(["demo", "--once", "--port", "0"], { cwd: dir, timeoutMs: 60_000 });
    expect(result.code, result.stderr).toBe(0);
    const out = result.stdout;
    expect(out).toMatch(/^ACP demo: embedded gateway at http:\/\/127\.0\.0\.1:\d+/);
    for (const expected of [
      "alice-scheduler → bob-scheduler  agent.announce",
      "bob-scheduler verified alice-scheduler's Ed25519 signature",
      "bob-scheduler → alice-scheduler  agent.capabilities",
      "alice-scheduler trusts bob-scheduler: elevated",
      // The summary alice gave travels signed with the request: bob shows her words.
      "alice-scheduler → bob-scheduler  agent.request: Asked bob's assistant for free hour-long slots next week",
      "alice-scheduler got 3 slots",
      "bob-scheduler → alice-scheduler  agent.notification",
      "alice-scheduler → bob-scheduler  agent.handoff",
      "handoff accepted",
      // What fills the dashboard's other pages (test/dashboard/demo.test.ts opens each).
      "alice-scheduler asks alice to approve booking room B2 (approval ",
      ": bob-scheduler depends on alice-scheduler",
      "bob-scheduler countered with price 100, room B2, hours 2 (round 2)",
      "accepted after 3 rounds; the agreement is signed by alice-scheduler and bob-scheduler",
      "yes has a majority",
      'handoff "Send the invitations" accepted: 40 credits held in escrow, 50% done',
    ]) {
      expect(out).toContain(expected);
    }
  });
});
