/**
 * A2A 0.3 agents (a card with `url` and `preferredTransport`, JSON-RPC methods `message/send`…):
 * the bridge speaks 1.0 JSON internally, and translates at the wire. Requests go out in 0.3 shapes
 * (`kind` discriminators, lower-case roles, `blocking`), answers come back in 1.0 shapes
 * (`TASK_STATE_*`, `ROLE_*`, `{ task }` / `{ statusUpdate }`…) to be validated like any 1.0 answer.
 */
import { v1MethodToLegacyJsonRpc } from "@a2a-js/sdk/compat/v0_3";

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

export const legacyMethod = (method: string): string => v1MethodToLegacyJsonRpc(method);

/** 1.0 request params → 0.3 params. */
export function toLegacyParams(method: string, params: Json): Json {
  if (method !== "SendMessage" && method !== "SendStreamingMessage") return params;
  const configuration = params.configuration as { returnImmediately?: boolean } | undefined;
  return {
    message: toLegacyMessage(params.message as Json),
    ...(configuration?.returnImmediately !== undefined && {
      configuration: { blocking: !configuration.returnImmediately },
    }),
  };
}

function toLegacyMessage(message: Json): Json {
  const { role, parts, ...rest } = message;
  return {
    ...rest,
    kind: "message",
    role: role === "ROLE_AGENT" ? "agent" : "user",
    parts: (parts as Json[]).map(toLegacyPart),
  };
}

function toLegacyPart(part: Json): Json {
  const { text, data, url, raw, mediaType, filename, ...rest } = part;
  if (typeof text === "string") return { ...rest, kind: "text", text };
  if (data !== undefined) return { ...rest, kind: "data", data };
  const file = {
    ...(typeof url === "string" ? { uri: url } : { bytes: raw }),
    ...(typeof mediaType === "string" && mediaType !== "" && { mimeType: mediaType }),
    ...(typeof filename === "string" && filename !== "" && { name: filename }),
  };
  return { ...rest, kind: "file", file };
}

/** A 0.3 result (`kind`-tagged) → the 1.0 shape: `{ task }`, `{ message }`, `{ statusUpdate }`, `{ artifactUpdate }`, or a bare task. */
export function fromLegacyResult(method: string, result: unknown): unknown {
  if (!isObject(result)) return result;
  const kind = result.kind;
  if (method === "GetTask" || method === "CancelTask")
    return kind === "task" ? fromLegacyTask(result) : result;
  switch (kind) {
    case "task":
      return { task: fromLegacyTask(result) };
    case "message":
      return { message: fromLegacyMessage(result) };
    case "status-update":
      return {
        statusUpdate: {
          taskId: result.taskId,
          contextId: result.contextId,
          status: fromLegacyStatus(result.status),
        },
      };
    case "artifact-update":
      return {
        artifactUpdate: {
          taskId: result.taskId,
          contextId: result.contextId,
          artifact: fromLegacyArtifact(result.artifact),
          append: result.append,
          lastChunk: result.lastChunk,
        },
      };
    default:
      return result; // not 0.3 either: the 1.0 validation names what is wrong
  }
}

function fromLegacyTask(task: Json): Json {
  const { kind: _kind, status, artifacts, history, ...rest } = task;
  return {
    ...rest,
    status: fromLegacyStatus(status),
    ...(Array.isArray(artifacts) && { artifacts: artifacts.map(fromLegacyArtifact) }),
    ...(Array.isArray(history) && { history: history.map((m) => fromLegacyMessage(m as Json)) }),
  };
}

function fromLegacyStatus(status: unknown): unknown {
  if (!isObject(status)) return status;
  const { state, message, ...rest } = status;
  return {
    ...rest,
    state: typeof state === "string" ? `TASK_STATE_${state.replace(/-/g, "_").toUpperCase()}` : state,
    ...(isObject(message) && { message: fromLegacyMessage(message) }),
  };
}

function fromLegacyMessage(message: Json): Json {
  const { kind: _kind, role, parts, ...rest } = message;
  return {
    ...rest,
    role: typeof role === "string" ? `ROLE_${role.toUpperCase()}` : role,
    parts: Array.isArray(parts) ? parts.map(fromLegacyPart) : parts,
  };
}

function fromLegacyArtifact(artifact: unknown): unknown {
  if (!isObject(artifact)) return artifact;
  const { parts, ...rest } = artifact;
  return { ...rest, parts: Array.isArray(parts) ? parts.map(fromLegacyPart) : parts };
}

function fromLegacyPart(part: unknown): unknown {
  if (!isObject(part)) return part;
  const { kind, file, ...rest } = part;
  if (kind !== "file" || !isObject(file)) {
    const { kind: _k, ...plain } = part;
    return plain;
  }
  return {
    ...rest,
    ...(typeof file.uri === "string" ? { url: file.uri } : { raw: file.bytes }),
    ...(typeof file.mimeType === "string" && { mediaType: file.mimeType }),
    ...(typeof file.name === "string" && { filename: file.name }),
  };
}
