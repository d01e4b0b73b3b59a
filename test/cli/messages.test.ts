import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeIdentityFile } from "../../src/identity/index.js";
import { keyId, publicIdentity, verifyEnvelope } from "../../src/protocol/index.js";
import { runAcp } from "../helpers/cli.js";
import { useTmpDir } from "../helpers/tmp.js";
import { alpha, beta, keyRing, exampleRequest, exampleResponse } from "../protocol/fixtures.js";

const tmp = useTmpDir("acp-cli-messages-");

/** A directory with alpha's and beta's key files, alpha's public identity, and the core protocol's example request. */
async function workspace() {
  const dir = tmp();
  const files = {
    dir,
    alphaKey: join(dir, "alpha.key.json"),
    betaKey: join(dir, "beta.key.json"),
    alphaPublic: join(dir, "alpha.pub.json"),
    request: join(dir, "request.json"),
  };
  await writeIdentityFile(files.alphaKey, alpha);
  await writeIdentityFile(files.betaKey, beta);
  writeFileSync(files.alphaPublic, JSON.stringify(publicIdentity(alpha)));
  writeFileSync(files.request, JSON.stringify(exampleRequest(), null, 2));
  return files;
}

/** The core protocol's example request, stamped now so that --fresh accepts it. */
function freshRequest() {
  const request = exampleRequest();
  request.params.headers.timestamp = new Date().toISOString();
  return JSON.stringify(request);
}

describe("acp validate", () => {
  it("exits 0 for the core protocol's example request and response, from a file or stdin", async () => {
    const { request } = await workspace();
    const fromFile = await runAcp(["validate", request]);
    expect(fromFile).toMatchObject({ code: 0, stdout: `${request}: valid request from agent-alpha\n` });
    const fromStdin = await runAcp(["validate", "-"], { input: JSON.stringify(exampleResponse()) });
    expect(fromStdin).toMatchObject({ code: 0, stdout: "<stdin>: valid response from agent-beta\n" });
    const json = await runAcp(["validate", "--json"], { input: JSON.stringify(exampleRequest()) });
    expect(JSON.parse(json.stdout)).toEqual({ valid: true, kind: "request", from: "agent-alpha" });
  });

  it("exits 1 with the JSON-RPC error object on stdout and the first problem on stderr", async () => {
    const broken = exampleRequest();
    delete broken.params.headers.timestamp;
    const result = await runAcp(["validate"], { input: JSON.stringify(broken) });
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toEqual({
      code: -32602,
      message: "malformed or missing headers or body",
      data: {
        reason: "InvalidParams",
        problems: [{ path: "/params/headers/timestamp", message: "is required" }],
      },
    });
    expect(result.stderr).toBe(
      "acp: <stdin>: malformed or missing headers or body [-32602] (/params/headers/timestamp: is required)\n",
    );
  });

  it("invalid JSON is -32700; a missing file names the file", async () => {
    const parse = await runAcp(["validate"], { input: "{ nope" });
    expect(parse.code).toBe(1);
    expect(JSON.parse(parse.stdout).code).toBe(-32700);
    const missing = await runAcp(["validate", "/nonexistent/message.json"]);
    expect(missing).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "acp: cannot read /nonexistent/message.json: ENOENT\n",
    });
  });

  it("--envelope requires the signature and routing headers", async () => {
    const result = await runAcp(["validate", "--envelope"], { input: JSON.stringify(exampleRequest()) });
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout).data.problems.map((p: { path: string }) => p.path)).toEqual([
      "/params/headers/message-id",
      "/params/headers/recipient-id",
    ]);
  });
});

