import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Command } from "commander";
import { summarize } from "../../audit/index.js";
import { AcpAgent, GatewayClient, PrincipalAdminClient } from "../../client/index.js";
import type { Gateway } from "../../gateway/index.js";
import { generateIdentity, type PrivateIdentity, publicIdentity } from "../../protocol/index.js";
import { registrationOf } from "../../wire/agents.js";
import { CliError, printLine } from "../io.js";
import type { DemoAgent } from "./demo-scenes.js";

interface DemoFlags {
  once?: boolean;
  port: string;
  data?: string;
}

/** The ACP core protocol's example: two scheduling assistants acting for different people. */
const CAST = [
  { agentId: "alice-scheduler", principalId: "alice", purpose: "Find a meeting time for alice and bob" },
  { agentId: "bob-scheduler", principalId: "bob", purpose: "Manage bob's calendar and answer availability" },
] as const;

const CAPABILITIES = {
  tools: ["calendar.read", "calendar.invite"],
  domains: ["scheduling"],
  limits: ["no access to meeting contents"],
  requests: ["availability", "invitations"],
};

export function registerDemo(program: Command): void {
  program
    .command("demo")
    .description(
      "start an embedded gateway and two scheduling agents that handshake, request, notify, hand off, ask for an approval, coordinate, negotiate, vote and hand off with escrow; print the transcript, then stay up",
    )
    .option("--once", "exit 0 after the transcript instead of staying up")
    .option("--port <port>", "gateway port (0 picks a free one)", "8080")
    .option("--data <dir>", "gateway data directory (default: a temporary one, removed on exit)")
    .action((flags: DemoFlags) => demo(flags));
}

