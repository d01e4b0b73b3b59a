/**
 * The outbound bridge key at rest: sealed with the custody key (never a private JWK in the clear),
 * made at the first registration, a key file in the clear from an older gateway sealed in place,
 * and a clear refusal when the custody key is not the one it was sealed with.
 */
import { generateKeyPairSync } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, api, startTestGateway, type TestGateway } from "../../../helpers/gateway.js";
import { useTmpDir } from "../../../helpers/tmp.js";
import { startA2AServer } from "./a2a-server.js";

const tmp = useTmpDir("acp-a2a-key-");
const KEY_A = Buffer.alloc(32, 7).toString("base64");
const KEY_B = Buffer.alloc(32, 9).toString("base64");

async function addA2A(gw: TestGateway, url: string, agentId: string) {
  const added = await api(gw.url, "/api/v1/a2a/remote-agents", {
    body: { url, agent_id: agentId },
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  expect(added.status, JSON.stringify(added.json)).toBe(201);
  return added.json as { bridge_key: string };
}

describe("the A2A bridge key at rest", () => {
  it("is made at the first registration, sealed with the custody key, and used again after a restart", async () => {
    const data = join(tmp(), "data");
    const file = join(data, "a2a-bridge", "bridge-key.json");
    const a2a = await startA2AServer({ behaviour: "echo-task" });
    let gw = await startTestGateway({ dataDir: data, custody: { key: KEY_A }, allowPrivateUrls: true });
    try {
      expect(existsSync(file)).toBe(false);
      const { bridge_key: bridgeKey } = await addA2A(gw, a2a.url, "echo");
      const text = readFileSync(file, "utf8");
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(JSON.parse(text)).toMatchObject({ acpBridgeKey: 1, sealed: { v: 1, alg: "A256GCM" } });
      expect(text).not.toMatch(/"d"|"kty"/);
      await gw.close();
      gw = await startTestGateway({ dataDir: data, custody: { key: KEY_A }, allowPrivateUrls: true });
      // The restarted gateway signs with the same key: a second registration carries it.
      expect((await addA2A(gw, a2a.url, "echo-2")).bridge_key).toBe(bridgeKey);
    } finally {
      await gw.close();
      await a2a.close();
    }
  });

  it("seals a key file an older gateway wrote in the clear, keeping the key", async () => {
    const data = join(tmp(), "data");
    const file = join(data, "a2a-bridge", "bridge-key.json");
    mkdirSync(join(data, "a2a-bridge"), { recursive: true });
    const plain = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" });
    writeFileSync(file, `${JSON.stringify(plain)}\n`, { mode: 0o600 });
    const a2a = await startA2AServer({ behaviour: "echo-task" });
    const gw = await startTestGateway({ dataDir: data, custody: { key: KEY_A }, allowPrivateUrls: true });
    try {
      const text = readFileSync(file, "utf8");
      expect(JSON.parse(text)).toMatchObject({ acpBridgeKey: 1 });
      expect(text).not.toContain(plain.d as string);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect((await addA2A(gw, a2a.url, "echo")).bridge_key).toBe(plain.x);
    } finally {
      await gw.close();
      await a2a.close();
    }
  });

  it("refuses to restart with another custody key, saying what is sealed", async () => {
    const data = join(tmp(), "data");
    const a2a = await startA2AServer({ behaviour: "echo-task" });
    const gw = await startTestGateway({ dataDir: data, custody: { key: KEY_A }, allowPrivateUrls: true });
    try {
      await addA2A(gw, a2a.url, "echo");
    } finally {
      await gw.close();
      await a2a.close();
    }
    await expect(startTestGateway({ dataDir: data, custody: { key: KEY_B } })).rejects.toThrow(
      /is not the one the stored sealed keys \(custodial agent keys, the A2A bridge key, A2A credentials\) were encrypted with/,
    );
  });

  it("refuses to start when the custody key is not the one the bridge key was sealed with", async () => {
    const dir = tmp();
    const first = join(dir, "first");
    const a2a = await startA2AServer({ behaviour: "echo-task" });
    const gw = await startTestGateway({ dataDir: first, custody: { key: KEY_A }, allowPrivateUrls: true });
    try {
      await addA2A(gw, a2a.url, "echo");
    } finally {
      await gw.close();
      await a2a.close();
    }
    // The key file alone, next to another custody key (e.g. a restored data directory).
    const second = join(dir, "second");
    mkdirSync(join(second, "a2a-bridge"), { recursive: true });
    copyFileSync(join(first, "a2a-bridge", "bridge-key.json"), join(second, "a2a-bridge", "bridge-key.json"));
    await expect(startTestGateway({ dataDir: second, custody: { key: KEY_B } })).rejects.toThrow(
      /bridge-key\.json: the A2A bridge key does not open with this gateway's custody key \(ACP_CUSTODY_KEY, or custody\.key in the data directory\)/,
    );
  });

  it("names the file and the field of a key file that is neither sealed nor a key", async () => {
    const data = join(tmp(), "data");
    mkdirSync(join(data, "a2a-bridge"), { recursive: true });
    writeFileSync(join(data, "a2a-bridge", "bridge-key.json"), '{"acpBridgeKey":1,"sealed":{"v":2}}\n');
    await expect(
      startTestGateway({ dataDir: data, custody: { key: KEY_A }, allowPrivateUrls: true }),
    ).rejects.toThrow(/bridge-key\.json: not a sealed A2A bridge key \(field sealed\.v/);
  });
});
