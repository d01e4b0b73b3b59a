import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningGateway, runAcp, spawnGateway } from "../helpers/cli.js";
import {
  type FederatedGateway,
  type Organization,
  organization,
  removeOrganization,
  startFederatedGateway,
} from "../helpers/federation.js";
import { ADMIN_TOKEN } from "../helpers/gateway.js";

/** `acp gateway --federation-*` and `acp federation …` against a gateway run by the CLI. */
describe("acp federation", () => {
  let orgA: Organization;
  let orgB: Organization;
  let a: RunningGateway;
  let b: FederatedGateway;
  let data: string;

  const acp = (...args: string[]) =>
    runAcp(["federation", ...args, "--gateway", a.url], { env: { ACP_ADMIN_TOKEN: ADMIN_TOKEN } });

  beforeAll(async () => {
    [orgA, orgB] = await Promise.all([organization("a.test"), organization("b.test")]);
    data = mkdtempSync(join(tmpdir(), "acp-cli-fed-"));
    b = await startFederatedGateway(orgB, [orgA]);
    a = await spawnGateway([
      "--data",
      data,
      "--allow-private-urls",
      "127.0.0.1",
      "--federation-domain",
      "a.test",
      "--federation-port",
      String(orgA.port),
      "--federation-tls-cert",
      orgA.tls.cert,
      "--federation-tls-key",
      orgA.tls.key,
      "--federation-ca",
      orgB.ca,
      "--federation-resolve",
      `b.test=${orgB.url}`,
    ]);
  }, 60_000);

  afterAll(async () => {
    a?.child.kill("SIGTERM");
    await b?.close();
    for (const org of [orgA, orgB]) if (org) removeOrganization(org);
    rmSync(data, { recursive: true, force: true });
  });

  it("refuses to federate without TLS, with a domain that is not one, or a resolution that is not DOMAIN=URL", async () => {
    const noTls = await runAcp(["gateway", "--port", "0", "--federation-domain", "a.test"]);
    expect(noTls.code).not.toBe(0);
    expect(noTls.stderr).toContain("federation requires TLS");
    const badDomain = await runAcp(["gateway", "--port", "0", "--federation-domain", "A_Test"]);
    expect(badDomain.code).not.toBe(0);
    expect(badDomain.stderr).toContain("--federation-domain");
    const badResolve = await runAcp([
      "gateway",
      "--port",
      "0",
      "--federation-domain",
      "a.test",
      "--tls-cert",
      orgA.tls.cert,
      "--tls-key",
      orgA.tls.key,
      "--federation-resolve",
      "https://b.test",
    ]);
    expect(badResolve.code).not.toBe(0);
    expect(badResolve.stderr).toContain("--federation-resolve");
  });

  it("adds a peer, pinning the keys its /.well-known/acp shows, and shows it in list and status", async () => {
    expect(a.output()).toContain("federating as a.test");
    // No --url: the gateway's --federation-resolve says where b.test is.
    const added = await acp("add", "b.test");
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(/peer b\.test added; pinned keys: b\.test#/);

    const list = await acp("list", "--json");
    expect(JSON.parse(list.stdout).peers).toMatchObject([
      { domain: "b.test", state: "allowed", url: orgB.url },
    ]);

    const status = await acp("status", "--json");
    const view = JSON.parse(status.stdout);
    expect(view).toMatchObject({ domain: "a.test", policy: "allow-list", peers: [{ domain: "b.test" }] });
    expect(view.peers[0].link).toMatchObject({ queued: 0, forwarded: 0, last_error: null, lastError: null });
    expect(view.peers[0]).toMatchObject({ admitted_by: "admin", admittedBy: "admin" });
    expect(view.peers[0].pinned_keys).toEqual(view.peers[0].pinnedKeys);
    const text = await acp("status");
    expect(text.stdout).toContain("domain a.test (allow-list)");
    expect(text.stdout).toMatch(/b\.test\tallowed\tqueued 0/);
  });

  it("blocks, unblocks and removes a peer; refuses what is wrong, naming it", async () => {
    expect((await acp("block", "b.test")).stdout).toMatch(/^b\.test\tblocked/);
    expect((await acp("unblock", "b.test")).stdout).toMatch(/^b\.test\tallowed/);
    const noChange = await acp("accept-key", "b.test");
    expect(noChange.code).not.toBe(0);
    expect(noChange.stderr).toContain("no pending key change");
    const again = await acp("add", "b.test", "--url", orgB.url);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("already a peer");
    const bad = await acp("add", "B_TEST");
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("/domain");
    expect((await acp("remove", "b.test")).stdout).toBe("peer b.test removed\n");
    expect(JSON.parse((await acp("list", "--json")).stdout).peers).toEqual([]);
    const unknown = await acp("remove", "b.test");
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("not a peer");
  });
});
