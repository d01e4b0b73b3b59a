import { restRecord } from "../../wire/deprecated-names.js";
import type { IncomingMessage } from "node:http";
import type { z } from "zod";
import { summaryOf } from "../../audit/index.js";
import { authenticateAgent } from "../../gateway/context.js";
import { type Router, sendJson } from "../../http/server.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import { AcpError } from "../../protocol/index.js";
import type { Action } from "./intake.js";
import { AcceptBody, CollabMethod, OfferBody, RejectBody } from "../../collab/messages.js";
import {
  accept,
  counter,
  type NegotiationSession,
  reject,
  type Step,
  sessionView,
  startSession,
} from "../../collab/negotiation.js";
import { negotiationKey, partiesOf, sideOf } from "./negotiation-link.js";
import { auditParty, type CollabServices, commitAndRelay, readerOf, relayOrUndo } from "./services.js";
import { bucketOf, listValues, mutate } from "./store.js";
import { conflict, notFound, requireOwnId } from "../../collab/util.js";

const BASE = "/api/v1/negotiations";
const keyOf = negotiationKey;

/**
 * The ACP messaging platform's negotiation endpoints: every change is a signed message from the acting party.
 */
export function negotiationRoutes(router: Pick<Router, "add">, services: CollabServices): void {
  const { ctx, intake, audit } = services;
  const bucket = bucketOf<NegotiationSession>(ctx.broker, "negotiations");
  // A negotiation with an agent of another domain names this gateway's party by its address.
  const domain = () => ctx.registry.remote?.domain;

  const load = async (req: IncomingMessage, sessionId: string): Promise<NegotiationSession> => {
    const reader = await readerOf(ctx, req);
    const session = (await bucket.get(keyOf(sessionId)))?.value;
    // Not a party reads the same as not existing: no probing of other agents' sessions.
    if (!session || (reader.kind === "agent" && !sideOf(session, reader.agentId, domain()))) {
      throw notFound("negotiation", sessionId);
    }
    return session;
  };

  router.add("POST", BASE, async (req, res) => {
    const caller = await authenticateAgent(ctx, req);
    const action = await intake.readOne(req, caller, { method: CollabMethod.propose, body: OfferBody });
    requireOwnId(action.body.sessionId, caller.record.agentId, "/params/body/sessionId", "negotiation");
    const { proposer, responder } = await partiesOf(services, caller, action.headers["recipient-id"]);
    const now = services.now();
    const session = startSession(
      proposer,
      responder,
      action.body,
      action.headers,
      action.message,
      services.rules,
      now,
    );
    action.summaryContext = { maxRounds: session.maxRounds };
    await commitAndRelay(
      services,
      caller,
      bucket,
      keyOf(session.sessionId),
      (current) => {
        if (current)
          throw conflict(`negotiation ${session.sessionId} already exists; pick another session id`);
        return session;
      },
      [action],
    );
    record(caller, action, session);
    sendJson(res, 201, restRecord(sessionView(session, now)));
  });

  /** Counter, accept and reject share this: check, store (terminal refusals too), relay, answer. */
  const act = <B extends { sessionId: string }>(
    path: string,
    method: string,
    schema: z.ZodType<B>,
    transition: (session: NegotiationSession, caller: string, action: Action<B>, now: Date) => Step,
  ) =>
    router.add("POST", `${BASE}/:session_id/${path}`, async (req, res, params) => {
      const caller = await authenticateAgent(ctx, req);
      const sessionId = params.session_id as string;
      const action = await intake.readOne(req, caller, { method, body: schema });
      if (action.body.sessionId !== sessionId) {
        throw new AcpError(
          "InvalidParams",
          `the message is about session ${action.body.sessionId}, not ${sessionId}`,
          {
            problems: [{ path: "/params/body/sessionId", message: `must be ${sessionId}` }],
          },
        );
      }
      const now = services.now();
      const key = keyOf(sessionId);
      let me = caller.record.agentId;
      const counterpart = (s: NegotiationSession) =>
        s.proposer.agentId === me ? s.responder.agentId : s.proposer.agentId;
      let refusal: AcpError | undefined;
      const mutation = await mutate(bucket, key, (current) => {
        const side = current && sideOf(current, caller.record.agentId, domain());
        if (!current || !side) throw notFound("negotiation", sessionId);
        me = side;
        if (action.headers["recipient-id"] !== counterpart(current)) {
          throw new AcpError("Misrouted", `address this message to ${counterpart(current)}`, {
            problems: [{ path: "/params/headers/recipient-id", message: `must be ${counterpart(current)}` }],
          });
        }
        const step = transition(current, me, action, now);
        refusal = step.refusal;
        return step.next;
      });
      if (refusal) {
        // The session ended (exhausted, expired): stored, announced in the audit, nothing relayed.
        audit.record({
          method: `collab.negotiation.${mutation.value.status}`,
          from: auditParty(caller.record),
          to: { agent: counterpart(mutation.value), principal: null },
          id: sessionId,
          messageId: action.headers["message-id"],
          summary: `Negotiation ${sessionId} ended ${mutation.value.status}: ${refusal.message}`,
        });
        throw refusal;
      }
      action.summaryContext = { maxRounds: mutation.value.maxRounds };
      await relayOrUndo(services, caller, bucket, key, mutation, [action]);
      record(caller, action, mutation.value);
      // After an acceptance the view carries the agreement both parties signed.
      sendJson(res, 200, restRecord(sessionView(mutation.value, now)));
    });

  act("counter", CollabMethod.counter, OfferBody, (s, by, a, now) =>
    counter(s, by, a.body, a.headers, a.message, now),
  );
  act("accept", CollabMethod.accept, AcceptBody, (s, by, a, now) => accept(s, by, a.body, a.headers, now));
  act("reject", CollabMethod.reject, RejectBody, (s, by, a, now) => reject(s, by, a.body, a.headers, now));

  router.add("GET", BASE, async (req, res, _params, url) => {
    const reader = await readerOf(ctx, req);
    const status = url.searchParams.get("status");
    const now = services.now();
    const sessions = (await listValues(bucket, "s."))
      .filter((s) => reader.kind === "admin" || sideOf(s, reader.agentId, domain()) !== undefined)
      .map((s) => sessionView(s, now))
      .filter((v) => status === null || v.status === status);
    sendJson(res, 200, restRecord({ negotiations: sessions }));
  });

  router.add("GET", `${BASE}/:session_id`, async (req, res, params) => {
    sendJson(res, 200, restRecord(sessionView(await load(req, params.session_id as string), services.now())));
  });

  router.add("GET", `${BASE}/:session_id/history`, async (req, res, params) => {
    const session = await load(req, params.session_id as string);
    sendJson(
      res,
      200,
      restRecord({
        sessionId: session.sessionId,
        status: sessionView(session, services.now()).status,
        rounds: session.rounds,
        ...(session.rejection ? { rejection: session.rejection } : {}),
        ...(session.acceptance ? { acceptance: session.acceptance } : {}),
      }),
    );
  });

  router.add("GET", `${BASE}/:session_id/agreement`, async (req, res, params) => {
    const session = await load(req, params.session_id as string);
    if (!session.agreement) {
      throw new AcpError(
        "NotFound",
        `negotiation ${session.sessionId} has no agreement (it is ${session.status})`,
      );
    }
    sendJson(res, 200, session.agreement);
  });

  /** The collaboration audit's entry: the same sentence the relay audit has (or the agent's own words). */
  function record(caller: ResolvedAgent, action: Action<unknown>, session: NegotiationSession) {
    const me = sideOf(session, caller.record.agentId, domain());
    const other = session.proposer.agentId === me ? session.responder : session.proposer;
    const summary = summaryOf(
      action.message,
      action.summaryContext ? { context: action.summaryContext } : {},
    );
    audit.record({
      method: action.message.method,
      from: auditParty(caller.record),
      to: { agent: other.agentId, principal: other.principalId },
      id: session.sessionId,
      messageId: action.headers["message-id"],
      summary: summary.text,
      ...(summary.by === "sender" ? { summaryBy: "sender" as const } : {}),
    });
  }
}
