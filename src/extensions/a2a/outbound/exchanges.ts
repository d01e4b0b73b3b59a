import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { AcpError, type VerifiedEnvelope } from "../../../protocol/index.js";
import { A2AFailure, type A2ATask } from "./a2a-client.js";
import type { Served } from "./bridge.js";
import {
  A2AMethods,
  interimBody,
  messageBody,
  OutboundRequestBody,
  parseBody,
  shortState,
  TaskReference,
  taskBody,
  taskRef,
  toA2AMessage,
} from "./convert.js";
import { type Interim, type RunOutcome, runExchange } from "./run.js";
import type { TaskLinks } from "./tasks.js";

export interface ExchangeOptions {
  attempts: number;
  retryDelayMs: number;
  /** `agent.a2a.progress` notifications per request, at most. */
  maxProgress: number;
  /** Sends a notification (`agent.a2a.status`, `agent.a2a.progress`) from the served agent to `to`. */
  notify(served: Served, to: string, method: string, body: Record<string, unknown>): Promise<void>;
  /** Whether `agentId` has a live session (a connection to some gateway) now. */
  connected(agentId: string): Promise<boolean>;
}

export type Answer = { body?: Record<string, unknown>; error?: AcpError; deadLetter?: string } | "abandoned";

interface Running {
  agentId: string;
  from: string;
  controller: AbortController;
  taskId?: string;
  cancelRequested: boolean;
  client: Served["client"];
}

/**
 * Requests to A2A agents under way, by the request's message-id: their A2A task ids (for
 * `agent.a2a.cancel` before the exchange is over) and the outcome as an ACP answer.
 */
export class Exchanges {
  private readonly running = new Map<string, Running>();

  constructor(
    private readonly links: TaskLinks,
    private readonly logger: Logger,
    private readonly options: ExchangeOptions,
  ) {}

  abortAll(): void {
    for (const run of this.running.values())
      run.controller.abort(new AcpError("Cancelled", "the gateway is stopping"));
  }

  async answer(served: Served, verified: VerifiedEnvelope): Promise<Answer> {
    const { message, headers } = verified;
    const method = "method" in message ? message.method : "";
    const body = "params" in message ? message.params.body : {};
    try {
      if (method === "agent.request") return { body: await this.forward(served, verified, body) };
      if (method === A2AMethods.task) return { body: await this.status(served, headers["agent-id"], body) };
      throw new AcpError(
        "MethodNotFound",
        `${served.record.agentId} is an A2A agent behind the gateway's bridge: it answers agent.request and ${A2AMethods.task}, not ${method}`,
      );
    } catch (err) {
      const run = this.running.get(headers["message-id"]);
      if (run?.controller.signal.aborted && !run.cancelRequested) return "abandoned";
      return this.failure(served, err);
    } finally {
      this.running.delete(headers["message-id"]);
    }
  }

  /** `agent.a2a.cancel` from the requester: `CancelTask` now, or as soon as the task id is known. */
  async cancel(served: Served, verified: VerifiedEnvelope): Promise<void> {
    const from = verified.headers["agent-id"];
    const ref = parseBody(
      TaskReference,
      "params" in verified.message ? verified.message.params.body : {},
      A2AMethods.cancel,
    );
    const run = [...this.running.entries()].find(
      ([messageId, r]) =>
        r.agentId === served.record.agentId &&
        r.from === from &&
        (messageId === ref.messageId || (ref.taskId && r.taskId === ref.taskId)),
    )?.[1];
    if (run) {
      run.cancelRequested = true;
      if (run.taskId) await run.client.cancelTask(run.taskId);
      return;
    }
    const link = await this.links.find(served.record.agentId, from, ref);
    await served.client.cancelTask(link.taskId);
  }

