import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { registerCustodial, startTestGateway, type TestGateway } from "../../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../../helpers/nats.js";
import { useTmpDir } from "../../helpers/tmp.js";

const startNats = useNatsServer();

describeWithNats("custodial keys on NATS: several gateways, one key-encryption key", () => {
  const tmp = useTmpDir("acp-custody-nats-");
  const open: TestGateway[] = [];
  beforeEach(() => vi.stubEnv("ACP_CUSTODY_KEY", ""));
  afterEach(async () => {
    vi.unstubAllEnvs();
    for (const gw of open.splice(0)) await gw.close();
  });

  it("a key held through one gateway signs through another given the same KEK; one without it, or with another, does not start", async () => {
    const { url } = await startNats();
    const key = randomBytes(32).toString("base64url");
    const a = await startTestGateway({ natsUrl: url, dataDir: tmp(), custody: { key } });
    open.push(a);
    const registered = await registerCustodial(a.url, "worker", { principalId: "alice" });
    expect(registered.status).toBe(201);

    const b = await startTestGateway({ natsUrl: url, dataDir: tmp(), custody: { key } });
    open.push(b);
    const identity = await b.gateway.context.registry.custodian?.identity("worker");
    expect(identity?.signing.x).toBe((await b.gateway.context.registry.get("worker"))?.signing.x);

    await expect(startTestGateway({ natsUrl: url, dataDir: tmp() })).rejects.toThrow(
      /keys sealed by this gateway \(custodial agent keys, the A2A bridge key, A2A credentials\) are stored .* but their key-encryption key is missing: set ACP_CUSTODY_KEY/,
    );
    await expect(
      startTestGateway({ natsUrl: url, dataDir: tmp(), custody: { key: randomBytes(32).toString("hex") } }),
    ).rejects.toThrow(
      /is not the one the stored sealed keys \(custodial agent keys, the A2A bridge key, A2A credentials\) were encrypted with/,
    );
    // The refused gateways changed nothing: the first still signs.
    expect((await a.gateway.context.registry.custodian?.identity("worker"))?.agentId).toBe("worker");
  });
});
