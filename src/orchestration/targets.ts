import { randomUUID } from "node:crypto";
import { z } from "zod";
import { AcpError, problemsOf } from "../protocol/index.js";
import { CommandError, classify, describeProblems } from "./errors.js";
import { type CommandResult, classifiedResponse, failureResponse, successResponse } from "./responses.js";
import {
  type AgentCommand,
  AgentResponse,
  Artifact,
  COMMAND_CANCEL_METHOD,
  COMMAND_METHOD,
} from "./schemas.js";

/** What a command handler knows besides the command. */
export interface HandlerContext {
  /** Aborts when the orchestrator stops waiting: timeout, cancellation, a scatter-gather deadline. */
  signal: AbortSignal;
  /** The verified sender (for a remote command, the `agent-id` of the signed envelope). */
  from: string;
  /** The sender's principal, when known (remote commands). */
  principal?: string;
  /** 1 for the first attempt, 2 for the first retry, … (in-process only; a remote agent sees each attempt as a new request). */
  attempt: number;
}

/**
 * Does the work of a command. Return the result (or nothing); throw a `CommandError` to fail with a
 * category and say whether a retry could help. The same handler type serves in-process agents and
 * remote ones (`serveCommands`).
 */
export type CommandHandler = (
  command: AgentCommand,
  context: HandlerContext,
) => CommandResult | undefined | Promise<CommandResult | undefined>;

/** The part of the SDK's `AcpAgent` the orchestrator uses for remote agents (any compatible client works). */
export interface CommandClient {
  readonly agentId: string | undefined;
  request(
    peer: string,
    body: Record<string, unknown>,
    options: { timeoutMs?: number; signal?: AbortSignal; method?: string },
  ): Promise<Record<string, unknown>>;
  notify(peer: string, body: Record<string, unknown>, options: { method?: string }): Promise<{ id: string }>;
}

interface AgentSpecBase {
  /** The agent id commands name in `to`. */
  id: string;
  /** What this agent is granted: a command requiring anything else is refused before sending. */
  permissions?: string[];
  /** Agents to try, in order, when this one fails (each is permission-checked first). */
  fallbacks?: string[];
}

/** An agent the orchestrator can command: a function in this process, or a remote ACP agent via the SDK. */
export type AgentSpec = AgentSpecBase & ({ handler: CommandHandler } | { remote: CommandClient });

export interface DispatchOptions {
  signal: AbortSignal;
  timeoutMs: number;
  attempt: number;
  principal?: string | undefined;
}

/** A registered agent, whatever its transport: the orchestrator's only view of it. */
export interface Target {
  readonly id: string;
  readonly kind: "in-process" | "remote";
  readonly permissions: ReadonlySet<string>;
  readonly fallbacks: readonly string[];
  /** Runs one attempt. Never rejects: every failure comes back as a failed response. */
  dispatch(command: AgentCommand, options: DispatchOptions): Promise<AgentResponse>;
  /**
   * Fire-and-forget hand-over of a remote command (an `agent.command` notification); resolves once
   * the gateway accepted it. Absent for in-process agents, whose handler simply runs in the background.
   */
  deliver?(command: AgentCommand): Promise<void>;
  /** Tells the agent the orchestrator stopped waiting (best effort). */
  cancel(command: AgentCommand): void;
}

const CommandResultSchema = z.strictObject({
  status: z.enum(["success", "partial"]).optional(),
  data: z.unknown().optional(),
  artifacts: z.array(Artifact).optional(),
  summary: z.string().optional(),
  tokensUsed: z.int().nonnegative().optional(),
});

/** Where an agent keeps the detail of a failure its caller is only told the correlation id of. */
export type InternalErrorLog = (
  err: unknown,
  incident: { command: AgentCommand; correlationId: string },
) => void;

/** The default: the agent's own stderr (its log), with the stack. */
export const logInternalError: InternalErrorLog = (err, { command, correlationId }) => {
  const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
  process.stderr.write(
    `acp: command ${command.id} (${command.action} from ${command.from}) failed, correlation id ${correlationId}: ${detail}\n`,
  );
};