  private async forward(served: Served, verified: VerifiedEnvelope, rawBody: Record<string, unknown>) {
    const body = parseBody(OutboundRequestBody, rawBody, "agent.request");
    const { headers } = verified;
    const from = headers["agent-id"];
    const messageId = headers["message-id"];
    const run: Running = {
      agentId: served.record.agentId,
      from,
      controller: new AbortController(),
      cancelRequested: false,
      client: served.client,
    };
    this.running.set(messageId, run);
    const a2aMessage = toA2AMessage(body, messageId, { from, principal: headers["principal-id"], messageId });
    const onTask = async (task: A2ATask, restated: boolean) => {
      const firstSight = run.taskId === undefined;
      run.taskId = task.id;
      const state = shortState(task.status.state);
      await this.links.save({
        agentId: served.record.agentId,
        from,
        messageId,
        taskId: task.id,
        ...(task.contextId ? { contextId: task.contextId } : {}),
        state,
        updatedAt: new Date().toISOString(),
      });
      if (firstSight && run.cancelRequested) await served.client.cancelTask(task.id);
      // A continued task re-announced as it was is no news to the requester.
      if (!restated)
        await this.#tell(served, from, A2AMethods.status, { messageId, ...taskRef(task), state });
    };
    // Interim status text and artifacts, numbered so that the requester can put them in order; a
    // chatty agent does not flood it (the answer carries the artifacts whole anyway).
    let seq = 0;
    const onInterim = async (interim: Interim) => {
      const { maxProgress } = this.options;
      if (seq === maxProgress) {
        this.logger.warn(
          { agent: served.record.agentId, messageId },
          `A2A agent sent more than ${maxProgress} updates: the rest are left out of agent.a2a.progress`,
        );
      }
      if (++seq > maxProgress) return;
      await this.#tell(served, from, A2AMethods.progress, {
        messageId,
        ...taskRef(interim.task),
        seq,
        ...interimBody(interim),
      });
    };
    let outcome: RunOutcome | undefined;
    for (let attempt = 1; outcome === undefined; attempt++) {
      try {
        outcome = await runExchange(served.client, served.record.streaming, a2aMessage, {
          onTask,
          onInterim,
          ...(body.taskId !== undefined && { continues: body.taskId }),
          signal: run.controller.signal,
        });
      } catch (err) {
        // Only a call that never reached the agent is repeated: a task it started is not run twice.
        const unreachable =
          err instanceof A2AFailure && err.kind === "unreachable" && run.taskId === undefined;
        if (!unreachable || attempt >= this.options.attempts) {
          if (err instanceof A2AFailure) Object.assign(err, { attempts: attempt });
          throw err;
        }
        await sleep(this.options.retryDelayMs * 2 ** (attempt - 1), undefined, {
          signal: run.controller.signal,
        });
      }
    }
    if (outcome.kind === "message") return messageBody(outcome.message);
    return this.taskOutcome(served, outcome.task);
  }

  /**
   * A notification to the requester, while it is connected: news of a running exchange is for the
   * session waiting for its answer (like an A2A stream, which ends with its client). A requester
   * that has gone would only pile them up in its inbox; it gets the answer, which carries the final
   * state and every artifact, and `agent.a2a.task` tells the state any time. One that fails is
   * logged (the answer still comes).
   */
  async #tell(served: Served, to: string, method: string, body: Record<string, unknown>): Promise<void> {
    if (!(await this.options.connected(to).catch(() => true))) {
      this.logger.debug({ to, method }, "A2A notification not sent: the requester is not connected");
      return;
    }
    await this.options
      .notify(served, to, method, body)
      .catch((err: unknown) =>
        this.logger.warn({ err: (err as Error).message, method }, "A2A notification to the requester failed"),
      );
  }

  private taskOutcome(served: Served, task: A2ATask): Record<string, unknown> {
    const body = taskBody(task);
    const state = shortState(task.status.state);
    const said = typeof body.text === "string" && body.text ? `: ${body.text}` : "";
    if (state === "canceled")
      throw new AcpError(
        "Cancelled",
        `the A2A task ${task.id} at ${served.record.agentId} was canceled${said}`,
        { a2a: body },
      );
    if (state === "failed" || state === "rejected") {
      throw new AcpError(
        "InternalError",
        `the A2A task ${task.id} at ${served.record.agentId} ended ${state}${said}`,
        { a2a: body },
      );
    }
    return body;
  }

  private async status(served: Served, from: string, rawBody: Record<string, unknown>) {
    const ref = parseBody(TaskReference, rawBody, A2AMethods.task);
    const link = await this.links.find(served.record.agentId, from, ref);
    return taskBody(await served.client.getTask(link.taskId));
  }

  /** Any failure as the ACP error the caller gets; an unreachable agent also dead-letters the request. */
  private failure(served: Served, err: unknown): Answer {
    const { agentId, endpoint } = served.record;
    if (err instanceof AcpError) return { error: err };
    if (!(err instanceof A2AFailure)) {
      this.logger.error({ agent: agentId, err: (err as Error).message }, "A2A exchange failed");
      return { error: new AcpError("InternalError", `the A2A bridge failed calling ${agentId}`) };
    }
    const attempts = (err as A2AFailure & { attempts?: number }).attempts ?? 1;
    const a2a = { failure: err.kind, endpoint, ...(err.remote ? { error: err.remote } : {}) };
    if (err.kind === "unreachable") {
      const error = new AcpError(
        "InternalError",
        `${err.message}; tried ${attempts} time(s). The request is kept at the gateway as failed (dead letter); send it again once ${agentId} is back`,
        { a2a: { ...a2a, attempts } },
      );
      return { error, deadLetter: `A2A agent unreachable: ${err.message}` };
    }
    if (err.kind === "remote-error" || err.kind === "refused")
      return { error: new AcpError("InternalError", `${agentId}: ${err.message}`, { a2a }) };
    return {
      error: new AcpError("InternalError", `${agentId} answered something that is not A2A: ${err.message}`, {
        a2a,
      }),
    };
  }
}
