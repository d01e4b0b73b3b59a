import { setTimeout as sleep } from "node:timers/promises";
import {
  type A2AClient,
  A2AFailure,
  type A2AMessage,
  type A2ATask,
  INTERRUPTED_STATES,
  type StreamEvent,
  TERMINAL_STATES,
} from "./a2a-client.js";

export type RunOutcome = { kind: "message"; message: A2AMessage } | { kind: "task"; task: A2ATask };

export interface RunHooks {
  /** The task exists (its id is known) or changed state. */
  onTask(task: A2ATask): void | Promise<void>;
  signal?: AbortSignal;
}

const isOver = (task: A2ATask) =>
  TERMINAL_STATES.has(task.status.state) || INTERRUPTED_STATES.has(task.status.state);

/**
 * One A2A exchange until it is over for now (a message, or a task that ended or waits for input).
 * Streaming agents: `SendStreamingMessage`, folding status and artifact updates into the task.
 * Others: `SendMessage` returning at once, then `GetTask` at a widening interval, so the task id is
 * known (and cancellable) while the agent works.
 */
export async function runExchange(
  client: A2AClient,
  streaming: boolean,
  message: Record<string, unknown>,
  hooks: RunHooks,
): Promise<RunOutcome> {
  return streaming ? runStreaming(client, message, hooks) : runPolling(client, message, hooks);
}

async function runStreaming(
  client: A2AClient,
  message: Record<string, unknown>,
  hooks: RunHooks,
): Promise<RunOutcome> {
  let task: A2ATask | undefined;
  for await (const event of client.streamMessage(message, hooks.signal)) {
    if ("message" in event && !task) return { kind: "message", message: event.message };
    const next = fold(task, event);
    if (!next)
      throw new A2AFailure("bad-response", "SendStreamingMessage: an update arrived before the task");
    const changed = next.status.state !== task?.status.state;
    task = next;
    if (changed) await hooks.onTask(task);
    if (isOver(task)) return { kind: "task", task };
  }
  if (!task)
    throw new A2AFailure("bad-response", "SendStreamingMessage: the stream ended without a task or message");
  return { kind: "task", task };
}

function fold(task: A2ATask | undefined, event: StreamEvent): A2ATask | undefined {
  if ("task" in event) return event.task;
  if (!task) return undefined;
  if ("statusUpdate" in event) return { ...task, status: event.statusUpdate.status };
  if ("artifactUpdate" in event) {
    const { artifact, append } = event.artifactUpdate;
    const artifacts = [...(task.artifacts ?? [])];
    const at = artifacts.findIndex((a) => a.artifactId === artifact.artifactId);
    const existing = at === -1 ? undefined : artifacts[at];
    const merged =
      append && existing ? { ...existing, parts: [...existing.parts, ...artifact.parts] } : artifact;
    if (at === -1) artifacts.push(merged);
    else artifacts[at] = merged;
    return { ...task, artifacts };
  }
  return task;
}

async function runPolling(
  client: A2AClient,
  message: Record<string, unknown>,
  hooks: RunHooks,
): Promise<RunOutcome> {
  const first = await client.sendMessage(message, true, hooks.signal);
  if ("message" in first) return { kind: "message", message: first.message };
  let task = first.task;
  await hooks.onTask(task);
  for (let delay = 20; !isOver(task); delay = Math.min(delay * 2, 1000)) {
    await sleep(delay, undefined, hooks.signal ? { signal: hooks.signal } : {});
    const next = await client.getTask(task.id);
    if (next.status.state !== task.status.state) await hooks.onTask(next);
    task = next;
  }
  return { kind: "task", task };
}
