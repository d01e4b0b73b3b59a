/**
 * JSON-RPC errors of the `agents` capability. A server throws them from its handlers (the MCP SDK
 * copies `code`, `message` and `data` into the error answer); a client receives every error answer
 * as an `AgentsRpcError`, so callers can test `code` and read `data` without knowing the SDK.
 */
import type { z } from "zod";
import { describeIssues, JsonRpcErrorCodes } from "./protocol.js";

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

/** `agents/run` (or a lookup) named an agent the server does not have: -32602. */
export class UnknownAgentError extends AgentsRpcError {
  override name = "UnknownAgentError";
  constructor(readonly agent: string) {
    super(JsonRpcErrorCodes.InvalidParams, `unknown agent "${agent}"`, { agent });
  }
}

/** The input does not match the agent's inputSchema: -32602 with the schema issues in `data`. */
export class AgentInputError extends AgentsRpcError {
  override name = "AgentInputError";
  constructor(agent: string, issues: readonly z.core.$ZodIssue[]) {
    const described = describeIssues(issues);
    super(JsonRpcErrorCodes.InvalidParams, `invalid input for agent "${agent}": ${described.summary}`, {
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
export class InvalidCursorError extends AgentsRpcError {
  override name = "InvalidCursorError";
  constructor(cursor: string) {
    super(JsonRpcErrorCodes.InvalidParams, `invalid agents/list cursor ${JSON.stringify(cursor)}`, {
      cursor,
    });
  }
}
