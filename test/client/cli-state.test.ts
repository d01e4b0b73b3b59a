/**
 * The CLI keeps an agent's state (its handshakes, its handled messages) in one place per agent: the
 * user state directory by default, `--state-dir` or `$ACP_STATE_DIR` to move it; an agent whose state
 * is still in the old per-directory place is picked up from there.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { runAcp } from "../helpers/cli.js";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { agentFor } from "./fixtures.js";

const tmp = useTmpDir("acp-cli-state-");

describe("acp send: one state per agent, not per working directory", { timeout: 90_000 }, () => {
  let gw: TestGateway;
  let dir: string;
  let bob: AcpAgent;
  let env: Record<string, string>;

  beforeEach(async () => {
    gw = await startTestGateway();
    dir = tmp();
    bob = agentFor(gw, await gw.register("bob-assistant", "bob"), join(dir, "bob"));
    bob.onRequest(() => ({ ok: true }));
    await bob.connect();
    // No ACP_STATE_DIR: the default place, under this test's XDG_STATE_HOME.
    env = {
      ACP_GATEWAY: gw.url,
      ACP_KEY: join(dir, "alice.key"),
      ACP_AUDIT_DIR: join(dir, "audit"),
      ACP_STATE_DIR: "",
      XDG_STATE_HOME: join(dir, "xdg"),
    };
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
    const registered = await runAcp(["agent", "register", "--json"], {
      env: { ...env, ACP_ADMIN_TOKEN: ADMIN_TOKEN },
    });
    expect(registered.code, registered.stderr).toBe(0);
    env.ACP_API_KEY = (JSON.parse(registered.stdout) as { apiKey: string }).apiKey;
  });
  afterEach(async () => {
    await bob.close();
    await gw.close();
  });

  const send = (cwd: string, extra: string[] = []) => {
    mkdirSync(cwd, { recursive: true });
    return runAcp(["send", "--to", "bob-assistant", "--body", "{}", ...extra], { env, cwd });
  };

  it("a second directory finds the handshake the first one made, in the user state directory", async () => {
    const first = await send(join(dir, "one"));
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain("handshaking with bob-assistant");
    expect(existsSync(join(dir, "xdg", "acp", "alice-assistant", "handshakes.json"))).toBe(true);
    expect(existsSync(join(dir, "one", ".acp"))).toBe(false);

    const second = await send(join(dir, "two"));
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).not.toContain("handshaking");
  });

  it("--state-dir moves it", async () => {
    const moved = await send(join(dir, "one"), ["--state-dir", join(dir, "elsewhere")]);
    expect(moved.code, moved.stderr).toBe(0);
    expect(existsSync(join(dir, "elsewhere", "alice-assistant", "handshakes.json"))).toBe(true);
    expect(existsSync(join(dir, "xdg", "acp", "alice-assistant"))).toBe(false);
  });

  it("state left in the old per-directory place (./.acp/state) is picked up from there", async () => {
    const old = join(dir, "old");
    const before = await send(old, ["--state-dir", join(old, ".acp", "state")]);
    expect(before.code, before.stderr).toBe(0);
    const after = await send(old); // the default place is empty: the old one is adopted
    expect(after.code, after.stderr).toBe(0);
    expect(after.stderr).not.toContain("handshaking");
    expect(existsSync(join(dir, "xdg", "acp", "alice-assistant", "handshakes.json"))).toBe(true);
  });
});
