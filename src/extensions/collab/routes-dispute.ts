import { restRecord } from "../../wire/deprecated-names.js";
import type { Dispute, TeamsRecord } from "../../collab/contracts.js";
import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { authenticateAgent } from "../../gateway/context.js";
import { type Router, readJsonBody, sendJson } from "../../http/server.js";
import { HANDOFF_KEY, type HandoffRecord } from "../../collab/handoff.js";
import { CollabMethod, DisputeOpenBody } from "../../collab/messages.js";
import { auditParty, type CollabServices } from "./services.js";
import { ballotsOf, bucketOf, listValues, mutate } from "./store.js";
import { checkFanout, relayAll } from "./teams.js";
import {
  canonicalHash,
  conflict,
  forbidden,
  notFound,
  parseOrThrow,
  requireOwnId,
} from "../../collab/util.js";
import { type Ballot, tallyVote, VOTE_KEY, type Vote } from "../../collab/votes.js";

type Viewer =
  | { kind: "admin" }
  | { kind: "principal"; principalId: string }
  | { kind: "agent"; agentId: string };

const Resolve = z.strictObject({ resolution: z.string().min(1).max(8000) });
const BASE = "/api/v1/disputes";

/** Disputes: opened by an agent involved, read and resolved by the principals they were escalated to. */
export function disputeRoutes(router: Pick<Router, "add">, services: CollabServices): void {
  const { ctx, intake, audit } = services;
  const disputes = bucketOf<Dispute>(ctx.broker, "disputes");
  const handoffs = bucketOf<HandoffRecord>(ctx.broker, "handoffs");
  const votes = bucketOf<Vote | Ballot>(ctx.broker, "votes");
  const teams = bucketOf<TeamsRecord>(ctx.broker, "teams");

  /** Agents (API key), principals (principal token) and the admin may read disputes. */
  const viewerOf = async (req: IncomingMessage): Promise<Viewer> => {
    const caller = await ctx.credentials.resolve(req, ["agent", "principal", "admin"]);
    return caller.kind === "agent" ? { kind: "agent", agentId: caller.agent.record.agentId } : caller;
  };
  const sees = (viewer: Viewer, d: Dispute) =>
    viewer.kind === "admin" ||
    (viewer.kind === "principal" && d.escalatedTo.includes(viewer.principalId)) ||
    (viewer.kind === "agent" && d.parties.includes(viewer.agentId));

  /** Who is involved in the subject, and its record as evidence. */
  const subjectOf = async (kind: "handoff" | "vote", id: string) => {
    if (kind === "handoff") {
      const record = (await handoffs.get(HANDOFF_KEY(id)))?.value;
      if (!record) throw notFound("handoff", id);
      return { parties: [record.delegator, record.delegate], snapshot: { handoff: record } };
    }
    const vote = (await votes.get(VOTE_KEY(id)))?.value as Vote | undefined;
    if (!vote) throw notFound("vote", id);
    const ballots = await ballotsOf(votes, id);
    const team = (await teams.get(`t.${vote.teamId}`))?.value as { members?: string[] } | undefined;
    const parties = [...new Set([...vote.electorate, vote.createdBy, ...(team?.members ?? [])])];
    return { parties, snapshot: { vote, ballots, tally: tallyVote(vote, ballots) } };
  };

  router.add("POST", BASE, async (req, res) => {
    const caller = await authenticateAgent(ctx, req);
    const actions = await intake.readMany(req, caller, {
      method: CollabMethod.disputeOpen,
      body: DisputeOpenBody,
      to: "any",
    });
    const first = actions[0] as (typeof actions)[number];
    const body = first.body;
    const me = caller.record.agentId;
    requireOwnId(body.disputeId, me, "/envelopes/0/params/body/disputeId", "dispute");
    const { parties, snapshot } = await subjectOf(body.subject.kind, body.subject.id);
    // Only those involved open disputes; to anyone else the subject reads as not existing.
    if (!parties.includes(me)) throw notFound(body.subject.kind, body.subject.id);
    checkFanout(
      actions,
      { name: `the parties of ${body.subject.kind} ${body.subject.id}`, members: parties },
      me,
    );
    const records = await Promise.all(parties.map((p) => ctx.registry.get(p)));
    const escalatedTo = [...new Set(records.flatMap((r) => (r ? [r.principalId] : [])))].sort();
    if (await disputes.get(`d.${body.disputeId}`)) throw conflict(`dispute ${body.disputeId} already exists`);
    const outcome = await relayAll(services, caller, actions);
    const dispute: Dispute = {
      disputeId: body.disputeId,
      subject: body.subject,
      openedBy: me,
      parties: parties.sort(),
      escalatedTo,
      statement: body.statement,
      evidence: { fromOpener: body.evidence, snapshot, snapshotHash: canonicalHash(snapshot) },
      status: "open",
      openedAt: services.now().toISOString(),
      messageId: first.headers["message-id"],
      envelope: first.message,
      ...outcome,
    };
    await mutate(disputes, `d.${dispute.disputeId}`, (current) => {
      if (current) throw conflict(`dispute ${dispute.disputeId} already exists`);
      return dispute;
    });
    audit.record({
      method: CollabMethod.disputeOpen,
      from: auditParty(caller.record),
      to: {
        agent: parties.filter((p) => p !== me).join(",") || me,
        principal: escalatedTo.join(",") || null,
      },
      id: dispute.disputeId,
      messageId: dispute.messageId,
      summary: `${me} opened dispute ${dispute.disputeId} about ${body.subject.kind} ${body.subject.id}, escalated to ${escalatedTo.join(", ")}.`,
    });
    sendJson(res, 201, restRecord(dispute));
  });

  router.add("GET", BASE, async (req, res, _params, url) => {
    const viewer = await viewerOf(req);
    const status = url.searchParams.get("status");
    const all = await listValues(disputes, "d.");
    sendJson(
      res,
      200,
      restRecord({
        disputes: all.filter((d) => sees(viewer, d) && (status === null || d.status === status)),
      }),
    );
  });

  router.add("GET", `${BASE}/:dispute_id`, async (req, res, params) => {
    const viewer = await viewerOf(req);
    const dispute = (await disputes.get(`d.${params.dispute_id}`))?.value;
    if (!dispute || !sees(viewer, dispute)) throw notFound("dispute", params.dispute_id as string);
    sendJson(res, 200, restRecord(dispute));
  });

  router.add("POST", `${BASE}/:dispute_id/resolve`, async (req, res, params) => {
    const viewer = await viewerOf(req);
    const disputeId = params.dispute_id as string;
    if (viewer.kind === "agent")
      throw forbidden("disputes are resolved by the principals they were escalated to, not by agents");
    const { resolution } = parseOrThrow(Resolve, await readJsonBody(req, 64 * 1024), "resolution");
    const by = viewer.kind === "admin" ? "admin" : `principal:${viewer.principalId}`;
    const { value } = await mutate(disputes, `d.${disputeId}`, (current) => {
      if (!current || !sees(viewer, current)) throw notFound("dispute", disputeId);
      if (current.status === "resolved")
        throw conflict(`dispute ${disputeId} was resolved by ${current.resolution?.by}`);
      const resolved: Dispute = {
        ...current,
        status: "resolved",
        resolution: { by, at: services.now().toISOString(), text: resolution },
      };
      return resolved;
    });
    audit.record({
      method: "collab.dispute.resolve",
      from: { agent: by, principal: viewer.kind === "principal" ? viewer.principalId : null },
      to: { agent: value.parties.join(","), principal: value.escalatedTo.join(",") || null },
      id: disputeId,
      summary: `${by} resolved dispute ${disputeId}: ${resolution}`,
    });
    sendJson(res, 200, restRecord(value));
  });
}
