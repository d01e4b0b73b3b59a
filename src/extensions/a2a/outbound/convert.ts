import { z } from "zod";
import { AcpError, problemsOf } from "../../../protocol/index.js";
import { A2A_PROGRESS_METHOD, A2A_STATUS_METHOD } from "../../../wire/a2a-outbound.js";
import { type A2AMessage, type A2ATask, type Artifact, Part, type TaskState } from "./a2a-client.js";
import type { Interim } from "./run.js";

/**
 * What an ACP agent sends to an A2A agent (the body of an ordinary `agent.request`), and what it gets
 * back. The request's message-id becomes the A2A messageId, so a redelivered request is recognisable.
 */
export const OutboundRequestBody = z
  .object({
    text: z.string().min(1, "must not be empty").optional(),
    parts: z.array(Part).min(1, "must not be empty").optional(),
    data: z.record(z.string(), z.unknown()).optional(),
    /** Continue an A2A conversation or task (from an earlier response's `a2a` member). */
    contextId: z.string().min(1).optional(),
    taskId: z.string().min(1).optional(),
  })
  .refine((b) => b.text !== undefined || b.parts !== undefined || b.data !== undefined, {
    message: "give text, parts or data",
    path: ["text"],
  });
export type OutboundRequestBody = z.infer<typeof OutboundRequestBody>;

/** `agent.a2a.cancel` (notification) and `agent.a2a.task` (request): name the task, or the request that started it. */
export const TaskReference = z
  .object({ taskId: z.string().min(1).optional(), messageId: z.string().min(1).optional() })
  .refine((b) => b.taskId !== undefined || b.messageId !== undefined, {
    message: "give taskId or messageId",
    path: ["taskId"],
  });
export type TaskReference = z.infer<typeof TaskReference>;

export const A2AMethods = {
  cancel: "agent.a2a.cancel",
  task: "agent.a2a.task",
  /** Sent by the bridge to the requester when the A2A task's state changes. */
  status: A2A_STATUS_METHOD,
  /** Sent by the bridge to the requester for each interim status message and artifact update. */
  progress: A2A_PROGRESS_METHOD,
} as const;

export function parseBody<T>(schema: z.ZodType<T>, body: unknown, method: string): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const problems = problemsOf(parsed.error, "/params/body");
    throw new AcpError(
      "InvalidParams",
      `invalid ${method} body for an A2A agent: ${problems[0]?.path} ${problems[0]?.message}`,
      {
        problems,
      },
    );
  }
  return parsed.data;
}

export function toA2AMessage(body: OutboundRequestBody, messageId: string, acp: Record<string, string>) {
  const parts: Part[] = [
    ...(body.text !== undefined ? [{ text: body.text }] : []),
    ...(body.parts ?? []),
    ...(body.data !== undefined ? [{ data: body.data, mediaType: "application/json" }] : []),
  ];
  return {
    messageId,
    role: "ROLE_USER",
    parts,
    ...(body.contextId ? { contextId: body.contextId } : {}),
    ...(body.taskId ? { taskId: body.taskId } : {}),
    metadata: { acp },
  };
}

/** `TASK_STATE_INPUT_REQUIRED` → `input-required`. */
export function shortState(state: TaskState): string {
  return state
    .replace(/^TASK_STATE_/, "")
    .toLowerCase()
    .replace(/_/g, "-");
}

function textOf(parts: readonly Part[] | undefined): string {
  return (parts ?? []).flatMap((p) => (p.text !== undefined ? [p.text] : [])).join("");
}

/** `{ taskId, contextId? }` of a task, as the notifications to the requester name it. */
export function taskRef(task: A2ATask): { taskId: string; contextId?: string } {
  return { taskId: task.id, ...(task.contextId ? { contextId: task.contextId } : {}) };
}

/**
 * The body of an `agent.a2a.progress` (beside messageId, taskId, contextId, seq): `text`, what a
 * person reads, and the A2A object it comes from: the status `message` (with the task's `state`),
 * or the `artifact` (the new parts only when `append`).
 */
export function interimBody(interim: Interim): Record<string, unknown> {
  if (interim.kind === "status") {
    return {
      state: shortState(interim.task.status.state),
      text: textOf(interim.message.parts),
      message: interim.message,
    };
  }
  const { artifact, append, lastChunk } = interim;
  return { text: textOf(artifact.parts), artifact, append, lastChunk };
}

/** The ACP response body for an A2A answer that is a message. */
export function messageBody(message: A2AMessage): Record<string, unknown> {
  return {
    text: textOf(message.parts),
    a2a: { kind: "message", ...(message.contextId ? { contextId: message.contextId } : {}) },
    message,
  };
}

/** The ACP response body for an A2A task: its state, the agent's last status text, the artifacts. */
export function taskBody(task: A2ATask): Record<string, unknown> {
  const artifacts: Artifact[] = task.artifacts ?? [];
  const texts = [textOf(task.status.message?.parts), ...artifacts.map((a) => textOf(a.parts))].filter(
    Boolean,
  );
  return {
    text: texts.join("\n"),
    a2a: { kind: "task", ...taskRef(task), state: shortState(task.status.state) },
    ...(task.status.message ? { message: task.status.message } : {}),
    artifacts,
  };
}
