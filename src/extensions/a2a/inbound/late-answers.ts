/**
 * Tasks whose ACP request went out before this gateway (re)started: nobody in this process awaits
 * their answer, but the answer is durable in the bridge agent's broker inbox. At the first A2A
 * request after start (until then the bridge stays inert), the bridge agents of those tasks' callers
 * are connected; each answer that arrives for one of them completes (or fails) the stored task and
 * pushes the event, exactly as a live task would. Only tasks this bridge (this data directory) sent
 * are taken: on a shared NATS another gateway's bridge agents receive the answers of its own tasks.
 */
import { type Task, TaskState } from "@a2a-js/sdk";
import { AgentEvent, type AgentExecutionEvent, type ServerCallContext } from "@a2a-js/sdk/server";
import { errorFromObject } from "../../../client/errors.js";
import type { InboundMessage } from "../../../client/types.js";
import type { GatewayContext } from "../../../gateway/context.js";
import type { CallerAgents } from "./caller-agents.js";
import { ownerContext, type StoredTask, sweepTasks, TASK_RETENTION_MS } from "./durable-stores.js";
import { artifactEvent, failureText, statusEvent } from "./executor.js";

export interface LateAnswerDeps {
  ctx: GatewayContext;
  bridge: CallerAgents;
  /** When this process started: tasks last saved before were sent by an earlier run. */
  startedAt: Date;
  /** Persists an event of a task of `agentId` and pushes it (the endpoint's late path). */
  apply(
    agentId: string,
    taskId: string,
    context: ServerCallContext,
    event: AgentExecutionEvent,
  ): Promise<void>;
}

export class LateAnswers {
  /** Task id → the stored task whose answer an earlier run was waiting for. */
  readonly #orphans = new Map<string, StoredTask>();
  #resumed: Promise<void> | undefined;
  #sweeping: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(private readonly deps: LateAnswerDeps) {}

  /** Once: finds the earlier run's unfinished tasks and connects their callers' bridge agents. */
  resume(): Promise<void> {
    this.#resumed ??= this.#resume().catch((err: unknown) =>
      this.deps.ctx.logger.warn({ err: (err as Error).message }, "A2A: resuming earlier tasks failed"),
    );
    return this.#resumed;
  }

  /** Stops the daily sweep of finished tasks. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#sweeping);
  }

  /** A task canceled while an earlier run's request is out: its answer is no longer wanted. */
  forget(taskId: string): void {
    this.#orphans.delete(taskId);
  }

  /** Every response of a bridge agent; only answers to an earlier run's requests are taken here. */
  async onResponse(message: InboundMessage, caller: string): Promise<void> {
    // The first request after a restart starts `resume` before any bridge agent connects.
    if (this.#resumed) await this.#resumed;
    if (this.#orphans.size === 0 || message.id === null || message.id === undefined) return;
    // The request this answers: sent by the bridge agent the answer is addressed to, under its id.
    const request = await this.deps.ctx.broker.get({
      from: message.headers["recipient-id"],
      id: String(message.id),
    });
    if (!request?.envelope || request.to !== message.from) return;
    const taskId = taskIdOf(request.envelope);
    const stored = taskId === undefined ? undefined : this.#orphans.get(taskId);
    if (!taskId || !stored || stored.owner !== caller || stored.agentId !== message.from) return;
    this.#orphans.delete(taskId);
    const { contextId } = stored.task as { contextId: string };
    const context = ownerContext(stored);
    const events: AgentExecutionEvent[] = message.error
      ? [
          statusEvent(
            taskId,
            contextId,
            TaskState.TASK_STATE_FAILED,
            failureText(stored.agentId, errorFromObject(message.error)),
          ),
        ]
      : [
          AgentEvent.artifactUpdate(artifactEvent(taskId, contextId, stored.agentId, message.body ?? {})),
          statusEvent(taskId, contextId, TaskState.TASK_STATE_COMPLETED),
        ];
    for (const event of events) await this.deps.apply(stored.agentId, taskId, context, event);
  }

  async #resume(): Promise<void> {
    const origin = await this.deps.bridge.installId();
    const callers = new Set<string>();
    // Also the time to forget finished tasks past their retention (and daily from now on).
    const sweep = () => sweepTasks(this.deps.ctx.broker, new Date(Date.now() - TASK_RETENTION_MS));
    if (!this.#closed) {
      this.#sweeping = setInterval(() => void sweep().catch(() => undefined), 24 * 3600_000);
      this.#sweeping.unref();
    }
    for (const stored of await sweep()) {
      if (stored.origin !== origin || new Date(stored.savedAt) >= this.deps.startedAt) continue;
      this.#orphans.set((stored.task as Pick<Task, "id">).id, stored);
      callers.add(stored.owner);
    }
    for (const caller of callers) {
      const agent = await this.deps.bridge.agentFor(caller);
      for (const [taskId, stored] of this.#orphans) {
        // The request goes out only once the handshake is done: without one it was never sent.
        if (stored.owner !== caller || agent.handshakeState(stored.agentId) === "established") continue;
        this.#orphans.delete(taskId);
        const text =
          `the gateway restarted before ${stored.agentId} answered the bridge's handshake, so the ` +
          "request was never sent; send the message again";
        const { contextId } = stored.task as { contextId: string };
        await this.deps.apply(
          stored.agentId,
          taskId,
          ownerContext(stored),
          statusEvent(taskId, contextId, TaskState.TASK_STATE_FAILED, text),
        );
      }
    }
    if (callers.size > 0) {
      this.deps.ctx.logger.info(
        { tasks: this.#orphans.size, callers: callers.size },
        "A2A: waiting for the answers of tasks from before the restart",
      );
    }
  }
}

function taskIdOf(envelope: string): string | undefined {
  try {
    const body = (JSON.parse(envelope) as { params?: { body?: { a2a?: { taskId?: unknown } } } }).params
      ?.body;
    return typeof body?.a2a?.taskId === "string" ? body.a2a.taskId : undefined;
  } catch {
    return undefined;
  }
}
