/**
 * The dashboard in a real browser (Debian's chromium through playwright-core) against a real
 * gateway. With ACP_UPDATE_SCREENSHOTS=1 the main views are also saved to docs/img/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import type { FeedItem } from "../../src/extensions/dashboard/index.js";
import { HttpApprovalStore, Orchestrator, serveCommands } from "../../src/orchestration/index.js";
import { registerCustodial } from "../helpers/gateway.js";
import {
  aliceAsksBob,
  buildWeb,
  type Cast,
  dashboard,
  describeWithChromium,
  eventually,
  launchBrowser,
  principalToken,
  useCast,
} from "../helpers/dashboard.js";

const SCREENSHOTS =
  process.env.ACP_UPDATE_SCREENSHOTS === "1" ? join(process.cwd(), "docs", "img") : undefined;

async function shot(page: Page, name: string): Promise<void> {
  if (!SCREENSHOTS) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `dashboard-${name}.png`) });
}

async function signIn(page: Page, cast: Cast, token: string): Promise<void> {
  await page.goto(`${cast.gw.url}/`);
  await page.getByLabel("Principal token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Live feed" }).waitFor();
  await page.getByText("● live").waitFor();
}

describeWithChromium("the dashboard in a browser", () => {
  let browser: { context: BrowserContext; close(): Promise<void> };
  const cast = useCast();

  beforeAll(async () => {
    buildWeb();
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
  });

  const page = async () => {
    const p = await browser.context.newPage();
    // Well inside the test's own timeout, so a missing element fails with its locator named.
    p.setDefaultTimeout(10_000);
    // Nothing but the gateway itself: no CDN, no fonts, no telemetry.
    p.on("request", (request) => {
      if (!request.url().startsWith("http://127.0.0.1:") && !request.url().startsWith("data:"))
        throw new Error(`unexpected request to ${request.url()}`);
    });
    return p;
  };

  it("signs a principal in, shows a live message arriving, and opens its detail by keyboard", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const p = await page();
    await p.goto(`${c.gw.url}/`);
    await p.getByLabel("Principal token").fill("acppr_wrong");
    await p.getByRole("button", { name: "Sign in" }).click();
    await p.getByText("That token is unknown or revoked.").waitFor();
    await shot(p, "signin");

    await signIn(p, c, await principalToken(c.gw, "alice"));
    const rows = p.locator("ol.feed > li");
    await eventually(async () => (await rows.count()) === 6, "the six earlier messages are listed");

    await c.agents
      .get("bob-scheduler")!
      .notify("alice-scheduler", { status: "bob's Thursday afternoon is now busy" });
    const fresh = rows.first();
    await fresh.getByText("bob's Thursday afternoon is now busy").waitFor();
    expect(await rows.count()).toBe(7);
    await fresh.getByText("acknowledged").waitFor();
    await shot(p, "feed");

    // Keyboard: the row is a link; Enter opens the message.
    await fresh.locator("a").focus();
    await p.keyboard.press("Enter");
    await p.getByRole("heading", { name: "bob-scheduler → alice-scheduler" }).waitFor();
    await p.getByText("✓ Signature verified").waitFor();
    const steps = p.locator("ol.timeline > li.done .step-name");
    await eventually(
      async () => (await steps.allTextContents()).join(",") === "queued,delivered,acknowledged",
      "the timeline is complete",
    );
    await p.getByRole("rowheader", { name: "message-id" }).waitFor();
    await p
      .locator("table")
      .filter({ hasText: "Relay audit entries" })
      .getByText(/bob-scheduler\/\d{4}-\d{2}\.jsonl:\d+/)
      .waitFor();
    await shot(p, "message");

    await p.getByRole("link", { name: "Agents" }).click();
    await p.getByRole("heading", { name: "alice-scheduler" }).waitFor();
    await p.getByRole("rowheader", { name: "bob-scheduler" }).waitFor();
    await p.getByText("established").waitFor();
    // Presence is live: the agent reports itself busy, and the page follows without a reload.
    await c.agents.get("alice-scheduler")!.setPresence({ state: "busy", load: 42, activeTasks: 1 });
    await p.locator("article.agent .badge-busy").waitFor();
    await p.getByText("42%").waitFor();
    await shot(p, "agents");
    await p.close();
  });

  it("approves a pending command, which then completes; a denied one is refused", async () => {
    const c = await cast();
    const orchestratorId = await c.gw.register("alice-orchestrator", "alice");
    const client = await c.connect(orchestratorId);
    const bob = await c.connect(c.bob);
    const done: string[] = [];
    serveCommands(bob, (command) => {
      done.push(command.id);
      return { data: `invitation sent for ${String(command.parameters.slot)}` };
    });
    const orch = new Orchestrator({
      id: "alice-orchestrator",
      principal: "alice",
      audit: false,
      approvals: new HttpApprovalStore({ gateway: c.gw.url, credential: orchestratorId.apiKey }),
    });
    orch.addAgent({ id: "bob-scheduler", remote: client });
    const command = (slot: string) =>
      orch.command({
        to: "bob-scheduler",
        action: "EXECUTE",
        parameters: { slot, attendees: ["alice", "bob"] },
        security: { permissions: [], requireApproval: true },
      });
    const approvedRun = orch.send(command("2026-02-18T10:00:00Z"));

    const p = await page();
    await signIn(p, c, await principalToken(c.gw, "alice"));
    await p.locator("nav .count").getByText("1").waitFor();
    await p.getByRole("link", { name: /Approvals/ }).click();
    const card = p.locator("article.approval").first();
    await card.getByRole("heading", { name: "EXECUTE → bob-scheduler" }).waitFor();
    await card.getByText("Command parameters").click();
    await card.getByText("2026-02-18T10:00:00Z").waitFor();
    await card.getByLabel("Note").fill("go ahead");
    await shot(p, "approvals");
    await card.getByRole("button", { name: "Approve" }).click();
    await p.getByText("Nothing is waiting for your approval.").waitFor();

    const response = await approvedRun;
    expect(response).toMatchObject({
      status: "success",
      results: { data: "invitation sent for 2026-02-18T10:00:00Z" },
    });
    expect(done).toHaveLength(1);
    // The command's completion is on the feed: bob's signed response to the orchestrator.
    await p.getByRole("link", { name: "Live feed" }).click();
    const answer = p
      .locator("ol.feed > li")
      .filter({ hasText: "bob-scheduler → alice-orchestrator" })
      .filter({ hasText: "response" });
    await answer.first().waitFor();

    const deniedRun = orch.send(command("2026-02-19T14:00:00Z"));
    await p.getByRole("link", { name: /Approvals/ }).click();
    const second = p.locator("article.approval").first();
    await second.getByText("2026-02-19T14:00:00Z").waitFor({ state: "attached" });
    await second.getByRole("button", { name: "Deny" }).click();
    await p.getByText("Nothing is waiting for your approval.").waitFor();
    const denied = await deniedRun;
    expect(denied.status).toBe("failed");
    expect(denied.error?.message).toContain("was denied by principal:alice");
    expect(done).toHaveLength(1);
    await p.close();
  });

  it("a principal does not see another principal's agents or messages", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const aliceToken = await principalToken(c.gw, "alice");
    const request = ((await dashboard(c.gw, aliceToken, "/feed?type=request")).json.items as FeedItem[])[0]!;
    const p = await page();
    await signIn(p, c, await principalToken(c.gw, "carol"));
    await p.getByText("No exchanges in this window yet.").waitFor();
    await p.getByRole("link", { name: "Agents" }).click();
    await p.getByRole("heading", { name: "carol-agent" }).waitFor();
    expect(await p.locator("main").textContent()).not.toMatch(/alice-scheduler|bob-scheduler/);
    await p.goto(`${c.gw.url}/#/messages/${request.from.agent}/${request.id}`);
    await p.getByText(`There is no message ${request.id} you can see.`).waitFor();
    await p.close();
  });

  it("marks an agent whose keys the gateway holds (custodial)", async () => {
    const c = await cast();
    const registered = await registerCustodial(c.gw.url, "alice-helper", {
      principalId: "alice",
      adminToken: c.gw.adminToken,
    });
    expect(registered.status).toBe(201);
    const p = await page();
    await signIn(p, c, await principalToken(c.gw, "alice"));
    await p.getByRole("link", { name: "Agents" }).click();
    const card = p.locator("article.agent", { has: p.getByRole("heading", { name: "alice-helper" }) });
    await card.getByText("custodial: held by the gateway, which signs on the agent's behalf").waitFor();
    const own = p.locator("article.agent", { has: p.getByRole("heading", { name: "alice-scheduler" }) });
    await own.getByText("held by the agent (the gateway has only its public keys)").waitFor();
    await p.close();
  });

  it("draws a session's dependency graph and the message volume as pictures", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const session = await Session.create({ root: join(c.dir, "context"), projectType: "release" });
    await session.updateAgent("alice-scheduler", { status: "completed" });
    await session.updateAgent("security-review", { status: "completed", dependencies: ["alice-scheduler"] });
    await session.updateAgent("docs-writer", { status: "in_progress", dependencies: ["alice-scheduler"] });
    await session.updateAgent("release", {
      status: "waiting",
      dependencies: ["security-review", "docs-writer"],
    });
    await session.log({
      timestamp: new Date().toISOString(),
      from: "docs-writer",
      type: "status",
      message: "drafting the changelog",
    });

    const p = await page();
    await signIn(p, c, c.gw.adminToken);
    await p.getByRole("link", { name: "Sessions" }).click();
    await p.getByRole("link", { name: session.id.slice(0, 13) }).click();
    const graph = p.locator("svg.graph");
    await graph.waitFor();
    expect(await graph.locator("g.node").count()).toBe(4);
    expect(await graph.locator("path.edge").count()).toBe(4);
    expect(await graph.getAttribute("aria-label")).toContain(
      "release (waiting, after security-review, docs-writer)",
    );
    await p.getByText("drafting the changelog").waitFor();
    await shot(p, "session");

    await p.getByRole("link", { name: "Volume" }).click();
    const chart = p.locator("svg.chart");
    await chart.waitFor();
    expect(await chart.locator("rect.bar").count()).toBeGreaterThan(0);
    expect(await chart.getAttribute("aria-label")).toMatch(/^Message volume: 6 messages/);
    await shot(p, "volume");
    await p.close();
  });
});
