/**
 * JSON-RPC errors of our MCP servers. A server throws them from its handlers (the MCP SDK copies
 * `code`, `message` and `data` into the error answer); a client receives every error answer as an
 * `AgentsRpcError`, so callers can test `code` and read `data` without knowing the SDK.
 *
 * Every -32602 carries ACP's error data (src/protocol/errors.ts): `{reason: "InvalidParams",
 * problems: [{path, message}]}`, each path a JSON Pointer into the request (`/params/arguments/peer`).
 */
import type { z } from "zod";
import { type Problem, problemsOf } from "../protocol/index.js";
import { describeIssues, JsonRpcErrorCodes } from "./protocol.js";

/**
 * A JSON-RPC error of the agents capability, with its `code` and `data`: a server's handlers throw one (or a
 * subclass) to answer with that error, and a client rejects with one for every error answer.
 */
export class AgentsRpcError extends Error {
  override name = "AgentsRpcError";
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** "/params/name: expected string; /params/cursor: …", for error messages. */
export function summarizeProblems(problems: readonly Problem[]): string {
  return problems.map((problem) => `${problem.path || "the request"}: ${problem.message}`).join("; ");
}

/** The request's params are wrong: -32602 with `data.problems` locating each fault in the request. */
export class InvalidParamsError extends AgentsRpcError {
  override name = "InvalidParamsError";
  declare readonly data: { reason: "InvalidParams"; problems: Problem[]; [key: string]: unknown };
  constructor(message: string, problems: Problem[], extra: Record<string, unknown> = {}) {
    super(JsonRpcErrorCodes.InvalidParams, message, { ...extra, reason: "InvalidParams", problems });
  }
}

/** `agents/run` (or a lookup) named an agent the server does not have: -32602. */
export class UnknownAgentError extends InvalidParamsError {
  override name = "UnknownAgentError";
  constructor(readonly agent: string) {
    super(`unknown agent "${agent}"`, [{ path: "/params/name", message: `no agent named "${agent}"` }], {
      agent,
    });
  }
}

/** The input does not match the agent's inputSchema: -32602 with the schema issues in `data`. */
export class AgentInputError extends InvalidParamsError {
  override name = "AgentInputError";
  constructor(agent: string, issues: readonly z.core.$ZodIssue[]) {
    const described = describeIssues(issues);
    super(`invalid input for agent "${agent}": ${described.summary}`, problemsOf(issues, "/params/input"), {
      agent,
      issues: described.issues,
    });
  }
}

/** The agent returned an output that does not match its own outputSchema: an internal error, -32603. */
export class AgentOutputError extends AgentsRpcError {
  override name = "AgentOutputError";
  constructor(agent: string, issues: readonly z.core.$ZodIssue[]) {
    const described = describeIssues(issues);
    super(
      JsonRpcErrorCodes.InternalError,
      `agent "${agent}" returned an invalid output: ${described.summary}`,
      {
        agent,
        issues: described.issues,
      },
    );
  }
}

/** An `agents/list` cursor this server did not hand out: -32602. */
export class InvalidCursorError extends InvalidParamsError {
  override name = "InvalidCursorError";
  constructor(cursor: string) {
    super(
      `invalid agents/list cursor ${JSON.stringify(cursor)}`,
      [{ path: "/params/cursor", message: "not a cursor this server handed out" }],
      { cursor },
    );
  }
}
