import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAcp } from "../../helpers/cli.js";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../../helpers/gateway.js";

describe("acp agent register --custodial (built CLI)", () => {
  let gw: TestGateway;
  beforeEach(async () => {
    gw = await startTestGateway();
  });
  afterEach(() => gw.close());

  const acp = (...args: string[]) =>
    runAcp([...args, "--gateway", gw.url], { env: { ACP_ADMIN_TOKEN: ADMIN_TOKEN, ACP_KEY: "" } });

  it("registers an agent whose keys the gateway holds, prints only its API key, and shows it as custodial", async () => {
    const out = await acp("agent", "register", "--custodial", "--agent-id", "helper", "--principal", "alice");
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    const [first, label, apiKey] = out.stdout.trim().split("\n");
    expect(first).toBe(
      `registered helper (principal alice) at ${gw.url}; the gateway holds its keys and signs on its behalf`,
    );
    expect(label).toMatch(/^API key/);
    expect(apiKey).toMatch(/^acp_/);
    const shown = await runAcp([
      "agent",
      "show",
      "helper",
      "--gateway",
      gw.url,
      "--api-key",
      apiKey as string,
    ]);
    expect(shown.stdout).toMatch(
      /signing key {4}helper#\S+ \(custodial: held by the gateway, which signs for the agent\)/,
    );
  });

  it("names what is missing or contradictory", async () => {
    const missing = await acp("agent", "register", "--custodial", "--agent-id", "helper");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("--custodial needs --agent-id ID and --principal ID");
    const both = await acp(
      "agent",
      "register",
      "--custodial",
      "--agent-id",
      "h",
      "--principal",
      "p",
      "--key",
      "x.json",
    );
    expect(both.code).toBe(1);
    expect(both.stderr).toContain(
      "--custodial registers an agent whose keys the gateway generates: leave out --key",
    );
  });
});