describe("acp sign", () => {
  it("prints a signed envelope that verifies, adding message-id and recipient-id", async () => {
    const { alphaKey, request } = await workspace();
    const result = await runAcp(["sign", "--key", alphaKey, "--to", "agent-beta", request]);
    expect(result.code).toBe(0);
    const signed = JSON.parse(result.stdout);
    expect(signed.params.headers).toMatchObject({
      "recipient-id": "agent-beta",
      "message-id": expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expect(signed.params.body).toEqual(exampleRequest().params.body);
    expect(verifyEnvelope(signed, { resolveKey: keyRing(alpha) }).headers["agent-id"]).toBe("agent-alpha");
    const compact = await runAcp(["sign", "--key", alphaKey, "--to", "agent-beta", "--compact", request]);
    expect(compact.stdout.trim().split("\n")).toHaveLength(1);
  });

  it("keeps the routing headers a message already has", async () => {
    const { alphaKey } = await workspace();
    const routed = exampleRequest();
    routed.params.headers["recipient-id"] = "agent-gamma";
    routed.params.headers["message-id"] = "msg-0000-fixed";
    const result = await runAcp(["sign", "--key", alphaKey], { input: JSON.stringify(routed) });
    expect(JSON.parse(result.stdout).params.headers).toMatchObject({
      "recipient-id": "agent-gamma",
      "message-id": "msg-0000-fixed",
    });
  });

  it("refuses without a recipient, naming the header and the option", async () => {
    const { alphaKey, request } = await workspace();
    const result = await runAcp(["sign", "--key", alphaKey, request]);
    expect(result).toMatchObject({
      code: 1,
      stdout: "",
      stderr: `acp: ${request}: header recipient-id is missing; pass --to <agent-id>\n`,
    });
  });

  it("refuses to sign another agent's message", async () => {
    const { betaKey, request } = await workspace();
    const result = await runAcp(["sign", "--key", betaKey, "--to", "agent-beta", request]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `acp: ${request}: header agent-id is agent-alpha but ${betaKey} belongs to agent-beta\n`,
    );
  });

  it("refuses an invalid message with its JSON-RPC error, and a bad key file by field", async () => {
    const { alphaKey, dir } = await workspace();
    const invalid = await runAcp(["sign", "--key", alphaKey, "--to", "agent-beta"], {
      input: JSON.stringify({ ...exampleRequest(), id: undefined }),
    });
    expect(invalid.code).toBe(1);
    expect(JSON.parse(invalid.stdout).data.problems[0].path).toBe("/id");
    const badKey = join(dir, "bad.key.json");
    writeFileSync(badKey, JSON.stringify({ ...alpha, signing: { ...alpha.signing, d: "x" } }));
    const result = await runAcp(["sign", "--key", badKey, "--to", "agent-beta"], {
      input: JSON.stringify(exampleRequest()),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      new RegExp(`^acp: ${badKey}: field signing\\.d: must be a 32-byte private key`),
    );
  });
});

describe("acp verify", () => {
  async function signedText(
    files: Awaited<ReturnType<typeof workspace>>,
    input = JSON.stringify(exampleRequest()),
  ) {
    const result = await runAcp(["sign", "--key", files.alphaKey, "--to", "agent-beta", "--compact"], {
      input,
    });
    expect(result.code).toBe(0);
    return result.stdout;
  }

  it("exits 0 for a genuine message, naming the key and the routing", async () => {
    const files = await workspace();
    const signed = await signedText(files);
    const { headers } = JSON.parse(signed).params;
    const result = await runAcp(["verify", "--public-key", files.alphaPublic], { input: signed });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(
      `<stdin>: valid signature by ${keyId("agent-alpha", alpha.signing)} ` +
        `(message ${headers["message-id"]} to agent-beta)\n`,
    );
    const json = await runAcp(["verify", "--json", "--public-key", JSON.stringify(publicIdentity(alpha))], {
      input: signed,
    });
    expect(JSON.parse(json.stdout)).toEqual({
      valid: true,
      kid: expect.stringMatching(/^agent-alpha#/),
      messageId: headers["message-id"],
    });
    const withPrivateFile = await runAcp(["verify", "--public-key", files.alphaKey], { input: signed });
    expect(withPrivateFile.code).toBe(0);
  });

  it("exits 1 naming the reason when one byte is tampered with", async () => {
    const files = await workspace();
    const tampered = (await signedText(files)).replace('"duration_minutes":60', '"duration_minutes":90');
    const result = await runAcp(["verify", "--public-key", files.alphaPublic], { input: tampered });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^acp: <stdin>: the signature does not match the message .* \[-32002\] \(\/signature: /,
    );
    expect(JSON.parse(result.stdout)).toMatchObject({ code: -32002, data: { reason: "SignatureInvalid" } });
  });

  it("exits 1 for another agent's public key (-32003) and for a wrong recipient (-32007)", async () => {
    const files = await workspace();
    const signed = await signedText(files);
    const wrongKey = await runAcp(["verify", "--public-key", JSON.stringify(publicIdentity(beta))], {
      input: signed,
    });
    expect(JSON.parse(wrongKey.stdout).code).toBe(-32003);
    const misrouted = await runAcp(
      ["verify", "--public-key", files.alphaPublic, "--recipient", "agent-gamma"],
      {
        input: signed,
      },
    );
    expect(misrouted.code).toBe(1);
    expect(JSON.parse(misrouted.stdout).code).toBe(-32007);
  });

  it("--fresh refuses a stale timestamp (-32006) and accepts a fresh one", async () => {
    const files = await workspace();
    const stale = await runAcp(["verify", "--fresh", "--public-key", files.alphaPublic], {
      input: await signedText(files),
    });
    expect(stale.code).toBe(1);
    expect(JSON.parse(stale.stdout).code).toBe(-32006);
    expect(stale.stderr).toContain("/params/headers/timestamp");
    const fresh = await runAcp(["verify", "--fresh", "--public-key", files.alphaPublic], {
      input: await signedText(files, freshRequest()),
    });
    expect(fresh.code).toBe(0);
  });

  it("names the public key file and field when the key is unusable", async () => {
    const files = await workspace();
    const bad = join(files.dir, "bad.pub.json");
    writeFileSync(bad, JSON.stringify({ ...publicIdentity(alpha), agentId: "agent alpha" }));
    const result = await runAcp(["verify", "--public-key", bad], { input: await signedText(files) });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^acp: ${bad}: field agentId: `));
  });
});
