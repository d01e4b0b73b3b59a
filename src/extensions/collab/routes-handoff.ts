import { acceptingDeprecatedNames, restRecord } from "../../wire/deprecated-names.js";
import type { Escrow } from "../../collab/contracts.js";
import { z } from "zod";
import type { Unsubscribe } from "../../broker/index.js";
import { authenticate, authenticateAgent, requireAdmin } from "../../gateway/context.js";
import { type Router, readJsonBody, sendJson } from "../../http/server.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import { reachableAgent } from "../../gateway/addressing.js";
import { AcpError, AgentId, isRemoteRef } from "../../protocol/index.js";
import { summaryOf } from "../../audit/index.js";
import {
  checkDeadlines,
  counterpartOf,
  HANDOFF_KEY,
  type HandoffAction,
  type HandoffRecord,
  type HandoffView,
  handoffView,
  newHandoff,
  transition,
  withProgress,
} from "../../collab/handoff.js";
import { requireCapabilities, settleEscrow, trackTask } from "./handoff-effects.js";
import { pendingHandoffs, watchPendingHandoffs } from "./handoff-store.js";
import type { Action } from "./intake.js";
import {
  CollabMethod,
  HandoffActionBody,
  HandoffOfferBody,
  HandoffProgressBody,
} from "../../collab/messages.js";
import {
  auditParty,
  type CollabServices,
  commitAndRelay,
  liveAgent,
  type Reader,
  readerOf,
} from "./services.js";
import { bucketOf, listValues, mutate } from "./store.js";
import { conflict, notFound, parseOrThrow, requireOwnId } from "../../collab/util.js";

const BASE = "/api/v1/handoffs";

/** POST /api/v1/ledger/grants; `agentId` is the deprecated name of `agent_id`. */
const Grant = acceptingDeprecatedNames(
  z.strictObject({
    agent_id: AgentId,
    amount: z.int("must be a whole number of credits").positive().max(1_000_000_000),
    note: z.string().max(500).optional(),
  }),
);

/** What a handoff party may do with a handoff other than through the REST API (the MCP endpoint's tasks). */
export interface HandoffService {
  /** The handoffs delegated to `agentId` that wait on it (offered or accepted), oldest first. */
  pending(agentId: string): Promise<HandoffRecord[]>;
  /** Calls `onChange` whenever a handoff delegated to `agentId` changes. */
  watchPending(agentId: string, onChange: () => void): Promise<Unsubscribe>;
  /** Calls `onChange` whenever handoff `handoffId` changes. */
  watch(handoffId: string, onChange: () => void): Promise<Unsubscribe>;
  /** One handoff as its party `caller` sees it (`GET /api/v1/handoffs/{id}`); NotFound otherwise. */
  read(caller: ResolvedAgent, handoffId: string, withEnvelope?: boolean): Promise<HandoffView>;
  /** A signed handoff message from `caller` (`POST /api/v1/handoffs/{id}/{step}`), with every check. */
  apply(caller: ResolvedAgent, handoffId: string, step: HandoffStep, message: unknown): Promise<HandoffView>;
}

export type HandoffStep = HandoffAction | "progress";

