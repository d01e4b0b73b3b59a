import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AcpAgent } from "../../src/client/index.js";
import { type RunningGateway, spawnGateway } from "../helpers/cli.js";
import {
  type FederatedGateway,
  organization,
  removeOrganization,
  startFederatedGateway,
} from "../helpers/federation.js";
import { ADMIN_TOKEN, api, registerTestAgent } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

/** a.test runs as its own process (the CLI), so it can be killed with SIGKILL mid-stream. */
describe("federation: kill -9 of the sending gateway", () => {
  const running: RunningGateway[] = [];
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  afterAll(async () => {
    for (const gw of running) gw.child.kill("SIGKILL");
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it("loses no message a.test accepted, and delivers each once", async () => {
    const [orgA, orgB] = await Promise.all([organization("a.test"), organization("b.test")]);
    const data = mkdtempSync(join(tmpdir(), "acp-fed-crash-"));
    cleanups.push(() => rmSync(data, { recursive: true, force: true }));
    for (const org of [orgA, orgB]) cleanups.push(() => removeOrganization(org));
    const b: FederatedGateway = await startFederatedGateway(orgB, [orgA]);
    cleanups.push(() => b.close());
    const startA = async () => {
      const gw = await spawnGateway([
        ...["--data", data, "--allow-private-urls", "127.0.0.1", "--federation-domain", "a.test"],
        ...["--federation-port", String(orgA.port), "--federation-ca", orgB.ca],
        ...["--federation-tls-cert", orgA.tls.cert, "--federation-tls-key", orgA.tls.key],
      ]);
      running.push(gw);
      return gw;
    };
    const a = await startA();
    const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
    expect(
      (await api(a.url, "/api/v1/federation/peers", { ...admin, body: { domain: "b.test", url: orgB.url } }))
        .status,
    ).toBe(201);
    await b.admit(orgA);
    const alphaReg = await registerTestAgent(a.url, "alpha", "principal-alpha");
    const { agent: beta } = await b.agent("beta");
    const got: number[] = [];
    beta.onNotification((body) => {
      got.push(body.n as number);
    });
    const alpha = new AcpAgent({
      gateway: a.url,
      identity: alphaReg.identity,
      apiKey: alphaReg.apiKey,
      layers: [0, 1, 2],
      audit: false,
      state: false,
    });
    await alpha.connect();
    await alpha.handshake("beta@b.test");

    const accepted: number[] = [];
    try {
      for (let n = 1; n <= 500; n++) {
        await alpha.notify("beta@b.test", { n });
        accepted.push(n);
        if (n === 40) a.child.kill("SIGKILL");
      }
    } catch {
      // a.test died: what it accepted before is on its disk
    }
    await alpha.close().catch(() => undefined);
    expect(accepted.length).toBeGreaterThanOrEqual(40);

    await startA();
    await until(
      () => got.length,
      (n) => n >= accepted.length,
      "every accepted notification reached beta",
      60_000,
    );
    // Once each, in the order a.test accepted them.
    expect(got.slice(0, accepted.length)).toEqual(accepted);
    expect(new Set(got).size).toBe(got.length);
  }, 120_000);
});
