/**
 * The demo's second part: the two scheduling agents also use everything the dashboard shows, so
 * each of its pages has something on it after `acp demo` — a human approval left pending, a
 * coordination session with a dependency, a negotiation ending in an agreement both signed, a vote
 * and its announced result, and a task handed over with credits in escrow.
 */
import { join } from "node:path";
import type { AcpAgent } from "../../client/index.js";
import { CollabClient } from "../../client/collab.js";
import { requestGatewayJson } from "../../client/request.js";
import { verifyAgreement } from "../../collab/agreement.js";
import { Session } from "../../coordination/index.js";
import {
  type ApprovalRecord,
  HttpApprovalStore,
  Orchestrator,
  serveCommands,
} from "../../orchestration/index.js";
import type { PrivateIdentity } from "../../protocol/index.js";
import { printLine } from "../io.js";

/** One of the demo's agents: connected, with the identity and API key it was registered with. */
export interface DemoAgent {
  agent: AcpAgent;
  identity: PrivateIdentity;
  apiKey: string;
}

export interface DemoStage {
  url: string;
  adminToken: string;
  /** Where the dashboard reads coordination sessions from (its `sessionsRoot`). */
  sessionsRoot: string;
  alice: DemoAgent;
  bob: DemoAgent;
}

/** What keeps running after the scenes: a command waiting for a person's approval. */
export interface DemoScenes {
  /** Withdraws the pending approval's command (the demo is stopping). */
  stop(): Promise<void>;
}

export async function playScenes(stage: DemoStage): Promise<DemoScenes> {
  const collab = {
    alice: collabOf(stage.alice),
    bob: collabOf(stage.bob),
  };
  printLine("\n5. Human approval");
  const waiting = await approval(stage);
  printLine("\n6. Coordination session");
  await session(stage);
  printLine("\n7. Negotiation");
  await negotiation(collab.alice, collab.bob);
  printLine("\n8. Team vote");
  await vote(collab.alice, collab.bob);
  printLine("\n9. Handoff with escrow");
  await handoff(stage, collab.alice, collab.bob);
  return waiting;
}

function collabOf(member: DemoAgent): CollabClient {
  return new CollabClient({
    agent: member.agent,
    identity: member.identity,
    apiKey: member.apiKey,
    layers: [0, 1, 2],
  });
}

/** A command of alice's that needs her approval; bob runs it once she approves on the dashboard. */
async function approval(stage: DemoStage): Promise<DemoScenes> {
  serveCommands(stage.bob.agent, (command) => ({
    data: `bob-scheduler booked room ${String(command.parameters.room)}`,
  }));
  const orchestrator = new Orchestrator({
    id: "alice-scheduler",
    principal: "alice",
    audit: false,
    approvals: new HttpApprovalStore({ gateway: stage.url, credential: stage.alice.apiKey }),
  });
  orchestrator.addAgent({ id: "bob-scheduler", remote: stage.alice.agent });
  const abort = new AbortController();
  const asked = new Promise<ApprovalRecord>((resolve, reject) => {
    const run = orchestrator.send(
      orchestrator.command({
        to: "bob-scheduler",
        action: "EXECUTE",
        priority: "high",
        parameters: { room: "B2", slot: "2026-02-18T10:00:00Z" },
        security: { permissions: [], requireApproval: true },
      }),
      { signal: abort.signal, onApproval: resolve },
    );
    run.then((response) => {
      if (response.status === "success") printLine(`  approved: ${String(response.results.data)}`);
    }, reject);
  });
  const pending = await asked;
  printLine(`  alice-scheduler asks alice to approve booking room B2 (approval ${pending.id})`);
  printLine("  it waits on the dashboard's Approvals page, or: acp approvals approve ID --principal-token …");
  return {
    stop: async () => {
      abort.abort();
    },
  };
}