/** Task handoffs with capability checks and escrow, and the credit ledger behind the escrow. */
export function handoffRoutes(router: Pick<Router, "add">, services: CollabServices): HandoffService {
  const { ctx, intake, ledger, audit } = services;
  const bucket = bucketOf<HandoffRecord>(ctx.broker, "handoffs");

  const settle = (record: HandoffRecord) => settleEscrow(services, record);

  const view = async (record: HandoffRecord, withEnvelope = false) =>
    handoffView(
      record,
      record.escrow === 0 ? "none" : escrowState(record, await ledger.escrow(record.handoffId)),
      withEnvelope,
    );

  router.add("POST", BASE, async (req, res) => {
    const caller = await authenticateAgent(ctx, req);
    const action = await intake.readOne(req, caller, {
      method: CollabMethod.handoffOffer,
      body: HandoffOfferBody,
    });
    if (!("id" in action.message)) {
      throw new AcpError("InvalidRequest", "agent.handoff is a request and needs an id");
    }
    const { task } = action.body;
    requireOwnId(task.handoffId, caller.record.agentId, "/params/body/task/handoffId", "handoff");
    const delegate = await delegateOf(ctx, action.headers["recipient-id"]);
    // Refused before anything is reserved or delivered, naming what is missing.
    requireCapabilities(delegate, task.requires);
    if (await bucket.get(HANDOFF_KEY(task.handoffId)))
      throw conflict(`handoff ${task.handoffId} already exists`);
    const now = services.now();
    const due = checkDeadlines(task, services.handoffLimits, now);
    // A delegate of another domain has its presence at its own gateway: its offer is not queued here.
    const delegateOffline =
      !isRemoteRef(delegate.record.agentId, ctx.registry.remote?.domain) &&
      (await ctx.presence.get(delegate.record.agentId)).state === "offline";
    const record = newHandoff(
      {
        delegator: caller.record.agentId,
        delegatorPrincipal: caller.record.principalId,
        delegate: delegate.record.agentId,
        delegatePrincipal: delegate.record.principalId,
      },
      action.body,
      action.headers,
      action.message,
      due,
      now,
    );
    if (task.escrow > 0)
      await ledger.reserve(task.handoffId, caller.record.agentId, delegate.record.agentId, task.escrow);
    const create = (value: HandoffRecord) => (current: HandoffRecord | undefined) => {
      if (current) throw conflict(`handoff ${task.handoffId} already exists`);
      return value;
    };
    let offered = record;
    try {
      await commitAndRelay(services, caller, bucket, HANDOFF_KEY(task.handoffId), create(record), [action]);
    } catch (err) {
      // An offline delegate that has not met the delegator yet cannot take the offer now: it waits
      // at the gateway until their handshake completes (handoff-expiry.ts delivers it).
      const queue = delegateOffline && err instanceof AcpError && err.kind === "HandshakeRequired";
      if (queue)
        offered = (
          await mutate(bucket, HANDOFF_KEY(task.handoffId), create({ ...record, delivery: "queued" }))
        ).value;
      else {
        // Not offered after all: the reservation goes back.
        if (task.escrow > 0) await ledger.refund(task.handoffId);
        throw err;
      }
    }
    auditAction(
      caller,
      action,
      offered,
      offered.delivery === "queued" ? " (queued until the handshake completes)" : "",
    );
    sendJson(res, 201, restRecord(await view(offered)));
  });

  const METHODS: Record<HandoffAction, string> = {
    accept: CollabMethod.handoffAccept,
    decline: CollabMethod.handoffDecline,
    cancel: CollabMethod.handoffCancel,
    complete: CollabMethod.handoffComplete,
    fail: CollabMethod.handoffFail,
  };
  const act = async (caller: ResolvedAgent, handoffId: string, action: HandoffAction, input: unknown) => {
    const signed = intake.check(caller, input, { method: METHODS[action], body: HandoffActionBody }, "");
    checkId(signed.body.handoffId, handoffId);
    const now = services.now();
    const details = {
      ...(signed.body.reason !== undefined ? { reason: signed.body.reason } : {}),
      ...(signed.body.result !== undefined ? { result: signed.body.result } : {}),
      messageId: signed.headers["message-id"],
      at: signed.headers.timestamp,
    };
    const { value } = await commitAndRelay(
      services,
      caller,
      bucket,
      HANDOFF_KEY(handoffId),
      (current) => {
        const record = partyRecord(current, caller.record.agentId, handoffId);
        checkRecipient(signed, counterpartOf(record, caller.record.agentId));
        return transition(record, action, caller.record.agentId, details, now, services.handoffLimits);
      },
      [signed],
    );
    await settle(value);
    await trackTask(services, value);
    auditAction(caller, signed, value);
    return view(value);
  };

  const progress = async (caller: ResolvedAgent, handoffId: string, input: unknown) => {
    const signed = intake.check(
      caller,
      input,
      { method: CollabMethod.handoffProgress, body: HandoffProgressBody },
      "",
    );
    checkId(signed.body.handoffId, handoffId);
    const now = services.now();
    const { value } = await commitAndRelay(
      services,
      caller,
      bucket,
      HANDOFF_KEY(handoffId),
      (current) => {
        const record = partyRecord(current, caller.record.agentId, handoffId);
        checkRecipient(signed, record.delegator);
        return withProgress(
          record,
          caller.record.agentId,
          {
            percent: signed.body.progress,
            ...(signed.body.note !== undefined ? { note: signed.body.note } : {}),
            messageId: signed.headers["message-id"],
            at: signed.headers.timestamp,
          },
          now,
        );
      },
      [signed],
    );
    await trackTask(services, value);
    return view(value);
  };

  const apply = (caller: ResolvedAgent, handoffId: string, step: HandoffStep, input: unknown) =>
    step === "progress" ? progress(caller, handoffId, input) : act(caller, handoffId, step, input);
  for (const step of [...(Object.keys(METHODS) as HandoffAction[]), "progress" as const]) {
    router.add("POST", `${BASE}/:handoff_id/${step}`, async (req, res, params) => {
      const caller = await authenticateAgent(ctx, req);
      const input = await readJsonBody(req, ctx.maxEnvelopeBytes);
      sendJson(res, 200, restRecord(await apply(caller, params.handoff_id as string, step, input)));
    });
  }

  /** A handoff its party (or the admin) may read. */
  const read = async (reader: Reader, handoffId: string, withEnvelope: boolean) => {
    const record = (await bucket.get(HANDOFF_KEY(handoffId)))?.value;
    if (
      !record ||
      (reader.kind === "agent" && reader.agentId !== record.delegate && reader.agentId !== record.delegator)
    )
      throw notFound("handoff", handoffId);
    await settle(record);
    return view(record, withEnvelope);
  };

  router.add("GET", BASE, async (req, res, _params, url) => {
    const reader = await readerOf(ctx, req);
    const role = url.searchParams.get("role");
    const status = url.searchParams.get("status");
    const all = await listValues(bucket, "h.");
    const mine = all.filter((h) => {
      if (reader.kind === "admin") return true;
      if (role === "delegate") return h.delegate === reader.agentId;
      if (role === "delegator") return h.delegator === reader.agentId;
      return h.delegate === reader.agentId || h.delegator === reader.agentId;
    });
    const selected = mine.filter((h) => status === null || h.status === status);
    sendJson(res, 200, restRecord({ handoffs: await Promise.all(selected.map((h) => view(h))) }));
  });

  router.add("GET", `${BASE}/:handoff_id`, async (req, res, params, url) => {
    const reader = await readerOf(ctx, req);
    const withEnvelope = url.searchParams.get("envelope") === "1";
    sendJson(res, 200, restRecord(await read(reader, params.handoff_id as string, withEnvelope)));
  });

  router.add("GET", "/api/v1/ledger/:agent_id", async (req, res, params) => {
    const caller = await authenticate(ctx, req);
    const agentId = params.agent_id as string;
    if (caller.kind === "agent" && caller.agent.record.agentId !== agentId) {
      throw new AcpError("Forbidden", "an agent can read only its own ledger account");
    }
    sendJson(
      res,
      200,
      restRecord({ ...(await ledger.balance(agentId)), movements: await ledger.movements(agentId) }),
    );
  });

  router.add("POST", "/api/v1/ledger/grants", async (req, res) => {
    await requireAdmin(ctx, req);
    const grant = parseOrThrow(Grant, await readJsonBody(req, 64 * 1024), "grant");
    await liveAgent(ctx, grant.agent_id, "/agent_id");
    const movement = await ledger.grant(grant.agent_id, grant.amount, grant.note);
    sendJson(res, 201, restRecord(movement));
  });

  /** The collaboration audit's entry: the relay audit's sentence (or the agent's words), and `note`. */
  function auditAction(caller: ResolvedAgent, action: Action<unknown>, record: HandoffRecord, note = "") {
    const other = counterpartOf(record, caller.record.agentId);
    const summary = summaryOf(action.message);
    audit.record({
      method: action.message.method,
      from: auditParty(caller.record),
      to: {
        agent: other,
        principal: other === record.delegate ? record.delegatePrincipal : record.delegatorPrincipal,
      },
      id: record.handoffId,
      messageId: action.headers["message-id"],
      summary: `${summary.text}${note}`,
      ...(summary.by === "sender" ? { summaryBy: "sender" as const } : {}),
    });
  }

  return {
    pending: (agentId) => pendingHandoffs(ctx.broker, agentId),
    watchPending: (agentId, onChange) => watchPendingHandoffs(ctx.broker, agentId, () => onChange()),
    watch: (handoffId, onChange) =>
      bucket.watch((change) => {
        if (change.value?.handoffId === handoffId) onChange();
      }),
    read: (caller, handoffId, withEnvelope = false) =>
      read({ kind: "agent", agentId: caller.record.agentId }, handoffId, withEnvelope),
    apply,
  };
}

