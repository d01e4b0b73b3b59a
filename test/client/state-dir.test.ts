/**
 * Where an agent's state lives: one place per agent (the user state directory by default, or
 * `$ACP_STATE_DIR`, or a root given), whatever directory a process of it starts in; an agent still
 * in the old per-directory place (`./.acp/state`) is copied over once.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { adoptLegacyState, resolveStateRoot } from "../../src/client/state-dir.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-state-dir-");

describe("resolveStateRoot", () => {
  it("a root given wins, then $ACP_STATE_DIR, then the user state directory", () => {
    expect(resolveStateRoot("/srv/acp", { ACP_STATE_DIR: "/elsewhere" })).toBe("/srv/acp");
    expect(resolveStateRoot(undefined, { ACP_STATE_DIR: "/elsewhere" })).toBe("/elsewhere");
    if (process.platform === "linux") {
      expect(resolveStateRoot(undefined, { XDG_STATE_HOME: "/home/u/.state" })).toBe("/home/u/.state/acp");
      expect(resolveStateRoot(undefined, {})).toBe(join(homedir(), ".local", "state", "acp"));
      // A relative XDG_STATE_HOME is invalid (the XDG spec) and ignored.
      expect(resolveStateRoot(undefined, { XDG_STATE_HOME: "relative" })).toBe(
        join(homedir(), ".local", "state", "acp"),
      );
    }
  });
});

describe("adoptLegacyState", () => {
  it("copies an agent's files from ./.acp/state/<agent-id> once, and never over existing state", async () => {
    const legacy = join(tmp(), ".acp", "state");
    mkdirSync(join(legacy, "bob-assistant"), { recursive: true });
    writeFileSync(join(legacy, "bob-assistant", "handshakes.json"), '{"version":1,"peers":{}}', {
      mode: 0o600,
    });
    writeFileSync(join(legacy, "bob-assistant", "handled.log"), '[1,"m-1"]\n', { mode: 0o600 });
    const root = join(tmp(), "state");

    expect(await adoptLegacyState(root, "bob-assistant", legacy)).toBe(join(legacy, "bob-assistant"));
    expect(readFileSync(join(root, "bob-assistant", "handled.log"), "utf8")).toBe('[1,"m-1"]\n');
    expect(statSync(join(root, "bob-assistant", "handshakes.json")).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, "bob-assistant")).mode & 0o777).toBe(0o700);

    writeFileSync(join(legacy, "bob-assistant", "handled.log"), '[2,"m-2"]\n');
    expect(await adoptLegacyState(root, "bob-assistant", legacy)).toBeUndefined(); // state exists: left alone
    expect(readFileSync(join(root, "bob-assistant", "handled.log"), "utf8")).toBe('[1,"m-1"]\n');
    expect(await adoptLegacyState(root, "carol-assistant", legacy)).toBeUndefined(); // nothing to adopt
  });
});
