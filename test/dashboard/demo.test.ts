/**
 * A new user's first run: `acp demo` (the real binary), then every page of the dashboard in
 * Debian's chromium. Each page must show what the demo's agents did, with no console errors.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CLI_PATH } from "../helpers/cli.js";
import { buildWeb, describeWithChromium, eventually, launchBrowser } from "../helpers/dashboard.js";
import { useTmpDir } from "../helpers/tmp.js";

interface RunningDemo {
  url: string;
  adminToken: string;
  output: () => string;
  stop(): Promise<number | null>;
}

/** Starts `acp demo` and resolves once it printed the dashboard's address and stays up. */
async function startDemo(dir: string): Promise<RunningDemo> {
  const child: ChildProcess = spawn(
    process.execPath,
    [CLI_PATH, "demo", "--port", "0", "--data", join(dir, "data")],
    { cwd: dir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ACP_ADMIN_TOKEN: "" } },
  );
  let out = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    out += d;
  });
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  await eventually(() => /stay up at/.test(out) || child.exitCode !== null, "the demo is up", 90_000);
  const found = /Dashboard: (\S+)\/ {2}\(sign in with the admin token (\S+)\)/.exec(out);
  if (!found) throw new Error(`the demo did not come up:\n${out}`);
  return {
    url: found[1] as string,
    adminToken: found[2] as string,
    output: () => out,
    stop: async () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

describeWithChromium("acp demo fills every page of the dashboard", () => {
  let browser: { context: BrowserContext; close(): Promise<void> };
  let demo: RunningDemo;
  const dir = useTmpDir("acp-demo-e2e-", "suite")();

  beforeAll(async () => {
    buildWeb();
    [browser, demo] = await Promise.all([launchBrowser(), startDemo(dir)]);
  }, 150_000);
  afterAll(async () => {
    await browser?.close();
    const code = await demo?.stop();
    expect(code, demo?.output()).toBe(0);
  });

  it("shows the demo's exchanges, agents, approval, session, handoff, negotiation, vote and volume", async () => {
    const page: Page = await browser.context.newPage();
    page.setDefaultTimeout(15_000);
    const problems: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(`console: ${message.text()}`);
    });
    page.on("pageerror", (err) => problems.push(`page: ${err.message}`));

    await page.goto(`${demo.url}/`);
    await page.getByLabel("Principal token").fill(demo.adminToken);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Live feed" }).waitFor();

    /** Opens a page from the navigation, then waits until it shows at least one of `selector`. */
    const visit = async (link: RegExp, heading: string, selector: string, text?: string) => {
      await page.getByRole("navigation", { name: "Views" }).getByRole("link", { name: link }).click();
      await page.getByRole("heading", { name: heading, exact: true }).waitFor();
      const items = page.locator(`main ${selector}`);
      await items.first().waitFor();
      if (text) await page.locator("main").getByText(text).first().waitFor();
      const shown = (await page.locator("main").textContent()) ?? "";
      expect(shown, heading).not.toMatch(/Nothing yet|could not be loaded|No exchanges in this window/);
      return items.count();
    };

    expect(await visit(/^Live feed$/, "Live feed", "ol.feed > li")).toBeGreaterThan(10);
    expect(await visit(/^Agents$/, "Agents", "article.agent")).toBeGreaterThanOrEqual(2);
    await visit(/^Approvals/, "Approvals", "article.approval", "EXECUTE → bob-scheduler");
    await visit(/^Sessions$/, "Coordination sessions", "tbody tr");
    await page.locator("main tbody tr a").first().click();
    const graph = page.locator("svg.graph");
    await graph.waitFor();
    expect(await graph.locator("g.node").count()).toBe(2);
    expect(await graph.locator("path.edge").count()).toBe(1);
    await visit(/^Handoffs$/, "Handoffs", "article.panel-item", "40 credits in escrow");
    await visit(/^Negotiations$/, "Negotiations", "article.panel-item", "both signatures verify");
    await visit(/^Votes$/, "Votes", "article.panel-item", "yes: 2");
    await visit(/^Volume$/, "Message volume", "svg.chart rect.bar");

    expect(problems).toEqual([]);
    await page.close();
  });
});
