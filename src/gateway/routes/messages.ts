import type { ListQuery, MessageRecord, MessageRef } from "../../broker/index.js";
import { type Router, readBody, sendJson } from "../../http/server.js";
import { AcpError, AgentId, type Priority } from "../../protocol/index.js";
import { PriorityInput } from "../../wire/api.js";
import { type WithDeprecatedNames, withDeprecatedNames } from "../../wire/deprecated-names.js";
import type { MessageListItem, MessageStatusView } from "../../wire/messages.js";
import { announceDeprecation, authenticateAgent, type GatewayContext } from "../context.js";
import { platformMessageOf, sendPlatformMessage } from "../platform-message.js";
import type { RemoteProgress } from "../remote.js";

const KINDS = new Set(["request", "response", "notification", "handoff"]);
const STATUSES = new Set(["queued", "delivered", "acknowledged", "failed", "expired"]);

/**
 * The status of a message to an agent of another domain: the remote recipient's progress
 * (federation) over the record of its wait in the peer's outbound queue here.
 */
function remoteStatusView(r: MessageRecord, p: RemoteProgress): MessageStatusView {
  return {
    ...statusView(r),
    to: p.to,
    status: p.status,
    peer: p.peer,
    ...(p.forwardedAt ? { forwarded_at: p.forwardedAt } : {}),
    ...(p.deliveredAt ? { delivered_at: p.deliveredAt } : {}),
    ...(p.acknowledgedAt ? { acknowledged_at: p.acknowledgedAt } : {}),
    ...(p.failedAt ? { failed_at: p.failedAt } : {}),
    ...(p.expiredAt ? { expired_at: p.expiredAt } : {}),
    ...(p.retryCount !== undefined ? { retry_count: p.retryCount } : {}),
    ...(p.deadLetter ? { dead_letter: p.deadLetter } : {}),
  };
}

/** A message's status as its sender or recipient reads it, a remote recipient's progress included. */
async function currentStatusView(ctx: GatewayContext, r: MessageRecord): Promise<MessageStatusView> {
  const progress = await ctx.registry.remote?.progress(r);
  return progress ? remoteStatusView(r, progress) : statusView(r);
}

/** The ACP messaging platform's status shape (snake_case), with every timestamp the record has. */
export function statusView(r: MessageRecord): Omit<MessageListItem, "kind" | "method" | "submitted_at"> {
  return {
    id: r.id,
    from: r.from,
    to: r.to,
    status: r.status,
    queued_at: r.queuedAt,
    ...(r.deliveredAt ? { delivered_at: r.deliveredAt } : {}),
    ...(r.acknowledgedAt ? { acknowledged_at: r.acknowledgedAt } : {}),
    ...(r.failedAt ? { failed_at: r.failedAt } : {}),
    ...(r.expiredAt ? { expired_at: r.expiredAt } : {}),
    retry_count: r.retryCount,
    ...(r.lastError ? { last_error: r.lastError } : {}),
    ...(r.deadLetter ? { dead_letter: r.deadLetter } : {}),
  };
}

/** A row of GET /messages: the status and the routing metadata, with the names deprecated in it. */
function listItemView(r: MessageRecord): WithDeprecatedNames<MessageListItem> {
  return withDeprecatedNames({
    ...statusView(r),
    kind: r.kind,
    method: r.method,
    submitted_at: r.submittedAt,
  });
}

/** `?priority=` of a submitted envelope: how it ranks in the recipient's queue. */
function priorityParam(url: URL): Priority | undefined {
  const given = url.searchParams.get("priority");
  if (given === null) return undefined;
  const parsed = PriorityInput.safeParse(given);
  if (!parsed.success) {
    throw new AcpError("InvalidParams", "invalid query parameters", {
      problems: [{ path: "priority", message: parsed.error.issues[0]?.message ?? "invalid" }],
    });
  }
  return parsed.data;
}

function queryParam(url: URL, ...names: string[]): string | undefined {
  for (const name of names) {
    const value = url.searchParams.get(name);
    if (value !== null && value !== "") return value;
  }
  return undefined;
}

