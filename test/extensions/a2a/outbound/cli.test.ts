import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runAcp } from "../../../helpers/cli.js";
import { ADMIN_TOKEN } from "../../../helpers/gateway.js";
import { useOutboundBed } from "./testbed.js";

// Each case spawns the built CLI a few times: slow on a loaded machine.
describe("acp agent add-a2a / remove-a2a", { timeout: 120_000 }, () => {
  const bed = useOutboundBed();
  const gatewayFlags = () => ["--gateway", bed.gw.url, "--admin-token", ADMIN_TOKEN];

  it("registers an A2A agent by URL, then removes it", async () => {
    const server = await bed.a2a({ streaming: true });
    const added = await runAcp(["agent", "add-a2a", server.url, "--id", "echo", ...gatewayFlags()]);
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(added.stdout).toContain(
      `registered A2A agent "Echo Agent" as echo (principal a2a:${new URL(server.url).host})`,
    );
    expect(added.stdout).toContain("unsigned card");
    expect(added.stdout).toContain("(streaming)");
    const alice = await bed.caller();
    expect(await alice.request("echo", { text: "via cli" })).toMatchObject({ a2a: { state: "completed" } });

    const removed = await runAcp(["agent", "remove-a2a", "echo", ...gatewayFlags()]);
    expect(removed.code).toBe(0);
    const again = await runAcp(["agent", "remove-a2a", "echo", ...gatewayFlags()]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("no registered A2A agent echo");
  });

  it("names the card's bad field, and a card-key file's bad field", async () => {
    const server = await bed.a2a({ rawCard: (card) => ({ ...card, name: "" }) });
    const bad = await runAcp(["agent", "add-a2a", server.url, ...gatewayFlags()]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("(/card/name: must not be empty)");

    const keyFile = join(bed.dir, "card-key.json");
    writeFileSync(keyFile, JSON.stringify({ kty: "OKP", crv: "Ed25519", x: "abc", d: "secret" }));
    const priv = await runAcp(["agent", "add-a2a", server.url, "--card-key", keyFile, ...gatewayFlags()]);
    expect(priv.code).toBe(1);
    expect(priv.stderr).toContain(`${keyFile}: field d: this is a private key`);
  });
});
