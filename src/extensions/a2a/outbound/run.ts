import { setTimeout as sleep } from "node:timers/promises";
import {
  type A2AClient,
  A2AFailure,
  type A2AMessage,
  type A2ATask,
  type Artifact,
  INTERRUPTED_STATES,
  type StreamEvent,
  TERMINAL_STATES,
} from "./a2a-client.js";

export type RunOutcome = { kind: "message"; message: A2AMessage } | { kind: "task"; task: A2ATask };

/** What the agent said while it works: an interim status message, or an artifact (or a chunk of one). */
export type Interim =
  | { kind: "status"; task: A2ATask; message: A2AMessage }
  | { kind: "artifact"; task: A2ATask; artifact: Artifact; append: boolean; lastChunk: boolean };

export interface RunHooks {
  /**
   * The task exists (its id is known) or changed state. `restated`: its first sight is the task
   * this message continues, re-announced in its previous (waiting) state.
   */
  onTask(task: A2ATask, restated: boolean): void | Promise<void>;
  /** Interim status text and artifacts, as they arrive (before the outcome, which carries them too). */
  onInterim?(interim: Interim): void | Promise<void>;
  /**
   * The message continues this task (an answer to `input-required`…): the task's first sight is
   * the agent re-announcing it as it was, not its answer (the A2A SDK's agent contract).
   */
  continues?: string;
  signal?: AbortSignal;
}

/**
 * When one exchange is over for now: the task ended, or it waits for the client again. A task the
 * message continues is first seen in its previous (waiting) status: that status does not count.
 */
class Progress {
  #stale: string | undefined;

  constructor(private readonly continues: string | undefined) {}

  /** Notes the first sight of the task; true when it is the continued task's previous status. */
  first(task: A2ATask): boolean {
    if (task.id !== this.continues || !INTERRUPTED_STATES.has(task.status.state)) return false;
    this.#stale = statusKey(task);
    return true;
  }

  isOver(task: A2ATask): boolean {
    if (TERMINAL_STATES.has(task.status.state)) return true;
    return INTERRUPTED_STATES.has(task.status.state) && statusKey(task) !== this.#stale;
  }
}

const statusKey = (task: A2ATask) =>
  JSON.stringify([task.status.state, task.status.timestamp, task.status.message?.messageId]);

/**
 * One A2A exchange until it is over for now (a message, or a task that ended or waits for input).
 * Streaming agents: `SendStreamingMessage`, folding status and artifact updates into the task.
 * Others: `SendMessage` returning at once, then `GetTask` at a widening interval, so the task id is
 * known (and cancellable) while the agent works. Either way, interim status messages and artifacts
 * go to `onInterim` as they are seen.
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
  const progress = new Progress(hooks.continues);
  let task: A2ATask | undefined;
  for await (const event of client.streamMessage(message, hooks.signal)) {
    if ("message" in event && !task) return { kind: "message", message: event.message };
    const next = fold(task, event);
    if (!next)
      throw new A2AFailure("bad-response", "SendStreamingMessage: an update arrived before the task");
    const restated = !task && progress.first(next);
    const changed = next.status.state !== task?.status.state;
    task = next;
    if (changed) await hooks.onTask(task, restated);
    if (progress.isOver(task)) return { kind: "task", task };
    if ("statusUpdate" in event && event.statusUpdate.status.message)
      await hooks.onInterim?.({ kind: "status", task, message: event.statusUpdate.status.message });
    if ("artifactUpdate" in event) {
      const { artifact, append, lastChunk } = event.artifactUpdate;
      await hooks.onInterim?.({
        kind: "artifact",
        task,
        artifact,
        append: append === true,
        lastChunk: lastChunk === true,
      });
    }
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
  const progress = new Progress(hooks.continues);
  const first = await client.sendMessage(message, true, hooks.signal);
  if ("message" in first) return { kind: "message", message: first.message };
  let task = first.task;
  await hooks.onTask(task, progress.first(task));
  for (let delay = 20; !progress.isOver(task); delay = Math.min(delay * 2, 1000)) {
    await sleep(delay, undefined, hooks.signal ? { signal: hooks.signal } : {});
    const next = await client.getTask(task.id);
    if (next.status.state !== task.status.state) await hooks.onTask(next, false);
    if (!progress.isOver(next)) for (const interim of seenSince(task, next)) await hooks.onInterim?.(interim);
    task = next;
  }
  return { kind: "task", task };
}

/** What a poll shows that the previous one did not: a new status message, new artifacts or parts. */
function seenSince(before: A2ATask, after: A2ATask): Interim[] {
  const seen: Interim[] = [];
  const message = after.status.message;
  if (message && message.messageId !== before.status.message?.messageId)
    seen.push({ kind: "status", task: after, message });
  for (const artifact of after.artifacts ?? []) {
    const earlier = before.artifacts?.find((a) => a.artifactId === artifact.artifactId);
    const known = earlier?.parts.length ?? 0;
    if (artifact.parts.length <= known) continue;
    const parts = artifact.parts.slice(known);
    seen.push({
      kind: "artifact",
      task: after,
      artifact: { ...artifact, parts },
      append: earlier !== undefined,
      lastChunk: false,
    });
  }
  return seen;
}
