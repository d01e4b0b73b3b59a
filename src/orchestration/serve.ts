import type { AcpAgent, InboundContext } from "../client/index.js";
import { problemsOf } from "../protocol/index.js";
import { describeProblems } from "./errors.js";
import { failureResponse } from "./responses.js";
import { AgentCommand, type AgentResponse, COMMAND_CANCEL_METHOD, COMMAND_METHOD } from "./schemas.js";
import { type CommandHandler, type InternalErrorLog, runHandler } from "./targets.js";

export interface ServeCommandsOptions {
  /** What this agent is granted; a command requiring anything else is refused (permission_error). Omit: no check here. */
  permissions?: string[];
  /** Accept commands only from these agents. */
  allowFrom?: string[];
  /** How long a successful response is remembered for a repeated command id (default 10 minutes). */
  rememberMs?: number;
  /**
   * Where the detail of a handler's internal failure (anything but a CommandError) goes; the sender
   * only gets a generic agent_error with the correlation id. Default: this process's stderr.
   */
  logInternalError?: InternalErrorLog;
}

const REMEMBERED_MAX = 1000;

/**
 * Makes an SDK agent answer commands: `agent.command` requests get an AgentResponse as their signed
 * response body; `agent.command` notifications (fire-and-forget) run without an answer;
 * `agent.command.cancel` aborts the handler's signal. The command is checked before the handler
 * runs: valid, addressed to this agent, `from` equal to the verified signer (no one can send a
 * command in another agent's name), sender allowed, permissions held.
 *
 * Retries are idempotent: a command id that is still running is joined rather than run twice, and
 * a successful answer is replayed for the same id (a retry after a lost response does not redo the
 * work). A failed command runs again when retried.
 */
export function serveCommands(
  agent: AcpAgent,
  handler: CommandHandler,
  options: ServeCommandsOptions = {},
): void {
  const running = new Map<string, { controller: AbortController; done: Promise<AgentResponse> }>();
  const remembered = new Map<string, { response: AgentResponse; until: number }>();
  const rememberMs = options.rememberMs ?? 10 * 60_000;
  const keyOf = (from: string, id: string) => `${from}\u0000${id}`;

  const run = (command: AgentCommand, context: InboundContext, self: string): Promise<AgentResponse> => {
    const key = keyOf(context.from, command.id);
    const replay = remembered.get(key);
    if (replay && replay.until > Date.now()) return Promise.resolve(replay.response);
    const joined = running.get(key);
    if (joined) return joined.done;
    const controller = new AbortController();
    const timeout = command.context?.timeout;
    const timer =
      timeout === undefined ? undefined : setTimeout(() => controller.abort(new Error("timeout")), timeout);
    const done = runHandler(
      handler,
      command,
      { signal: controller.signal, from: context.from, principal: context.principalId, attempt: 1 },
      self,
      options.logInternalError,
    ).finally(() => {
      clearTimeout(timer);
      running.delete(key);
    });
    running.set(key, { controller, done });
    void done.then((response) => {
      if (response.status !== "success" && response.status !== "partial") return;
      remembered.set(key, { response, until: Date.now() + rememberMs });
      while (remembered.size > REMEMBERED_MAX) remembered.delete(remembered.keys().next().value as string);
    });
    return done;
  };

  /** The checked command, or the refusal to answer instead of running it. */
  const check = (
    body: Record<string, unknown>,
    context: InboundContext,
    self: string,
  ): { command: AgentCommand } | { refusal: AgentResponse } => {
    const base = { commandId: idOf(body), from: self, durationMs: 0 };
    const parsed = AgentCommand.safeParse(body);
    if (!parsed.success) {
      const problems = problemsOf(parsed.error);
      const message = `invalid command: ${describeProblems(problems)}`;
      return {
        refusal: failureResponse(
          base,
          { category: "user_error", recoverable: false, reason: "invalid_command", message },
          { problems },
        ),
      };
    }
    const command = parsed.data;
    const deny = (message: string) => ({
      refusal: failureResponse(base, {
        category: "permission_error",
        recoverable: false,
        reason: "permission_denied",
        message,
      }),
    });
    if (command.to !== self) {
      const message = `the command is addressed to ${command.to}, not ${self}`;
      return {
        refusal: failureResponse(base, {
          category: "user_error",
          recoverable: false,
          reason: "invalid_command",
          message,
        }),
      };
    }
    if (command.from !== context.from)
      return deny(`command.from is ${command.from}, but ${context.from} signed it`);
    if (options.allowFrom && !options.allowFrom.includes(context.from)) {
      return deny(`${self} does not accept commands from ${context.from}`);
    }
    if (options.permissions) {
      const missing = (command.security?.permissions ?? []).filter((p) => !options.permissions?.includes(p));
      if (missing.length > 0) return deny(`${self} is not granted ${missing.join(", ")}`);
    }
    return { command };
  };

  agent.onRequest(COMMAND_METHOD, async (body, context) => {
    const self = agent.agentId!;
    const checked = check(body, context, self);
    return "refusal" in checked ? checked.refusal : await run(checked.command, context, self);
  });

  agent.onNotification(async (body, context) => {
    const self = agent.agentId!;
    if (context.method === COMMAND_CANCEL_METHOD && typeof body.commandId === "string") {
      running
        .get(keyOf(context.from, body.commandId))
        ?.controller.abort(new Error("cancelled by the sender"));
      return;
    }
    if (context.method !== COMMAND_METHOD) return;
    const checked = check(body, context, self);
    if ("command" in checked) await run(checked.command, context, self);
  });
}

function idOf(body: Record<string, unknown>): string {
  const id = body.id;
  return typeof id === "string" && id.length > 0 && id.length <= 256 ? id : "unknown";
}