/**
 * Runs a handler and wraps what it returns or throws into an AgentResponse from `responder`. A
 * `CommandError` (or a protocol `AcpError`) reaches the caller as thrown; anything else is an
 * internal failure: the caller gets a generic agent_error with a correlation id, and the detail
 * (message, stack) goes only to `log`, so no internal detail leaks to the caller.
 */
export async function runHandler(
  handler: CommandHandler,
  command: AgentCommand,
  context: HandlerContext,
  responder: string,
  log: InternalErrorLog = logInternalError,
): Promise<AgentResponse> {
  const started = performance.now();
  const base = () => ({ commandId: command.id, from: responder, durationMs: performance.now() - started });
  try {
    const returned = await handler(command, context);
    const parsed = CommandResultSchema.safeParse(returned ?? {});
    if (!parsed.success) {
      const message = `handler of ${responder} returned an invalid result: ${describeProblems(problemsOf(parsed.error))}`;
      return failureResponse(base(), {
        category: "agent_error",
        recoverable: false,
        reason: "invalid_response",
        message,
      });
    }
    return successResponse(base(), parsed.data);
  } catch (err) {
    if (err instanceof CommandError || err instanceof AcpError)
      return classifiedResponse(base(), classify(err));
    const correlationId = randomUUID();
    log(err, { command, correlationId });
    const message = `${responder} failed with an internal error (correlation id ${correlationId})`;
    return failureResponse(
      base(),
      { category: "agent_error", recoverable: false, reason: "agent_failed", message },
      { correlationId },
    );
  }
}

export function createTarget(spec: AgentSpec, self: string, log?: InternalErrorLog): Target {
  const common = {
    id: spec.id,
    permissions: new Set(spec.permissions ?? []),
    fallbacks: [...(spec.fallbacks ?? [])],
  };
  if ("handler" in spec) {
    const handler = spec.handler;
    const context = (options: DispatchOptions): HandlerContext => ({
      signal: options.signal,
      from: self,
      attempt: options.attempt,
      ...(options.principal !== undefined ? { principal: options.principal } : {}),
    });
    return {
      ...common,
      kind: "in-process",
      dispatch: (command, options) => runHandler(handler, command, context(options), spec.id, log),
      cancel: () => undefined,
    };
  }
  const client = spec.remote;
  return {
    ...common,
    kind: "remote",
    dispatch: async (command, options) => {
      const started = performance.now();
      const base = () => ({ commandId: command.id, from: self, durationMs: performance.now() - started });
      let body: Record<string, unknown>;
      try {
        body = await client.request(spec.id, command, {
          method: COMMAND_METHOD,
          timeoutMs: options.timeoutMs,
          signal: options.signal,
        });
      } catch (err) {
        return classifiedResponse(base(), classify(err));
      }
      return checkRemoteResponse(body, command, spec.id, base);
    },
    deliver: async (command) => {
      await client.notify(spec.id, command, { method: COMMAND_METHOD });
    },
    cancel: (command) => {
      client
        .notify(spec.id, { commandId: command.id }, { method: COMMAND_CANCEL_METHOD })
        .catch(() => undefined);
    },
  };
}

/** A remote answer must be an AgentResponse to this very command, from the agent it was sent to. */
function checkRemoteResponse(
  body: Record<string, unknown>,
  command: AgentCommand,
  agent: string,
  base: () => { commandId: string; from: string; durationMs: number },
): AgentResponse {
  const parsed = AgentResponse.safeParse(body);
  const invalid = (message: string) =>
    failureResponse(base(), {
      category: "agent_error",
      recoverable: false,
      reason: "invalid_response",
      message,
    });
  if (!parsed.success) {
    return invalid(
      `${agent} answered with an invalid AgentResponse: ${describeProblems(problemsOf(parsed.error))}`,
    );
  }
  if (parsed.data.commandId !== command.id) {
    return invalid(`${agent} answered command ${parsed.data.commandId}, not ${command.id}`);
  }
  if (parsed.data.from !== agent) {
    return invalid(`the response to ${command.id} says it is from ${parsed.data.from}, but ${agent} sent it`);
  }
  return parsed.data;
}
