import { randomBytes } from "node:crypto";
import { existsSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CUSTODY_KEY_FILE } from "../../../src/extensions/custody/index.js";
import {
  ADMIN_TOKEN,
  api,
  registerCustodial,
  startTestGateway,
  type TestGateway,
} from "../../helpers/gateway.js";
import { useTmpDir } from "../../helpers/tmp.js";

async function custodial(gw: TestGateway, agentId: string) {
  const res = await registerCustodial(gw.url, agentId);
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return res.json.apiKey as string;
}

describe("custody key-encryption key: generated, required, checked", () => {
  const tmp = useTmpDir("acp-custody-");
  // The key file is used only when no key is configured: whatever the shell running the tests says.
  beforeEach(() => vi.stubEnv("ACP_CUSTODY_KEY", ""));
  afterEach(() => vi.unstubAllEnvs());

  it("generates a 0600 key file at the first custodial registration, and refuses to start without it or with another key", async () => {
    const data = tmp();
    const file = join(data, CUSTODY_KEY_FILE);
    const first = await startTestGateway({ dataDir: data });
    expect(existsSync(file)).toBe(false); // nothing held yet: nothing generated
    await custodial(first, "worker");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const signing = (await first.gateway.context.registry.get("worker"))?.signing;
    await first.close();

    renameSync(file, `${file}.saved`);
    await expect(startTestGateway({ dataDir: data })).rejects.toThrow(
      /keys sealed by this gateway \(custodial agent keys, the A2A bridge key, A2A credentials\) are stored \(since .*\) but their key-encryption key is missing: set ACP_CUSTODY_KEY to it, or restore .*custody\.key.*Nothing was changed\./,
    );
    expect(existsSync(file)).toBe(false); // no new key made in its place

    const other = randomBytes(32).toString("base64");
    await expect(startTestGateway({ dataDir: data, custody: { key: other } })).rejects.toThrow(
      /the custody key from the custody key option is not the one the stored sealed keys \(custodial agent keys, the A2A bridge key, A2A credentials\) were encrypted with/,
    );
    await expect(startTestGateway({ dataDir: data, custody: { key: "too-short" } })).rejects.toThrow(
      "the custody key option: the custody key must be 32 bytes as base64, base64url or 64 hex digits",
    );

    // The original key back: everything is there, and still signs for the agent.
    renameSync(`${file}.saved`, file);
    const again = await startTestGateway({ dataDir: data });
    try {
      const identity = await again.gateway.context.registry.custodian?.identity("worker");
      expect(identity?.signing.x).toBe(signing?.x);
    } finally {
      await again.close();
    }
  });

  it("uses a configured key (as ACP_CUSTODY_KEY gives) instead of a file, and custody can be turned off", async () => {
    const data = tmp();
    const key = randomBytes(32).toString("hex");
    const gw = await startTestGateway({ dataDir: data, custody: { key } });
    await custodial(gw, "worker");
    expect(existsSync(join(data, CUSTODY_KEY_FILE))).toBe(false);
    await gw.close();

    // A malformed key stops start-up even with nothing stored yet.
    vi.stubEnv("ACP_CUSTODY_KEY", "not-32-bytes");
    await expect(startTestGateway({ dataDir: tmp() })).rejects.toThrow(
      "ACP_CUSTODY_KEY: the custody key must be 32 bytes as base64, base64url or 64 hex digits",
    );
    vi.stubEnv("ACP_CUSTODY_KEY", "");

    const off = await startTestGateway({ dataDir: tmp(), custody: { enabled: false } });
    try {
      const refused = await api(off.url, "/api/v1/agents", {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        body: { agentId: "worker", principalId: "p", custodial: true },
      });
      expect(refused.status).toBe(400);
      expect(refused.json.error).toMatchObject({
        message: "this gateway does not hold custodial keys (custody is off)",
        data: { problems: [{ path: "/custodial", message: "not offered by this gateway" }] },
      });
    } finally {
      await off.close();
    }
  });
});