/** A file-based coordination session: alice's part done, bob's waiting on it. */
async function session(stage: DemoStage): Promise<void> {
  const run = await Session.create({ root: stage.sessionsRoot, projectType: "meeting" });
  await run.updateAgent("alice-scheduler", { status: "completed" });
  await run.updateAgent("bob-scheduler", { status: "in_progress", dependencies: ["alice-scheduler"] });
  await run.log({
    timestamp: new Date().toISOString(),
    from: "bob-scheduler",
    type: "status",
    message: "sending the invitations now that the slot is agreed",
  });
  printLine(
    `  session ${run.id}: bob-scheduler depends on alice-scheduler (${join(stage.sessionsRoot, run.id)})`,
  );
}

/** alice offers 60 for the room, bob asks 100, alice meets him at 90, bob accepts: both sign. */
async function negotiation(alice: CollabClient, bob: CollabClient): Promise<void> {
  bob.negotiations.onProposal((turn) =>
    Number(turn.offer.price) >= 90 ? { accept: true } : { counter: { ...turn.offer, price: 100 } },
  );
  const final = await alice.negotiations.negotiate(
    "bob-scheduler",
    { price: 60, room: "B2", hours: 2 },
    (turn) => ({ counter: { ...turn.offer, price: 90 } }),
    { subject: "Meeting room B2" },
  );
  const agreement = await alice.negotiations.agreement(final.sessionId);
  const check = verifyAgreement(agreement);
  printLine(
    `  ${final.status} after ${final.round} rounds; the agreement is signed by ${check.valid ? check.signedBy.join(" and ") : "nobody valid"}`,
  );
}

/** A team of the two agents votes; the result is announced once the vote closes. */
async function vote(alice: CollabClient, bob: CollabClient): Promise<void> {
  const { teamId } = await alice.teams.create(`planning-${Date.now().toString(36)}`, "Meeting planning", [
    "bob-scheduler",
  ]);
  const closesAt = new Date(Date.now() + 2_000);
  const opened = await alice.teams.openVote({
    teamId,
    channel: "decisions",
    question: "Ship the invitations on Friday?",
    options: ["yes", "no"],
    rule: { type: "majority" },
    closesAt,
  });
  await alice.teams.vote(opened.voteId, "yes");
  await bob.teams.vote(opened.voteId, "yes");
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, closesAt.getTime() - Date.now()) + 100));
  const announced = await alice.teams.announce(opened.voteId);
  const result = announced.announced?.result;
  printLine(
    `  ${result?.reason ?? "announced"} (${Object.entries(result?.tally ?? {})
      .map(([o, n]) => `${o} ${n}`)
      .join(", ")})`,
  );
}

/** alice hands bob a task with 40 of her credits in escrow; bob accepts and reports progress. */
async function handoff(stage: DemoStage, alice: CollabClient, bob: CollabClient): Promise<void> {
  await requestGatewayJson(stage.url, "POST", "/api/v1/ledger/grants", {
    headers: { authorization: `Bearer ${stage.adminToken}` },
    body: { agent_id: "alice-scheduler", amount: 100, note: "demo budget" },
  });
  bob.onHandoffOffer(() => "accept");
  const offered = await alice.handoffs.offer(
    "bob-scheduler",
    {
      completed: ["booked room B2 for 2026-02-18T10:00:00Z"],
      remaining: "send the invitations and collect the answers",
      context: { room: "B2", slot: "2026-02-18T10:00:00Z", attendees: ["alice", "bob"] },
    },
    { title: "Send the invitations", escrow: 40 },
  );
  let current = await alice.handoffs.get(offered.handoffId);
  for (let i = 0; i < 200 && current.status === "offered"; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    current = await alice.handoffs.get(offered.handoffId);
  }
  await bob.handoffs.progress(offered.handoffId, 50, "invitations sent, waiting for answers");
  printLine(
    `  handoff "${offered.title}" ${current.status}: ${offered.escrow} credits ${current.escrowState} in escrow, 50% done`,
  );
}