/** Messages: submit, list, read, status, acknowledge; an agent sees only messages it sent or received. */
export function messageRoutes(router: Router, ctx: GatewayContext): void {
  router.add("POST", "/api/v1/messages", async (req, res, _params, url) => {
    const agent = await authenticateAgent(ctx, req);
    announceDeprecation(ctx, res, { kind: "agent", agent });
    const body = await readBody(req, ctx.maxEnvelopeBytes);
    const text = body.toString("utf8");
    // The messaging platform's unsigned shape: signed here for a custodial agent, else refused.
    const platform = platformMessageOf(text);
    if (platform) return sendJson(res, 202, await sendPlatformMessage(ctx, agent, platform));
    const priority = priorityParam(url);
    const result = await ctx.relay.submit(agent, text, body.length, priority ? { priority } : {});
    sendJson(res, 202, result);
  });

  router.add("GET", "/api/v1/messages", async (req, res, _params, url) => {
    const agent = await authenticateAgent(ctx, req);
    announceDeprecation(ctx, res, { kind: "agent", agent });
    const type = queryParam(url, "type", "kind");
    const status = queryParam(url, "status");
    const limit = queryParam(url, "limit");
    const problems = [
      ...(type && !KINDS.has(type)
        ? [{ path: "type", message: `must be one of ${[...KINDS].join(", ")}` }]
        : []),
      ...(status && !STATUSES.has(status)
        ? [{ path: "status", message: `must be one of ${[...STATUSES].join(", ")}` }]
        : []),
      ...(limit && !/^\d+$/.test(limit) ? [{ path: "limit", message: "must be a whole number" }] : []),
    ];
    if (problems.length > 0) throw new AcpError("InvalidParams", "invalid query parameters", { problems });
    const query: ListQuery = { participant: agent.record.agentId };
    const from = queryParam(url, "from_agent_id", "from");
    const to = queryParam(url, "to_agent_id", "to");
    const cursor = queryParam(url, "cursor");
    if (from) query.from = from;
    if (to) query.to = to;
    if (type) query.kind = type as ListQuery["kind"] & string;
    if (status) query.status = status as ListQuery["status"] & string;
    if (cursor) query.cursor = cursor;
    if (limit) query.limit = Math.min(500, Math.max(1, Number(limit)));
    const page = await ctx.broker.list(query);
    sendJson(
      res,
      200,
      withDeprecatedNames({ items: page.items.map(listItemView), next_cursor: page.nextCursor }),
    );
  });

  /**
   * A message in the caller's view. Ids are per sender (MessageRef): `?from=` names the sender, by
   * default the caller itself (its own messages by id alone). Not a participant reads the same as
   * not existing: no probing of other agents' message ids.
   */
  const participantRecord = async (agentId: string, message: MessageRef) => {
    const stored = await ctx.broker.get(message);
    if (!stored || (stored.from !== agentId && stored.to !== agentId))
      throw new AcpError("NotFound", `no message ${message.id}`);
    return stored;
  };
  const senderParam = (url: URL): string | undefined => {
    const from = queryParam(url, "from_agent_id", "from");
    if (from !== undefined && !AgentId.safeParse(from).success) {
      throw new AcpError("InvalidParams", `from: ${JSON.stringify(from)} is not an agent id`, {
        problems: [{ path: "from", message: "must be an agent id" }],
      });
    }
    return from;
  };
  /** A message the caller sent: `?from=` names another sender, by default the caller itself. */
  const refOf = (agentId: string, id: string, url: URL): MessageRef => ({
    from: senderParam(url) ?? agentId,
    id,
  });
  /**
   * A message the caller received: `?from=` names its sender, or the id alone finds it among the
   * caller's messages (the messaging platform's shape), unless two senders used that id.
   */
  const receivedRefOf = async (recipient: string, id: string, url: URL): Promise<MessageRef> => {
    const from = senderParam(url);
    if (from !== undefined) return { from, id };
    const senders = await ctx.broker.sendersTo(recipient, id);
    if (senders.length > 1) {
      throw new AcpError(
        "Conflict",
        `two senders sent you a message with id ${id}: name the sender with ?from=`,
        {
          problems: [{ path: "from", message: "required: more than one sender used this message id" }],
        },
      );
    }
    return { from: senders[0] ?? recipient, id };
  };

  router.add("GET", "/api/v1/messages/:id", async (req, res, { id }, url) => {
    const agent = await authenticateAgent(ctx, req);
    announceDeprecation(ctx, res, { kind: "agent", agent });
    const me = agent.record.agentId;
    const { envelope, ...record } = await participantRecord(me, refOf(me, id as string, url));
    sendJson(res, 200, {
      ...listItemView(record),
      envelope: envelope === null ? null : JSON.parse(envelope),
    });
  });

  router.add("GET", "/api/v1/messages/:id/status", async (req, res, { id }, url) => {
    const agent = await authenticateAgent(ctx, req);
    announceDeprecation(ctx, res, { kind: "agent", agent });
    const me = agent.record.agentId;
    sendJson(
      res,
      200,
      await currentStatusView(ctx, await participantRecord(me, refOf(me, id as string, url))),
    );
  });

  router.add("POST", "/api/v1/messages/:id/acknowledge", async (req, res, { id }, url) => {
    const agent = await authenticateAgent(ctx, req);
    announceDeprecation(ctx, res, { kind: "agent", agent });
    const me = agent.record.agentId;
    const message = await receivedRefOf(me, id as string, url);
    await participantRecord(me, message);
    const record = await ctx.broker.ack(me, message);
    ctx.metrics.count("acp_messages_acknowledged_total");
    sendJson(res, 200, statusView(record));
  });
}
