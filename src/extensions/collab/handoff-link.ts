/**
 * Task handoffs between agents of different domains (docs/federation.md, "What works across the
 * link"). Each party's gateway keeps a copy of the handoff and applies the same transitions
 * (collab/handoff.ts) to the same signed messages: its own agent's through its routes, the other
 * party's as they arrive over the federation link (verified against that agent's key from its home
 * directory). The escrow is the delegator's gateway's alone: it reserves, holds, releases and
 * refunds it as the moves arrive; the delegate's gateway keeps no escrow and moves no credits.
 */
import type { KvBucket } from "../../broker/index.js";
import {
  checkDeadlines,
  HANDOFF_KEY,
  type HandoffAction,
  type HandoffRecord,
  newHandoff,
  transition,
  withProgress,
} from "../../collab/handoff.js";
import {
  CollabMethod,
  HandoffActionBody,
  HandoffOfferBody,
  HandoffProgressBody,
} from "../../collab/messages.js";
import { conflict, notFound, parseOrThrow } from "../../collab/util.js";
import type { ArrivalCheck } from "../../gateway/relay-types.js";
import { AcpError, localPartOf } from "../../protocol/index.js";
import { requireCapabilities, settleEscrow, trackTask } from "./handoff-effects.js";
import type { CollabServices } from "./services.js";
import { mutate } from "./store.js";

const ACTIONS: Record<string, HandoffAction> = {
  [CollabMethod.handoffAccept]: "accept",
  [CollabMethod.handoffDecline]: "decline",
  [CollabMethod.handoffCancel]: "cancel",
  [CollabMethod.handoffComplete]: "complete",
  [CollabMethod.handoffFail]: "fail",
};

/** Whether `record` already holds the move signed as message `id` (a transfer forwarded twice). */
function holds(record: HandoffRecord, id: string): boolean {
  return record.offer.messageId === id || record.events.some((e) => e.messageId === id);
}

/**
 * Applies a handoff move that arrived from a peer gateway to this gateway's copy (an offer with a
 * task creates it), or refuses it with the error a local party would get, the copy unchanged. A
 * plain `agent.handoff` (no task) is the core protocol's and passes untouched.
 */
export function handoffArrivals(services: CollabServices, bucket: KvBucket<HandoffRecord>): ArrivalCheck {
  return async ({ sender, message, headers }) => {
    if (!("method" in message) || !("params" in message)) return;
    const method = message.method;
    const raw = message.params.body as Record<string, unknown> | undefined;
    const from = sender.record.agentId;
    const now = services.now();
    let changed: HandoffRecord;
    if (method === CollabMethod.handoffOffer) {
      if (raw?.task === undefined) return;
      if (!("id" in message))
        throw new AcpError("InvalidRequest", "agent.handoff is a request and needs an id");
      const body = parseOrThrow(HandoffOfferBody, raw, `${method} body`, "/params/body");
      const { task } = body;
      if (!task.handoffId.startsWith(`${localPartOf(from)}.`)) {
        throw new AcpError("InvalidParams", `handoff id ${task.handoffId} is not in ${from}'s namespace`, {
          problems: [
            { path: "/params/body/task/handoffId", message: `must start with ${localPartOf(from)}.` },
          ],
        });
      }
      const delegate = await services.ctx.registry.resolve(localPartOf(headers["recipient-id"]));
      if (!delegate) throw notFound("agent", headers["recipient-id"]);
      requireCapabilities(delegate, task.requires);
      const record = newHandoff(
        {
          delegator: from,
          delegatorPrincipal: sender.record.principalId,
          delegate: delegate.record.agentId,
          delegatePrincipal: delegate.record.principalId,
        },
        body,
        headers,
        message as unknown as Record<string, unknown>,
        checkDeadlines(task, services.handoffLimits, now),
        now,
      );
      changed = (
        await mutate(bucket, HANDOFF_KEY(task.handoffId), (current) => {
          if (current && holds(current, headers["message-id"])) return current;
          if (current) throw conflict(`handoff ${task.handoffId} already exists`);
          return record;
        })
      ).value;
    } else if (ACTIONS[method] !== undefined || method === CollabMethod.handoffProgress) {
      const handoffId = raw?.handoffId;
      if (typeof handoffId !== "string") return; // the relay's checks name what is missing
      changed = (
        await mutate(bucket, HANDOFF_KEY(handoffId), (current) => {
          if (!current || (current.delegate !== from && current.delegator !== from))
            throw notFound("handoff", handoffId);
          if (holds(current, headers["message-id"])) return current;
          const at = headers.timestamp;
          const messageId = headers["message-id"];
          const action = ACTIONS[method];
          if (action === undefined) {
            const body = parseOrThrow(HandoffProgressBody, raw, `${method} body`, "/params/body");
            return withProgress(
              current,
              from,
              { percent: body.progress, ...(body.note !== undefined && { note: body.note }), messageId, at },
              now,
            );
          }
          const body = parseOrThrow(HandoffActionBody, raw, `${method} body`, "/params/body");
          const details = {
            ...(body.reason !== undefined && { reason: body.reason }),
            ...(body.result !== undefined && { result: body.result }),
            messageId,
            at,
          };
          return transition(current, action, from, details, now, services.handoffLimits);
        })
      ).value;
    } else return;
    await settleEscrow(services, changed);
    await trackTask(services, changed);
    services.audit.record({
      method,
      from: { agent: from, principal: sender.record.principalId },
      to: { agent: headers["recipient-id"], principal: null },
      id: changed.handoffId,
      messageId: headers["message-id"],
      summary: `${from}: ${method} of handoff ${changed.handoffId}, verified against its home directory's key`,
    });
  };
}