async function demo(flags: DemoFlags): Promise<void> {
  const port = Number(flags.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new CliError(`--port must be 0-65535, not ${flags.port}`);
  const temporary = flags.data === undefined;
  const data = resolve(flags.data ?? mkdtempSync(join(tmpdir(), "acp-demo-")));
  const adminToken = `acpadm_${randomBytes(24).toString("base64url")}`;
  let gateway: Gateway;
  try {
    // Loaded here, not at CLI start-up: the gateway and its brokers are heavy and only the demo needs them.
    const [{ startDefaultGateway }, { default: pino }] = await Promise.all([
      import("../../server.js"),
      import("pino"),
    ]);
    gateway = await startDefaultGateway({
      port,
      data,
      adminToken,
      logger: pino({ level: "warn" }, pino.destination(2)),
      // The demo's coordination session lives with its data, where the dashboard looks for it.
      dashboard: { sessionsRoot: join(data, "context") },
    });
  } catch (err) {
    if (temporary) rmSync(data, { recursive: true, force: true });
    throw new CliError(`cannot start the gateway: ${(err as Error).message}`);
  }
  const agents: AcpAgent[] = [];
  let scenes: { stop(): Promise<void> } | undefined;
  const shutdown = async () => {
    await scenes?.stop();
    for (const agent of agents) await agent.close();
    await gateway.close();
    if (temporary) rmSync(data, { recursive: true, force: true });
  };
  try {
    printLine(`ACP demo: embedded gateway at ${gateway.url} (data ${data})`);
    const [alice, bob] = (await Promise.all(
      CAST.map((member) => startAgent(gateway.url, adminToken, data, member)),
    )) as [DemoAgent, DemoAgent];
    agents.push(alice.agent, bob.agent);
    await transcript(alice.agent, bob.agent);
    // Loaded on use, like the gateway: collaboration, orchestration and coordination.
    const { playScenes } = await import("./demo-scenes.js");
    scenes = await playScenes({
      url: gateway.url,
      adminToken,
      sessionsRoot: join(data, "context"),
      alice,
      bob,
    });
    const kept = !temporary || !flags.once;
    printLine(
      `\nEvery step is in the agents' audit logs${kept ? `: acp audit show --root ${join(data, "audit")}` : "."}`,
    );
  } catch (err) {
    await shutdown();
    throw err instanceof CliError ? err : new CliError(`the demo failed: ${(err as Error).message}`);
  }
  if (flags.once) {
    await shutdown();
    return;
  }
  printLine("");
  printLine(`Dashboard: ${gateway.url}/  (sign in with the admin token ${adminToken})`);
  for (const [principal, token] of await principalTokens(gateway.url, adminToken)) {
    const approval = principal === "alice" ? "; alice's approval waits on the Approvals page" : "";
    printLine(`  or as principal ${principal} (its own agents only${approval}): ${token}`);
  }
  printLine(
    `The gateway and both agents stay up at ${gateway.url}, talking every few seconds (Ctrl-C to stop).`,
  );
  printLine("To add your own agent:");
  printLine(`  acp keygen --agent-id my-agent --principal-id me --out my-agent.key`);
  printLine(`  ACP_ADMIN_TOKEN=${adminToken} acp agent register --gateway ${gateway.url} --key my-agent.key`);
  printLine(
    `  acp send --gateway ${gateway.url} --key my-agent.key --api-key <key> --to bob-scheduler --body '{"action":"get-availability"}'`,
  );
  const chatter = keepTalking(agents[0]!, agents[1]!);
  await new Promise<void>((done) => {
    process.once("SIGINT", done);
    process.once("SIGTERM", done);
  });
  clearInterval(chatter);
  await shutdown();
}

/** Registers the agent (or reuses its saved identity and key in a kept data dir) and connects it. */
async function startAgent(
  url: string,
  adminToken: string,
  data: string,
  member: (typeof CAST)[number],
): Promise<DemoAgent> {
  const saved = join(data, "demo", `${member.agentId}.json`);
  let credentials: { identity: PrivateIdentity; apiKey: string };
  try {
    credentials = JSON.parse(readFileSync(saved, "utf8")) as typeof credentials;
  } catch {
    const identity = generateIdentity(member.agentId, member.principalId);
    const { api_key: apiKey } = await new GatewayClient({ gateway: url, adminToken }).registerAgent({
      ...registrationOf(publicIdentity(identity)),
      capabilities: CAPABILITIES.tools,
    });
    credentials = { identity, apiKey };
    mkdirSync(join(data, "demo"), { recursive: true, mode: 0o700 });
    writeFileSync(saved, JSON.stringify(credentials), { mode: 0o600 });
  }
  const agent = new AcpAgent({
    gateway: url,
    ...credentials,
    layers: [0, 1, 2],
    announce: { capabilities: ["calendar-management"], purpose: member.purpose },
    capabilities: CAPABILITIES,
    trust: {
      sharedContextPrincipals: CAST.map((c) => c.principalId).filter((p) => p !== member.principalId),
    },
    audit: { root: join(data, "audit") },
    state: { root: join(data, "state") },
  });
  agent.on("error", (err) => process.stderr.write(`${member.agentId}: ${err.message}\n`));
  await agent.connect();
  return { agent, ...credentials };
}

/** A dashboard token for each principal of the cast (none when an earlier run made them already). */
async function principalTokens(gateway: string, adminToken: string): Promise<[string, string][]> {
  const admin = new PrincipalAdminClient({ gateway, adminToken });
  const tokens: [string, string][] = [];
  for (const principal of CAST.map((c) => c.principalId)) {
    const added = await admin.add(principal).catch(() => undefined);
    if (added) tokens.push([principal, added.token]);
  }
  return tokens;
}

async function transcript(alice: AcpAgent, bob: AcpAgent): Promise<void> {
  for (const agent of [alice, bob]) {
    agent.on("message", (m) =>
      printLine(`  ${m.from} → ${agent.agentId}  ${m.method}: ${summarize(m.envelope)}`),
    );
    agent.on("handshake", (e) => {
      if (e.step === "verify") printLine(`  ${agent.agentId} verified ${e.peer}'s Ed25519 signature`);
    });
  }
  bob.onRequest("agent.request", (body) => ({
    available_slots: ["2026-02-18T10:00:00Z", "2026-02-19T14:00:00Z", "2026-02-20T09:00:00Z"],
    for: body.parameters ?? {},
  }));
  const noticed = new Promise<void>((done) => alice.onNotification(() => done()));
  bob.onHandoff((handoff) => ({ accepted: true, next: `bob-scheduler will ${String(handoff.remaining)}` }));

  printLine("\n1. Handshake (announce, verify, capabilities, trust)");
  if (alice.handshakeState("bob-scheduler") === "established") {
    printLine("  already completed in an earlier run with this data directory (kept across restarts)");
  }
  await alice.handshake("bob-scheduler");
  await until(() => bob.handshakeState("alice-scheduler") === "established");
  for (const [me, peer] of [
    [alice, "bob-scheduler"],
    [bob, "alice-scheduler"],
  ] as const) {
    const trust = me.trust(peer);
    printLine(`  ${me.agentId} trusts ${peer}: ${trust?.level} (score ${trust?.score})`);
  }

  printLine("\n2. Request and response");
  const slots = await alice.request(
    "bob-scheduler",
    { action: "get-availability", parameters: { date_range: "2026-02-17/2026-02-21", duration_minutes: 60 } },
    { summary: "Asked bob's assistant for free hour-long slots next week" },
  );
  printLine(`  alice-scheduler got ${(slots.available_slots as string[]).length} slots`);

  printLine("\n3. Notification");
  await bob.notify("alice-scheduler", { status: "bob's calendar changed: Thursday afternoon is now busy" });
  await noticed;

  printLine("\n4. Handoff");
  const answer = await alice.handoff("bob-scheduler", {
    completed: ["agreed on 2026-02-18T10:00:00Z with alice"],
    remaining: "send the calendar invitation to bob",
    context: { slot: "2026-02-18T10:00:00Z", duration_minutes: 60, attendees: ["alice", "bob"] },
  });
  printLine(`  handoff ${answer.accepted ? "accepted" : "declined"}: ${String(answer.next)}`);
}

/** Keeps the two agents exchanging, so the dashboard's live feed has something to show. */
function keepTalking(alice: AcpAgent, bob: AcpAgent): NodeJS.Timeout {
  let round = 0;
  return setInterval(() => {
    round++;
    const exchange =
      round % 2 === 1
        ? alice.request("bob-scheduler", { action: "get-availability", parameters: { week: round } })
        : bob.notify("alice-scheduler", { status: `bob's calendar updated (change ${round})` });
    exchange.catch((err: Error) => process.stderr.write(`demo exchange failed: ${err.message}\n`));
  }, 4000);
}

async function until(predicate: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !predicate(); i++) await new Promise((r) => setTimeout(r, 25));
}
