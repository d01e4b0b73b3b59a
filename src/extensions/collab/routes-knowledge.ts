import { restRecord } from "../../wire/deprecated-names.js";
import { isBrokerError } from "../../broker/errors.js";
import type { KnowledgeEntry, TeamsRecord } from "../../collab/contracts.js";
import { authenticateAgent } from "../../gateway/context.js";
import { type Router, sendJson } from "../../http/server.js";
import { AcpError } from "../../protocol/index.js";
import { ENTRY_KEY } from "./knowledge-index.js";
import { CollabMethod, KnowledgePublishBody, KnowledgeUseBody } from "../../collab/messages.js";
import { auditParty, type CollabServices, readerOf } from "./services.js";
import { bucketOf, mutate } from "./store.js";
import { loadTeam, memberTeam } from "./teams.js";
import { conflict, notFound, requireOwnId } from "../../collab/util.js";

interface Points {
  agentId: string;
  points: number;
}
interface Use {
  entryId: string;
  user: string;
  at: string;
  messageId: string;
}

/** Team knowledge: publish, search (FTS5), and reward points when another agent uses an entry. */
export function knowledgeRoutes(router: Pick<Router, "add">, services: CollabServices): void {
  const { ctx, intake, audit, knowledge } = services;
  const bucket = bucketOf<KnowledgeEntry | Points | Use>(ctx.broker, "knowledge");
  const teams = bucketOf<TeamsRecord>(ctx.broker, "teams");

  router.add("POST", "/api/v1/teams/:team_id/knowledge", async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const teamId = params.team_id as string;
    const action = await intake.readOne(req, caller, {
      method: CollabMethod.knowledgePublish,
      body: KnowledgePublishBody,
      to: "self",
    });
    if (action.body.teamId !== teamId) {
      throw new AcpError("InvalidParams", `the entry is for team ${action.body.teamId}, not ${teamId}`, {
        problems: [{ path: "/params/body/teamId", message: `must be ${teamId}` }],
      });
    }
    requireOwnId(action.body.entryId, caller.record.agentId, "/params/body/entryId", "knowledge entry");
    await memberTeam(teams, teamId, caller.record.agentId);
    const entry: KnowledgeEntry = {
      ...action.body,
      tags: [...new Set(action.body.tags)],
      author: caller.record.agentId,
      authorPrincipal: caller.record.principalId,
      createdAt: services.now().toISOString(),
      messageId: action.headers["message-id"],
      envelope: action.message,
      uses: 0,
    };
    await mutate(bucket, ENTRY_KEY(entry.entryId), (current) => {
      if (current) throw conflict(`knowledge entry ${entry.entryId} already exists`);
      return entry;
    });
    knowledge.upsert(entry);
    audit.record({
      method: CollabMethod.knowledgePublish,
      from: auditParty(caller.record),
      to: { agent: `team:${teamId}`, principal: null },
      id: entry.entryId,
      messageId: entry.messageId,
      summary: `${entry.author} published "${entry.title}" to the knowledge of ${teamId}.`,
    });
    const { envelope: _signed, ...view } = entry;
    sendJson(res, 201, restRecord(view));
  });

  router.add("GET", "/api/v1/teams/:team_id/knowledge", async (req, res, params, url) => {
    const reader = await readerOf(ctx, req);
    const teamId = params.team_id as string;
    if (reader.kind === "agent") await memberTeam(teams, teamId, reader.agentId);
    else await loadTeam(teams, teamId);
    const tag = url.searchParams.get("tag");
    const limit = Number(url.searchParams.get("limit") ?? 20) || 20;
    const query = url.searchParams.get("q") ?? "";
    sendJson(
      res,
      200,
      restRecord({
        teamId,
        query,
        results: knowledge.search(teamId, query, { limit, ...(tag ? { tag } : {}) }),
      }),
    );
  });

  router.add("GET", "/api/v1/knowledge/points/:agent_id", async (req, res, params) => {
    await readerOf(ctx, req);
    const agentId = params.agent_id as string;
    const points = (await bucket.get(`points.${agentId}`))?.value as Points | undefined;
    sendJson(res, 200, restRecord({ agentId, points: points?.points ?? 0 }));
  });

  const entryFor = async (agentId: string | null, entryId: string): Promise<KnowledgeEntry> => {
    const entry = (await bucket.get(ENTRY_KEY(entryId)))?.value as KnowledgeEntry | undefined;
    if (!entry) throw notFound("knowledge entry", entryId);
    if (agentId !== null)
      await memberTeam(teams, entry.teamId, agentId).catch(() => {
        throw notFound("knowledge entry", entryId);
      });
    return entry;
  };

  router.add("GET", "/api/v1/knowledge/:entry_id", async (req, res, params) => {
    const reader = await readerOf(ctx, req);
    const entry = await entryFor(reader.kind === "agent" ? reader.agentId : null, params.entry_id as string);
    sendJson(res, 200, restRecord(entry));
  });

  router.add("POST", "/api/v1/knowledge/:entry_id/use", async (req, res, params) => {
    const caller = await authenticateAgent(ctx, req);
    const entryId = params.entry_id as string;
    const action = await intake.readOne(req, caller, {
      method: CollabMethod.knowledgeUse,
      body: KnowledgeUseBody,
      to: "self",
    });
    if (action.body.entryId !== entryId) {
      throw new AcpError(
        "InvalidParams",
        `the message is about entry ${action.body.entryId}, not ${entryId}`,
        {
          problems: [{ path: "/params/body/entryId", message: `must be ${entryId}` }],
        },
      );
    }
    const user = caller.record.agentId;
    const entry = await entryFor(user, entryId);
    const answer = (credited: boolean, reason: string, points: number) =>
      sendJson(
        res,
        200,
        restRecord({ entryId, author: entry.author, credited, reason, authorPoints: points }),
      );
    const current = async () =>
      ((await bucket.get(`points.${entry.author}`))?.value as Points | undefined)?.points ?? 0;
    if (entry.author === user)
      return answer(false, "an author earns nothing for using its own entry", await current());
    try {
      await bucket.create(`u.${entryId}.${user}`, {
        entryId,
        user,
        at: action.headers.timestamp,
        messageId: action.headers["message-id"],
      });
    } catch (err) {
      if (!isBrokerError(err, "exists")) throw err;
      return answer(
        false,
        `${user} already used this entry; each agent credits an entry once`,
        await current(),
      );
    }
    await mutate(bucket, ENTRY_KEY(entryId), (e) => ({
      ...(e as KnowledgeEntry),
      uses: (e as KnowledgeEntry).uses + 1,
    }));
    const { value } = await mutate(bucket, `points.${entry.author}`, (p) => ({
      agentId: entry.author,
      points: ((p as Points | undefined)?.points ?? 0) + 1,
    }));
    audit.record({
      method: CollabMethod.knowledgeUse,
      from: auditParty(caller.record),
      to: { agent: entry.author, principal: entry.authorPrincipal },
      id: entryId,
      messageId: action.headers["message-id"],
      summary: `${user} used knowledge entry ${entryId}; ${entry.author} earned a point (now ${(value as Points).points}).`,
    });
    answer(true, `${entry.author} earned a point`, (value as Points).points);
  });
}
