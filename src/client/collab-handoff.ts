import { randomUUID } from "node:crypto";
import type { Balance, Movement } from "../collab/contracts.js";
import type { HandoffView } from "../collab/handoff.js";
import { CollabMethod, type HandoffTask } from "../collab/messages.js";
import { ownId } from "../collab/util.js";
import type { HandoffBody } from "../protocol/index.js";
import type { AcpAgent } from "./agent.js";
import { type CollabCore, path } from "./collab-core.js";

/** A task offered to this agent, as its `onOffer` handler sees it (verified end to end). */
export interface HandoffOffer {
  handoffId: string;
  from: string;
  principalId: string;
  task: HandoffTask;
  handoff: HandoffBody;
}

/** accept, decline (optionally with a reason), or undefined to decide later with accept()/decline(). */
export type HandoffDecision = "accept" | "decline" | { decline: string } | undefined;

const BASE = "/handoffs";

/**
 * Task handoffs through the gateway: offer (with required capabilities and escrow), then the
 * lifecycle accept | decline | cancel → complete | fail, each a signed message to the other party.
 */
export class HandoffClient {
  constructor(private readonly core: CollabCore) {}

  /**
   * Offers a task (the ACP core protocol's completed / remaining / context); refused if `peer` lacks a
   * required capability, and at once if it is not registered. `respondBy` (the offer expires then
   * unanswered) and `deadline` (the accepted task expires then) default to the gateway's. A peer
   * that is offline and has not met this agent yet gets the offer queued at the gateway (`delivery:
   * "queued"`) and delivered once it comes online and completes the handshake: this call does not
   * wait for that.
   */
  async offer(
    peer: string,
    handoff: HandoffBody,
    task: {
      handoffId?: string;
      title?: string;
      requires?: string[];
      escrow?: number;
      respondBy?: string;
      deadline?: string;
    } = {},
  ): Promise<HandoffView> {
    await this.core.reachOrQueue(peer);
    const { message } = await this.core.sign(CollabMethod.handoffOffer, peer, {
      ...handoff,
      task: {
        requires: [],
        escrow: 0,
        ...task,
        handoffId: ownId(this.core.agentId, task.handoffId ?? randomUUID()),
      },
    });
    return this.core.call("POST", BASE, message);
  }

  accept(handoffId: string): Promise<HandoffView> {
    return this.act(handoffId, "accept", CollabMethod.handoffAccept, {});
  }

  decline(handoffId: string, reason?: string): Promise<HandoffView> {
    return this.act(handoffId, "decline", CollabMethod.handoffDecline, reason ? { reason } : {});
  }

  /** The delegator withdraws an offer not yet accepted. */
  cancel(handoffId: string, reason?: string): Promise<HandoffView> {
    return this.act(handoffId, "cancel", CollabMethod.handoffCancel, reason ? { reason } : {});
  }

  complete(handoffId: string, result?: unknown): Promise<HandoffView> {
    return this.act(
      handoffId,
      "complete",
      CollabMethod.handoffComplete,
      result === undefined ? {} : { result },
    );
  }

  fail(handoffId: string, reason?: string): Promise<HandoffView> {
    return this.act(handoffId, "fail", CollabMethod.handoffFail, reason ? { reason } : {});
  }

  /** The delegate reports progress (0-100) on an accepted task; it shows in its presence too. */
  async progress(handoffId: string, percent: number, note?: string): Promise<HandoffView> {
    const record = await this.get(handoffId);
    await this.core.reach(record.delegator);
    const { message } = await this.core.sign(CollabMethod.handoffProgress, record.delegator, {
      handoffId,
      progress: percent,
      ...(note !== undefined ? { note } : {}),
    });
    return this.core.call("POST", `${BASE}/${path(handoffId)}/progress`, message);
  }

  get(handoffId: string): Promise<HandoffView> {
    return this.core.call("GET", `${BASE}/${path(handoffId)}`);
  }

  async list(query: { role?: "delegate" | "delegator"; status?: string } = {}): Promise<HandoffView[]> {
    const params = new URLSearchParams(
      Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined),
    );
    const search = params.size > 0 ? `?${params}` : "";
    return (await this.core.call<{ handoffs: HandoffView[] }>("GET", `${BASE}${search}`)).handoffs;
  }

  /** This agent's credits: balance, what it has in escrow, what is held for it, and every movement. */
  balance(): Promise<Balance & { movements: Movement[] }> {
    return this.core.call("GET", `/ledger/${path(this.core.agentId)}`);
  }

  /**
   * Handles tasks offered to this agent: `decide` returns accept, decline, or nothing (decide later).
   * It takes over the agent's `onHandoff`; the `agent.handoff` request is answered with where the
   * handoff stands once the decision is recorded at the gateway.
   */
  onOffer(
    agent: AcpAgent,
    decide: (offer: HandoffOffer) => HandoffDecision | Promise<HandoffDecision>,
  ): void {
    agent.onHandoff(async (body, context) => {
      const task = (body as { task?: HandoffTask }).task;
      if (!task?.handoffId) {
        return {
          accepted: false,
          reason: "this agent takes handoffs offered through the gateway (task.handoffId)",
        };
      }
      const { task: _task, ...handoff } = body as HandoffBody & { task: HandoffTask };
      const decision = await decide({
        handoffId: task.handoffId,
        from: context.from,
        principalId: context.principalId,
        task,
        handoff: handoff as HandoffBody,
      });
      if (decision === undefined) return { handoffId: task.handoffId, status: "offered" };
      const view =
        decision === "accept"
          ? await this.accept(task.handoffId)
          : await this.decline(task.handoffId, typeof decision === "object" ? decision.decline : undefined);
      return { handoffId: task.handoffId, status: view.status, accepted: view.status === "accepted" };
    });
  }

  private async act(
    handoffId: string,
    action: string,
    method: string,
    body: Record<string, unknown>,
  ): Promise<HandoffView> {
    const record = await this.get(handoffId);
    const peer = record.delegator === this.core.agentId ? record.delegate : record.delegator;
    await this.core.reach(peer);
    const { message } = await this.core.sign(method, peer, { handoffId, ...body });
    return this.core.call("POST", `${BASE}/${path(handoffId)}/${action}`, message);
  }
}
