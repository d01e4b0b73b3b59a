/**
 * One A2A SDK request handler per published ACP agent (made on first use): the SDK's own
 * DefaultRequestHandler with its task lifecycle, streaming, resubscription and push notifications,
 * over our executor. Tasks are scoped to the calling client (the SDK's owner scoping by user).
 */
import { type StreamResponse, TaskState } from "@a2a-js/sdk";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import {
  type AgentExecutionEvent,
  DefaultRequestHandler,
  JsonRpcTransportHandler,
  ResultManager,
  type ServerCallContext,
  type TaskStore,
} from "@a2a-js/sdk/server";
import type { GatewayContext } from "../../../gateway/context.js";
import { reachableAgent } from "../../../gateway/addressing.js";
import type { AgentRecord } from "../../../gateway/registry.js";
import type { SecretKeeper } from "../../../gateway/secrets.js";
import type { CallerAgents } from "./caller-agents.js";
import { agentCardOf } from "./card.js";
import { KvPushNotificationStore, KvTaskStore, PushConfigs, TaskRecords } from "./durable-stores.js";
import { A2AAcpMethods, AcpTaskExecutor, isTerminal, type RunningTask } from "./executor.js";
import { LateAnswers } from "./late-answers.js";
import { GatewayPushSender } from "./push-sender.js";

export interface AgentEndpoint {
  transport: JsonRpcTransportHandler;
  legacy: LegacyJsonRpcTransportHandler;
  /** Persists and pushes an event of a task whose executor already returned. */
  late(taskId: string, context: ServerCallContext, event: AgentExecutionEvent): Promise<void>;
  /** The caller's task exists and still waits for the agent's answer. */
  unfinished(taskId: string, context: ServerCallContext): Promise<boolean>;
}

export interface EndpointOptions {
  bridge: CallerAgents;
  /** The gateway's URL as A2A clients see it (the capabilities card is built with it). */
  publicUrl(): string;
  requestTimeoutMs: number;
  pushTimeoutMs: number;
  /** Seals push configs' tokens and credentials at rest (without it they are stored as given). */
  secrets?: SecretKeeper;
}

/** Tells `onCanceled` when a task is stored CANCELED, however it got there (live bus or not). */
class WatchedTaskStore implements TaskStore {
  constructor(
    private readonly inner: TaskStore,
    private readonly onCanceled: (taskId: string, context: ServerCallContext) => void,
  ) {}
  async save(...args: Parameters<TaskStore["save"]>): Promise<void> {
    const [task, context] = args;
    if (task.status?.state !== TaskState.TASK_STATE_CANCELED) return this.inner.save(...args);
    // The SDK saves a canceled task more than once: the change is what counts.
    const before = (await this.inner.load(task.id, context))?.status?.state;
    await this.inner.save(...args);
    if (before !== TaskState.TASK_STATE_CANCELED) this.onCanceled(task.id, context);
  }
  load(...args: Parameters<TaskStore["load"]>) {
    return this.inner.load(...args);
  }
  list(...args: Parameters<TaskStore["list"]>) {
    return this.inner.list(...args);
  }
}

export class AgentEndpoints {
  readonly running = new Map<string, RunningTask>();
  readonly lateAnswers: LateAnswers;
  readonly #endpoints = new Map<string, AgentEndpoint>();
  /** Shared by every agent's stores: one cache and one watch per bucket. */
  readonly #tasks: TaskRecords;
  readonly #pushes: PushConfigs;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly options: EndpointOptions,
  ) {
    this.#tasks = new TaskRecords(ctx.broker);
    this.#pushes = new PushConfigs(ctx.broker, options.secrets);
    this.lateAnswers = new LateAnswers({
      ctx,
      bridge: options.bridge,
      startedAt: new Date(),
      apply: async (agentId, taskId, context, event) => {
        const agent = await reachableAgent(agentId, ctx.registry);
        if (agent) await this.for(agent.record).late(taskId, context, event);
      },
    });
  }

  get activeTasks(): number {
    return this.running.size;
  }

  for(record: AgentRecord): AgentEndpoint {
    let endpoint = this.#endpoints.get(record.agentId);
    if (!endpoint) {
      endpoint = this.#create(record);
      this.#endpoints.set(record.agentId, endpoint);
    }
    return endpoint;
  }

  /** Stops waiting for every ACP answer (the requests themselves stay persisted at the gateway). */
  close(): void {
    this.lateAnswers.close();
    this.#tasks.close();
    this.#pushes.close();
    for (const task of this.running.values()) task.controller.abort();
    this.running.clear();
  }

  #create(record: AgentRecord): AgentEndpoint {
    const durable = new KvTaskStore(this.#tasks, record.agentId, () => this.options.bridge.installId());
    const store = new WatchedTaskStore(durable, (taskId, context) => {
      const running = this.running.get(taskId);
      if (running) {
        this.running.delete(taskId);
        running.controller.abort();
        running.cancelAtTarget();
        return;
      }
      // Sent by an earlier run or another gateway: tell the target through this caller's bridge agent.
      this.lateAnswers.forget(taskId);
      const caller = context.user?.userName ?? "anonymous";
      void this.options.bridge
        .agentFor(caller)
        .then((agent) => agent.notify(record.agentId, { taskId }, { method: A2AAcpMethods.cancel }))
        .catch((err: unknown) =>
          this.ctx.logger.warn(
            { err: (err as Error).message, taskId },
            "A2A: telling the agent of a cancel failed",
          ),
        );
    });
    const pushes = new KvPushNotificationStore(this.#pushes, record.agentId);
    const sender = new GatewayPushSender(this.ctx, pushes, this.options.pushTimeoutMs);
    const late = async (taskId: string, context: ServerCallContext, event: AgentExecutionEvent) => {
      const stored = await store.load(taskId, context);
      if (isTerminal(stored)) {
        this.ctx.logger.info(
          { taskId, agent: record.agentId, state: stored?.status?.state },
          "A2A: an update came for a task already final (canceled, or answered); it is ignored",
        );
        return;
      }
      await new ResultManager(store, context).processEvent(event);
      await sender.send(streamResponseOf(event), context, await store.load(taskId, context));
    };
    const executor = new AcpTaskExecutor({
      target: record.agentId,
      bridge: this.options.bridge,
      presence: this.ctx.presence,
      running: this.running,
      late,
      isNew: (taskId, context) => durable.isNew(taskId, context),
      requestTimeoutMs: this.options.requestTimeoutMs,
      onError: (err, taskId) =>
        this.ctx.logger.warn({ err: (err as Error).message, taskId }, "A2A task update failed"),
    });
    // The card here decides capabilities only; the one served is built per request with the public URL.
    const handler = new DefaultRequestHandler(
      agentCardOf(record, this.options.publicUrl()),
      store,
      executor,
      undefined,
      pushes,
      sender,
    );
    return {
      transport: new JsonRpcTransportHandler(handler),
      legacy: new LegacyJsonRpcTransportHandler(handler),
      late,
      unfinished: async (taskId, context) => {
        const task = await store.load(taskId, context);
        return task !== undefined && !isTerminal(task);
      },
    };
  }
}

function streamResponseOf(event: AgentExecutionEvent): StreamResponse {
  switch (event.kind) {
    case "message":
      return { payload: { $case: "message", value: event.data } };
    case "task":
      return { payload: { $case: "task", value: event.data } };
    case "statusUpdate":
      return { payload: { $case: "statusUpdate", value: event.data } };
    case "artifactUpdate":
      return { payload: { $case: "artifactUpdate", value: event.data } };
  }
}
