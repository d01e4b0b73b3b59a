/**
 * The gateway's own ACP agent, which carries MCP runs to the agents registered at the gateway.
 *
 * Why its own agent: an ACP request must be signed by its sender, and the gateway does not hold
 * the MCP caller's private key (an API key authenticates the caller to the gateway, nothing more).
 * So the gateway signs as itself — an agent `mcp-bridge-<gateway>` of principal `acp-gateway-mcp`,
 * registered when the first run needs it and revoked when the gateway closes — and names the MCP
 * caller it acts for in the request (`onBehalfOf`). The target verifies a real signature and
 * decides for itself how far it trusts the gateway's word about the caller. The agent runs in
 * process (orchestration/gateway-agent.ts): its API key never leaves the gateway.
 */
import { randomUUID } from "node:crypto";
import type { InboundContext } from "../../client/types.js";
import { isRemoteAddress } from "../../gateway/addressing.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import type { AgentRunContext } from "../../mcp/agent-source.js";
import { AgentsRpcError, InvalidParamsError } from "../../mcp/errors.js";
import { isJsonObject, type JsonValue } from "../../mcp/json.js";
import { BRIDGE_PRINCIPAL, McpProgressBody, McpRunMethods, McpRunResult } from "../../mcp/messages.js";
import { GatewayAgent } from "../../orchestration/gateway-agent.js";
import { AcpError, type IssueLike, problemsOf } from "../../protocol/index.js";

export interface McpBridgeOptions {
  /** Where the bridge agent's audit log goes (`<root>/<agent-id>/`); omitted: none. */
  auditRoot?: string;
  /** Longest an MCP run may take at the target. */
  runTimeoutMs: number;
  /** How long to wait for deltas still in flight when the target's answer overtook them. */
  lateDeltaGraceMs?: number;
}

/** What the MCP session knows about a run's target: an agent id, and the MCP agent it serves (if any). */
export interface RunTarget {
  agentId: string;
  /** An agent published with `serveMcpAgent`; undefined: a plain `agent.request` to the agent. */
  served?: string;
  /** The name the MCP client used (`alice` or `alice/summarize`), for messages. */
  mcpName: string;
}

export class McpBridge {
  readonly #agent: GatewayAgent;
  readonly #runs = new Map<string, RunStream>();

