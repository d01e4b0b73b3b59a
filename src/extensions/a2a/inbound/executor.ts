/**
 * The A2A side of one published ACP agent: each A2A message becomes a signed `agent.request` from
 * the caller's bridge identity to the agent, and the agent's signed `agent.response` becomes the
 * task's artifact. States: SUBMITTED when the task is made, WORKING once the request is relayed to
 * a connected agent, COMPLETED with the answer, FAILED with the agent's error, CANCELED on
 * CancelTask. A target that is offline leaves the task SUBMITTED with a message saying so (a
 * blocking SendMessage returns then): the request waits in the gateway's queue and the task
 * completes when the agent answers; GetTask and push notifications show it.
 */
import { randomUUID } from "node:crypto";
import {
  type Artifact,
  type Message,
  Part,
  Role,
  type Task,
  type TaskArtifactUpdateEvent,
  TaskState,
  type TaskStatusUpdateEvent,
} from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutionEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type ServerCallContext,
} from "@a2a-js/sdk/server";
import type { PresenceTracker } from "../../../gateway/presence.js";
import { AcpError, domainOf } from "../../../protocol/index.js";
import type { CallerAgents } from "./caller-agents.js";

/** Methods of the notifications between bridge and target (docs/a2a.md). */
export const A2AAcpMethods = {
  /** target → bridge `{ taskId, text }`: a progress message, streamed as a WORKING status. */
  progress: "agent.a2a.progress",
  /** bridge → target `{ taskId }`: the A2A client canceled; stop working on it. */
  cancel: "agent.a2a.cancel",
} as const;

/** A task whose ACP request is under way. `emit` goes to the event bus, or to the store once the executor returned. */
export interface RunningTask {
  target: string;
  contextId: string;
  controller: AbortController;
  emit(event: AgentExecutionEvent): void;
  /** Tells the target to stop (best effort). */
  cancelAtTarget(): void;
}

export interface ExecutorDeps {
  target: string;
  bridge: CallerAgents;
  presence: PresenceTracker;
  running: Map<string, RunningTask>;
  /** Persists (and pushes) an event of a task whose executor already returned. */
  late(taskId: string, context: ServerCallContext, event: AgentExecutionEvent): Promise<void>;
  /** The SDK made this task for this call: there is no stored record of it yet. */
  isNew(taskId: string, context: ServerCallContext): void;
  requestTimeoutMs: number;
  onError(err: unknown, taskId: string): void;
}

export class AcpTaskExecutor implements AgentExecutor {
  constructor(private readonly deps: ExecutorDeps) {}

  async execute(rc: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { target, running } = this.deps;
    const { taskId, contextId } = rc;
    const caller = rc.context.user?.userName ?? "anonymous";
    const say = (state: TaskState, text?: string) => statusEvent(taskId, contextId, state, text);
    if (!rc.task) this.deps.isNew(taskId, rc.context);
    bus.publish(
      AgentEvent.task({
        id: taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        artifacts: rc.task?.artifacts ?? [],
        history: rc.task?.history ?? [rc.userMessage],
        metadata: {},
      }),
    );
    const controller = new AbortController();
    let emit = (event: AgentExecutionEvent) => bus.publish(event);
    const agent = await this.deps.bridge.agentFor(caller);
    running.set(taskId, {
      target,
      contextId,
      controller,
      emit: (event) => emit(event),
      cancelAtTarget: () =>
        void agent.notify(target, { taskId }, { method: A2AAcpMethods.cancel }).catch(() => undefined),
    });
    // An agent of another domain (named by its address): its presence is its own gateway's; the request waits there if need be.
    const offline =
      domainOf(target) === undefined && (await this.deps.presence.get(target)).state === "offline";
    const reply = agent.request(target, acpBodyOf(rc), {
      signal: controller.signal,
      timeoutMs: this.deps.requestTimeoutMs,
      summary: `A2A message ${rc.userMessage.messageId} from ${caller} (task ${taskId}).`,
    });
    const settle = async () => {
      try {
        const body = await reply;
        emit(AgentEvent.artifactUpdate(artifactEvent(taskId, contextId, target, body)));
        emit(say(TaskState.TASK_STATE_COMPLETED));
      } catch (err) {
        if (controller.signal.aborted) return; // canceled: the CANCELED status is already there
        emit(say(TaskState.TASK_STATE_FAILED, failureText(target, err)));
      } finally {
        running.delete(taskId);
      }
    };
    if (offline) {
      emit(
        say(
          TaskState.TASK_STATE_SUBMITTED,
          `${target} is offline: the signed request waits in the gateway's queue and is delivered when ` +
            "it connects. Follow the task with GetTask or a push notification config.",
        ),
      );
      emit = (event) =>
        void this.deps.late(taskId, rc.context, event).catch((err) => this.deps.onError(err, taskId));
      void settle();
      return;
    }
    emit(say(TaskState.TASK_STATE_WORKING, `sent to ${target} as a signed ACP agent.request`));
    await settle();
  }