function escrowState(record: HandoffRecord, open: Escrow | undefined): HandoffView["escrowState"] {
  if (open) return open.state;
  if (record.status === "completed") return "released";
  if (record.status === "offered" || record.status === "accepted") return "reserved";
  return "refunded";
}

/**
 * The delegate an offer names: an agent here, or one of another domain this gateway forwards to
 * (from its home directory; the handoff then crosses the link, and its escrow stays here).
 */
async function delegateOf(ctx: CollabServices["ctx"], recipient: string): Promise<ResolvedAgent> {
  if (!isRemoteRef(recipient, ctx.registry.remote?.domain))
    return liveAgent(ctx, recipient, "/params/headers/recipient-id");
  const remote = await reachableAgent(recipient, ctx.registry);
  if (!remote) {
    throw new AcpError("UnknownRecipient", `${recipient} is not an agent this gateway can reach`, {
      problems: [{ path: "/params/headers/recipient-id", message: "not an agent of a peer domain" }],
    });
  }
  return remote;
}

function partyRecord(current: HandoffRecord | undefined, agentId: string, handoffId: string): HandoffRecord {
  if (!current || (current.delegate !== agentId && current.delegator !== agentId))
    throw notFound("handoff", handoffId);
  return current;
}

function checkId(inBody: string, inPath: string): void {
  if (inBody !== inPath) {
    throw new AcpError("InvalidParams", `the message is about handoff ${inBody}, not ${inPath}`, {
      problems: [{ path: "/params/body/handoffId", message: `must be ${inPath}` }],
    });
  }
}

function checkRecipient(action: Action<unknown>, expected: string): void {
  if (action.headers["recipient-id"] !== expected) {
    throw new AcpError("Misrouted", `address this message to ${expected}`, {
      problems: [{ path: "/params/headers/recipient-id", message: `must be ${expected}` }],
    });
  }
}
