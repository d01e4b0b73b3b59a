import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyId, PrivateIdentity, PublicIdentity } from "../../src/protocol/index.js";
import { runAcp } from "../helpers/cli.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-cli-keys-");
const keygen = (agentId: string, principalId: string, out: string, ...extra: string[]) =>
  runAcp(["keygen", "--agent-id", agentId, "--principal-id", principalId, "--out", out, ...extra]);

describe("acp keygen", () => {
  it("writes a 0600 private key file and prints the public identity for people", async () => {
    const out = join(tmp(), "alpha.key.json");
    const result = await keygen("agent-alpha", "principal-a", out);
    expect(result.code).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const identity = PrivateIdentity.parse(JSON.parse(readFileSync(out, "utf8")));
    const kid = keyId("agent-alpha", identity.signing);
    expect(result.stdout).toContain(
      `wrote private keys for agent-alpha (principal principal-a) to ${out} (mode 0600)`,
    );
    expect(result.stdout).toContain(`signing key id: ${kid}`);
    expect(result.stdout).not.toContain(identity.signing.d);
    expect(result.stdout).not.toContain(identity.encryption.d);
  });

  it("--json prints only the public identity, signing and encryption keys, no private parts", async () => {
    const out = join(tmp(), "beta.key.json");
    const result = await keygen("agent-beta", "principal-b", out, "--json");
    expect(result.code).toBe(0);
    const pub = PublicIdentity.parse(JSON.parse(result.stdout));
    expect(pub).toMatchObject({
      agentId: "agent-beta",
      principalId: "principal-b",
      signing: { kty: "OKP", crv: "Ed25519" },
      encryption: { kty: "OKP", crv: "X25519" },
    });
    expect(result.stdout).not.toMatch(/"d"/);
    const identity = PrivateIdentity.parse(JSON.parse(readFileSync(out, "utf8")));
    expect(pub.signing.x).toBe(identity.signing.x);
  });

  it("never overwrites an existing key file", async () => {
    const out = join(tmp(), "alpha.key.json");
    await keygen("agent-alpha", "principal-a", out);
    const before = readFileSync(out, "utf8");
    const again = await keygen("agent-alpha", "principal-a", out);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`acp: ${out}: already exists; refusing to overwrite a key\n`);
    expect(readFileSync(out, "utf8")).toBe(before);
  });

  it.each([
    ["--agent-id", ["--agent-id", "agent.alpha", "--principal-id", "principal-a"]],
    ["--principal-id", ["--agent-id", "agent-alpha", "--principal-id", "principal a"]],
  ])("names the invalid option %s and writes nothing", async (flag, args) => {
    const out = join(tmp(), "x.key.json");
    const result = await runAcp(["keygen", ...args, "--out", out]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^acp: invalid ${flag} "`));
    expect(() => statSync(out)).toThrow();
  });

  it("requires --out", async () => {
    const result = await runAcp(["keygen", "--agent-id", "agent-alpha", "--principal-id", "principal-a"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("--out <file>");
  });
});
