import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  KeyFileError,
  readIdentityFile,
  readPublicIdentity,
  writeIdentityFile,
} from "../../src/identity/index.js";
import { generateIdentity, publicIdentity } from "../../src/protocol/index.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-identity-");
const identity = generateIdentity("agent-alpha", "principal-a", new Date("2026-02-14T00:00:00Z"));

async function keyFileErrorOf(promise: Promise<unknown>): Promise<KeyFileError> {
  const err = await promise.then(
    () => expect.unreachable("expected a KeyFileError"),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KeyFileError);
  return err as KeyFileError;
}

describe("private key files", () => {
  it("are written with mode 0600 and read back identically", async () => {
    const file = join(tmp(), "alpha.key.json");
    await writeIdentityFile(file, identity);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await readIdentityFile(file)).toEqual(identity);
  });

  it("are never overwritten", async () => {
    const file = join(tmp(), "alpha.key.json");
    await writeIdentityFile(file, identity);
    const before = readFileSync(file, "utf8");
    const other = generateIdentity("agent-alpha", "principal-a");
    const err = await keyFileErrorOf(writeIdentityFile(file, other));
    expect(err.file).toBe(file);
    expect(err.message).toBe(`${file}: already exists; refusing to overwrite a key`);
    expect(readFileSync(file, "utf8")).toBe(before);
  });

  it("a write into a missing directory names the file and the cause", async () => {
    const file = join(tmp(), "no-such-dir", "alpha.key.json");
    expect((await keyFileErrorOf(writeIdentityFile(file, identity))).message).toBe(
      `${file}: cannot write (ENOENT)`,
    );
  });

  it.each<[string, (id: Record<string, unknown> & typeof identity) => unknown, string]>([
    [
      "a missing private key",
      (id) => ({ ...id, signing: { ...id.signing, d: undefined } }),
      "field signing.d: is missing",
    ],
    [
      "a short public key",
      (id) => ({ ...id, encryption: { ...id.encryption, x: "abc" } }),
      "field encryption.x:",
    ],
    ["a wrong curve", (id) => ({ ...id, signing: { ...id.signing, crv: "P-256" } }), "field signing.crv:"],
    ["an invalid agent id", (id) => ({ ...id, agentId: "agent alpha" }), "field agentId:"],
    ["not an object", () => [1, 2], "field (root):"],
  ])("reading one with %s names the field", async (_name, edit, expected) => {
    const file = join(tmp(), "broken.key.json");
    writeFileSync(file, JSON.stringify(edit(structuredClone(identity))));
    const err = await keyFileErrorOf(readIdentityFile(file));
    expect(err.message).toContain(`${file}: ${expected}`);
  });

  it("reading a missing file or invalid JSON names the file", async () => {
    const dir = tmp();
    expect((await keyFileErrorOf(readIdentityFile(join(dir, "none.json")))).message).toBe(
      `${join(dir, "none.json")}: cannot read (ENOENT)`,
    );
    writeFileSync(join(dir, "bad.json"), "{ nope");
    expect((await keyFileErrorOf(readIdentityFile(join(dir, "bad.json")))).message).toMatch(
      /bad\.json: not valid JSON/,
    );
  });
});

describe("public identities", () => {
  const pub = publicIdentity(identity);

  it("carry no private key material", () => {
    expect(JSON.stringify(pub)).not.toContain('"d"');
    expect(pub.signing.kid).toBe(identity.signing.kid);
  });

  it("are read from a file, from inline JSON, or reduced from a private key file", async () => {
    const dir = tmp();
    writeFileSync(join(dir, "alpha.pub.json"), JSON.stringify(pub));
    await writeIdentityFile(join(dir, "alpha.key.json"), identity);
    expect(await readPublicIdentity(join(dir, "alpha.pub.json"))).toEqual(pub);
    expect(await readPublicIdentity(` ${JSON.stringify(pub)} `)).toEqual(pub);
    expect(await readPublicIdentity(join(dir, "alpha.key.json"))).toEqual(pub);
  });

  it("name the wrong field, for public and private shapes alike", async () => {
    const badPublic = { ...pub, signing: { ...pub.signing, x: "short" } };
    expect((await keyFileErrorOf(readPublicIdentity(JSON.stringify(badPublic)))).message).toMatch(
      /^<inline JSON>: field signing\.x: must be a 32-byte key/,
    );
    const badPrivate = { ...identity, encryption: { ...identity.encryption, d: "short" } };
    expect((await keyFileErrorOf(readPublicIdentity(JSON.stringify(badPrivate)))).message).toMatch(
      /^<inline JSON>: field encryption\.d: must be a 32-byte private key/,
    );
    expect((await keyFileErrorOf(readPublicIdentity("{ not json"))).message).toMatch(
      /^<inline JSON>: not valid JSON/,
    );
  });
});