  /** Only called while the bus is live; the store hook (onCanceled) stops the ACP request. */
  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    const contextId = this.deps.running.get(taskId)?.contextId ?? "";
    bus.publish(
      statusEvent(
        taskId,
        contextId,
        TaskState.TASK_STATE_CANCELED,
        `canceled by the A2A client; ${this.deps.target} was told to stop`,
      ),
    );
  }
}

const now = () => new Date().toISOString();

const textPart = (text: string, mediaType = "text/plain"): Part => ({
  content: { $case: "text", value: text },
  mediaType,
  filename: "",
  metadata: undefined,
});

function agentMessage(taskId: string, contextId: string, text: string): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export function statusEvent(
  taskId: string,
  contextId: string,
  state: TaskState,
  text?: string,
): AgentExecutionEvent {
  const update: TaskStatusUpdateEvent = {
    taskId,
    contextId,
    status: {
      state,
      message: text === undefined ? undefined : agentMessage(taskId, contextId, text),
      timestamp: now(),
    },
    metadata: {},
  };
  return AgentEvent.statusUpdate(update);
}

/** The ACP request body: the text parts joined (what most agents read), every part as A2A JSON, and the A2A ids. */
export function acpBodyOf(rc: RequestContext): Record<string, unknown> {
  const { parts, messageId } = rc.userMessage;
  const text = parts.flatMap((p) => (p.content?.$case === "text" ? [p.content.value] : [])).join("\n");
  return {
    ...(text !== "" && { text }),
    parts: parts.map((p) => Part.toJSON(p)),
    a2a: { taskId: rc.taskId, contextId: rc.contextId, messageId },
  };
}

/** `{ text }` alone becomes a text part; any other body a JSON data part. */
export function artifactEvent(
  taskId: string,
  contextId: string,
  target: string,
  body: Record<string, unknown>,
): TaskArtifactUpdateEvent {
  const keys = Object.keys(body);
  const onlyText = keys.length === 1 && typeof body.text === "string";
  const artifact: Artifact = {
    artifactId: randomUUID(),
    name: "response",
    description: `the signed agent.response of ${target}`,
    parts: onlyText
      ? [textPart(body.text as string)]
      : [
          {
            content: { $case: "data", value: body },
            mediaType: "application/json",
            filename: "",
            metadata: undefined,
          },
        ],
    metadata: { acpAgent: target },
    extensions: [],
  };
  return { taskId, contextId, artifact, append: false, lastChunk: true, metadata: {} };
}

export function failureText(target: string, err: unknown): string {
  if (err instanceof AcpError) {
    if (err.kind === "Timeout") return `${target} did not answer in time (${err.message})`;
    return `${target} answered with an error: ${err.message} [${err.code} ${err.kind}]`;
  }
  return `the request to ${target} failed: ${(err as Error).message}`;
}

export const isTerminal = (task: Task | undefined): boolean =>
  task?.status !== undefined &&
  [
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
  ].includes(task.status.state);