  constructor(
    private readonly ctx: GatewayContext,
    private readonly options: McpBridgeOptions,
  ) {
    this.#agent = new GatewayAgent(ctx, {
      agentId: `mcp-bridge-${ctx.gatewayId.replaceAll("-", "").slice(0, 12)}`,
      principalId: BRIDGE_PRINCIPAL,
      capabilities: ["mcp-bridge"],
      purpose: `Run agents for MCP clients of gateway ${ctx.gatewayId}`,
      agent: {
        audit: options.auditRoot === undefined ? false : { root: options.auditRoot },
        requestTimeoutMs: options.runTimeoutMs,
      },
      prepare: (agent) => agent.onNotification((body, context) => this.#onProgress(body, context)),
    });
  }

  get agentId(): string {
    return this.#agent.agentId;
  }

  get activeRuns(): number {
    return this.#runs.size;
  }

  /** Runs `input` at the target for `caller`; deltas the target streams go to `run.emit`. */
  async run(
    target: RunTarget,
    input: JsonValue | undefined,
    caller: ResolvedAgent,
    run: AgentRunContext,
  ): Promise<JsonValue> {
    // An agent of another domain (its address) is present or not at its own gateway, not here.
    const presence = isRemoteAddress(target.agentId, this.ctx.registry)
      ? undefined
      : await this.ctx.presence.get(target.agentId);
    if (presence?.state === "offline") {
      throw new Error(`${target.agentId} is offline (not connected to the gateway), so it cannot run now`);
    }
    const agent = await this.#agent.agent();
    const summary = `MCP agents/run "${target.mcpName}" for ${caller.record.agentId} through the gateway.`;
    if (target.served === undefined) {
      if (!isJsonObject(input ?? null)) {
        throw new InvalidParamsError(
          `invalid input for agent "${target.mcpName}": an ACP request body must be a JSON object`,
          [{ path: "/params/input", message: "expected object" }],
          { agent: target.mcpName, issues: [{ path: [], code: "invalid_type", message: "expected object" }] },
        );
      }
      try {
        const body = await agent.request(target.agentId, input as Record<string, unknown>, {
          signal: run.signal,
          timeoutMs: this.options.runTimeoutMs,
          summary,
        });
        return body as JsonValue;
      } catch (err) {
        throw this.#failure(err, target, run.signal);
      }
    }

    const runId = randomUUID().replaceAll("-", "");
    const stream = new RunStream(target.agentId, run.emit);
    this.#runs.set(runId, stream);
    const cancel = () => {
      // Tells the target to stop; its answer (if any) then finds no one waiting.
      agent.notify(target.agentId, { runId }, { method: McpRunMethods.cancel }).catch(() => undefined);
    };
    run.signal.addEventListener("abort", cancel, { once: true });
    try {
      const response = await agent.request(
        target.agentId,
        {
          name: target.served,
          ...(input !== undefined && { input }),
          runId,
          onBehalfOf: { agentId: caller.record.agentId, principalId: caller.record.principalId },
        },
        {
          method: McpRunMethods.run,
          signal: AbortSignal.any([run.signal, stream.failed.signal]),
          timeoutMs: this.options.runTimeoutMs,
          summary,
        },
      );
      const result = McpRunResult.safeParse(response);
      if (!result.success)
        throw new Error(`${target.agentId} answered ${McpRunMethods.run} without {output, deltas}`);
      await stream.drain(result.data.deltas, this.options.lateDeltaGraceMs ?? 2_000);
      return result.data.output as JsonValue;
    } catch (err) {
      if (stream.failed.signal.aborted) throw stream.failed.signal.reason;
      throw this.#failure(err, target, run.signal);
    } finally {
      stream.close();
      this.#runs.delete(runId);
      run.signal.removeEventListener("abort", cancel);
    }
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  #onProgress(body: Record<string, unknown>, context: InboundContext): void {
    if (context.method !== McpRunMethods.progress) return;
    const parsed = McpProgressBody.safeParse(body);
    if (!parsed.success) return;
    const stream = this.#runs.get(parsed.data.runId);
    // Deltas count only from the agent the run went to.
    if (stream && stream.target === context.from)
      stream.accept(parsed.data.seq, parsed.data.delta as JsonValue);
  }

  /** The error the MCP client sees; invalid input keeps -32602 and the target's schema issues. */
  #failure(err: unknown, target: RunTarget, signal: AbortSignal): unknown {
    if (signal.aborted) return signal.reason;
    if (err instanceof AgentsRpcError) return err;
    if (err instanceof AcpError && err.kind === "InvalidParams") {
      const issues = Array.isArray(err.data.issues) ? err.data.issues : (err.data.problems ?? []);
      const detail = err.message.replace(/^invalid input for agent "[^"]*": /, "");
      // The target's issues locate faults in the input (zod paths); the MCP caller sent it as params.input.
      const located = issues.filter((issue): issue is IssueLike => Array.isArray(issue?.path));
      const problems =
        located.length > 0
          ? problemsOf(located, "/params/input")
          : [{ path: "/params/input", message: detail }];
      return new InvalidParamsError(`invalid input for agent "${target.mcpName}": ${detail}`, problems, {
        agent: target.mcpName,
        issues,
      });
    }
    if (err instanceof AcpError && err.kind === "Timeout") {
      return new Error(`${target.agentId} did not answer within ${this.options.runTimeoutMs} ms`);
    }
    return err instanceof Error ? new Error(err.message.replace(/^agent "[^"]*" failed: /, "")) : err;
  }
}

/**
 * The deltas of one run as they arrive: put back in `seq` order (the gateway may redeliver or
 * reorder), passed to the MCP server's `emit`, which checks each combines with the previous ones.
 */
class RunStream {
  /** Aborted when a delta does not combine: the run then fails with that error. */
  readonly failed = new AbortController();
  #next = 1;
  #closed = false;
  readonly #early = new Map<number, JsonValue>();
  #wake: (() => void) | undefined;

  constructor(
    readonly target: string,
    private readonly emit: AgentRunContext["emit"],
  ) {}

  accept(seq: number, delta: JsonValue): void {
    if (this.#closed || seq < this.#next) return;
    this.#early.set(seq, delta);
    for (let ready = this.#early.get(this.#next); ready !== undefined; ready = this.#early.get(this.#next)) {
      this.#early.delete(this.#next);
      this.#next++;
      try {
        void this.emit(ready);
      } catch (err) {
        this.#closed = true;
        this.failed.abort(err);
        return;
      }
    }
    this.#wake?.();
  }

  /** Waits (at most `graceMs`) until `count` deltas were passed on; the rest the final delta covers. */
  async drain(count: number, graceMs: number): Promise<void> {
    if (this.#next > count) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
      this.#wake = () => {
        if (this.#next > count) resolve();
      };
    });
    clearTimeout(timer);
    this.#wake = undefined;
  }

  close(): void {
    this.#closed = true;
    this.#early.clear();
    this.#wake = undefined;
  }
}
