/**
 * The admin's federation view in a real browser (Debian's chromium through playwright-core): each
 * peer with its domain and its link's health, and a peer's pending key change, accepted from the
 * page. Two federating gateways on 127.0.0.1 with TLS between them (test/helpers/federation.ts).
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildWeb, describeWithChromium, launchBrowser, principalToken } from "../helpers/dashboard.js";
import {
  type FederatedGateway,
  handshakenAgents,
  peerQueueDrained,
  startFederatedGateway,
  useOrganizations,
} from "../helpers/federation.js";
import { ADMIN_TOKEN } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

const { org, defer, linkedPair } = useOrganizations();

describeWithChromium("the dashboard's federation view", () => {
  let browser: { context: BrowserContext; close(): Promise<void> };

  beforeAll(async () => {
    buildWeb();
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
  });

  async function federationPage(gw: FederatedGateway): Promise<Page> {
    const p = await browser.context.newPage();
    p.setDefaultTimeout(15_000);
    defer(() => p.close());
    await p.goto(`${gw.url}/`);
    await p.getByLabel("Principal token").fill(ADMIN_TOKEN);
    await p.getByRole("button", { name: "Sign in" }).click();
    await p.getByRole("heading", { name: "Live feed" }).waitFor();
    await p.getByRole("link", { name: "Federation" }).click();
    await p.getByRole("heading", { name: "Federation" }).waitFor();
    return p;
  }

  it("shows each peer's link (queue, oldest queued, last contact, refusals) and accepts a pending key change", async () => {
    const pair = await linkedPair();
    const { orgB, a } = pair;
    let { b } = pair;
    const { alpha, betaReg } = await handshakenAgents(pair);
    // What the handshake itself sent (its last steps, the capabilities) has left a.test's queue.
    await peerQueueDrained(a, "b.test");

    // b.test goes down: alpha's notifications wait in a.test's queue for it.
    await b.close();
    for (const n of [1, 2]) await alpha.notify("beta@b.test", { n });
    const p = await federationPage(a);
    await p.getByText("This gateway is").getByText("a.test").waitFor();
    const peerB = p.locator('article.peer[data-domain="b.test"]');
    await peerB.getByRole("heading", { name: "b.test" }).waitFor();
    await peerB.locator('[data-field="queued"]', { hasText: /^2$/ }).waitFor();
    await peerB.locator('[data-field="oldest"]', { hasText: /old$/ }).waitFor();
    await peerB.locator('[data-field="last-contact"] time').waitFor();
    await peerB.locator(".badge-failed", { hasText: "unreachable" }).waitFor();
    await peerB.locator('[data-field="last-error"]').waitFor();

    // b.test comes back with another federation key (its key file lost, or b.test taken over):
    // a.test holds it as a pending key change and keeps alpha's messages queued.
    rmSync(join(orgB.dir, "data", "federation", "gateway-key.json"));
    b = await pair.startAgain("b");
    const beta = await b.connect(betaReg);
    const got: number[] = [];
    beta.onNotification((body) => {
      got.push(body.n as number);
    });
    const pending = peerB.getByRole("region", { name: "Pending key change of b.test" });
    await pending.waitFor();
    await pending.getByText("acp federation accept-key b.test").waitFor();
    await peerB.locator(".badge-warning", { hasText: "key change pending" }).waitFor();
    await until(
      async () => (await peerB.locator('[data-field="refusals"]').textContent()) ?? "",
      (text) => text !== "none",
      "a.test's page shows b.test's refused traffic",
    );
    expect(await peerB.locator('[data-field="queued"]').textContent()).toBe("2");
    expect(got).toEqual([]);

    const accept = pending.getByRole("button", { name: "Accept b.test's new key" });
    expect(await accept.isDisabled()).toBe(true);
    await pending.getByLabel("I checked the new key with b.test").check();
    await accept.click();
    await pending.waitFor({ state: "detached" });
    await peerB.locator(".badge-warning").waitFor({ state: "detached" });

    // With the key accepted, the queue drains to beta and the page shows it empty.
    await until(
      () => got,
      (g) => g.length === 2,
      "beta gets alpha's two notifications",
    );
    await peerB.locator('[data-field="queued"]', { hasText: /^0$/ }).waitFor();
    expect(got).toEqual([1, 2]);
  });

  it("is offered to the admin only: a principal's page has no federation view", async () => {
    const a = await startFederatedGateway(await org("a.test"), []);
    defer(() => a.close());
    const admin = await federationPage(a);
    await admin.getByText("No peer yet").waitFor();

    const p = await browser.context.newPage();
    defer(() => p.close());
    await p.goto(`${a.url}/`); // a new tab: its own session storage, so a sign-in page
    await p.getByLabel("Principal token").fill(await principalToken(a, "alice"));
    await p.getByRole("button", { name: "Sign in" }).click();
    await p.getByRole("heading", { name: "Live feed" }).waitFor();
    await p.getByText("● live").waitFor();
    expect(await p.getByRole("link", { name: "Federation" }).isVisible()).toBe(false);
  });
});
