import { randomUUID } from "node:crypto";
import type { GatewayExtension } from "../gateway/extension.js";
import { problemsOf } from "../protocol/index.js";
import { ApprovalGate } from "./approval-gate.js";
import { Attempts } from "./attempts.js";
import { commandEntry, responseEntry } from "./audit.js";
import type { BreakerState } from "./breaker.js";
import { ResponseCache } from "./cache.js";
import {
  type ConfigFileInput,
  isCacheableAction,
  type OrchestrationConfig,
  type OrchestrationConfigInput,
  resolveConfig,
} from "./config.js";
import { classify, describeProblems } from "./errors.js";
import { OrchestrationMetrics } from "./metrics.js";
import type { AsyncReceipt, CommandSendOptions, OrchestratorOptions } from "./orchestrator-options.js";
import {
  type BroadcastResult,
  broadcast,
  type PatternOptions,
  type PipelineOptions,
  type PipelineResult,
  type PipelineStep,
  pipeline,
  type ScatterGatherOptions,
  type ScatterGatherResult,
  scatterGather,
} from "./patterns.js";
import { baseOf, failureResponse, reissue } from "./responses.js";
import { warrantsFallback } from "./retry.js";
import {
  AgentCommand,
  type AgentResponse,
  COMMAND_VERSION,
  type CommandDraft,
  isSuccessful,
} from "./schemas.js";
import { type AgentSpec, createTarget, type Target } from "./targets.js";

export type { AsyncReceipt, CommandSendOptions, OrchestratorOptions };

/**
 * Sends AgentCommands to agents in this process or remote ACP agents (through the SDK) with one API,
 * in the command layer's five patterns, with timeouts, retries of recoverable failures, permission-checked
 * fallbacks, a half-opening circuit breaker per agent, cancellation, a concurrency limit, response
 * caching, human approval, and an audit entry for every command and response. `send` never rejects:
 * every outcome, including a refusal before sending, is an AgentResponse.
 */
export class Orchestrator {
  readonly id: string;
  readonly config: OrchestrationConfig;
  readonly metrics: OrchestrationMetrics;
  private readonly targets = new Map<string, Target>();
  private readonly attempts: Attempts;
  private readonly approvals: ApprovalGate;
  private readonly cache: ResponseCache;
  private readonly background = new Set<Promise<unknown>>();

  constructor(private readonly options: OrchestratorOptions) {
    this.id = options.id;
    this.config = resolveConfig(
      options.config as OrchestrationConfigInput | ConfigFileInput | undefined,
      "orchestrator config",
    );
    this.cache = options.cache ?? new ResponseCache(this.config.performance.cache_ttl * 1000);
    this.metrics = new OrchestrationMetrics((agent) => this.breakerState(agent));
    const common = { id: this.id, principal: options.principal, config: this.config };
    this.attempts = new Attempts({
      ...common,
      metrics: this.metrics,
      random: options.random ?? Math.random,
      record: (response, command) => this.finish(response, command),
    });
    this.approvals = new ApprovalGate({ ...common, store: options.approvals });
  }

  /**
   * Registers a target agent (in-process handler, or a remote agent reached through this orchestrator's own
   * ACP agent); refuses an id already registered.
   */
  addAgent(spec: AgentSpec): this {
    if (this.targets.has(spec.id)) throw new Error(`agent ${spec.id} is already registered`);
    // Receivers refuse a command whose `from` is not the signing agent: catch the mismatch here.
    const signer = "remote" in spec ? spec.remote.agentId : undefined;
    if (signer !== undefined && signer !== this.id) {
      throw new Error(
        `remote agents must be reached through this orchestrator's own agent ${this.id}, not ${signer}`,
      );
    }
    this.targets.set(spec.id, createTarget(spec, this.id, this.options.logInternalError));
    return this;
  }

  /** Forgets a target and its circuit and retry state; false when no such agent was registered. */
  removeAgent(id: string): boolean {
    this.attempts.forget(id);
    return this.targets.delete(id);
  }

  /** The ids of the registered target agents. */
  get agentIds(): string[] {
    return [...this.targets.keys()];
  }

  /**
   * The circuit state of a target: `closed` (calls go through), `open` (refused until the reset timeout) or
   * `half-open` (one trial).
   */
  breakerState(agent: string): BreakerState {
    return this.attempts.breakerState(agent);
  }

  /** A complete command from this orchestrator: fresh id, now, version 2.0, priority medium unless given. */
  command(draft: CommandDraft): AgentCommand {
    return {
      id: randomUUID(),
      timestamp: new Date().toISOString(),
      version: COMMAND_VERSION,
      from: this.id,
      to: draft.to,
      priority: draft.priority ?? "medium",
      action: draft.action,
      parameters: draft.parameters ?? {},
      ...(draft.context ? { context: draft.context } : {}),
      ...(draft.security ? { security: draft.security } : {}),
    };
  }

  /** Request-response. */
  async send(input: AgentCommand, options: CommandSendOptions = {}): Promise<AgentResponse> {
    const checked = await this.admit(input);
    if ("refusal" in checked) return checked.refusal;
    return this.execute(checked.command, checked.target, options, false);
  }

  /**
   * Fire-and-forget: validated, permission-checked, approved if needed and audited like `send`, then
   * handed over without waiting for the result (to a remote agent as an `agent.command`
   * notification). No retries or fallbacks: there is no answer to judge. Never rejects.
   */
  async sendAsync(
    input: AgentCommand,
    options: Pick<CommandSendOptions, "signal" | "onApproval"> = {},
  ): Promise<AsyncReceipt> {
    const refuse = (response: AgentResponse): AsyncReceipt => ({
      commandId: response.commandId,
      accepted: false,
      response,
    });
    const checked = await this.admit(input);
    if ("refusal" in checked) return refuse(checked.refusal);
    const { command, target } = checked;
    const started = performance.now();
    const refused =
      this.permissionRefusal(command, target, started) ??
      (await this.approvals.check(command, target.fallbacks, options, started));
    if (refused) return refuse(await this.finish(refused, command));
    if (this.attempts.breaker(target.id).state === "open")
      return refuse(await this.finish(this.attempts.circuitOpen(command, target, started), command));
    if (target.deliver) {
      try {
        await target.deliver(command);
      } catch (err) {
        return refuse(
          await this.finish(failureResponse(baseOf(this.id, command, started), classify(err)), command),
        );
      }
    } else {
      this.track(
        this.attempts
          .attempt(command, target, 1, undefined)
          .then((response) => this.finish(response, command)),
      );
    }
    return { commandId: command.id, accepted: true };
  }

  /**
   * One command to every target in parallel (a fresh id each); see the broadcast pattern in
   * docs/orchestration.md.
   */
  broadcast(
    base: Omit<CommandDraft, "to">,
    targets: string[],
    options: CommandSendOptions & PatternOptions = {},
  ): Promise<BroadcastResult> {
    return broadcast(this, base, targets, options);
  }

  /**
   * Runs steps in order, each command carrying the previous step's data; stops at the first failed
   * step unless `continueOnFailure`.
   */
  pipeline(steps: PipelineStep[], options: PipelineOptions = {}): Promise<PipelineResult> {
    return pipeline(this, steps, options);
  }

  /**
   * Sends commands in parallel and aggregates the answers when all arrived or at the deadline, whichever
   * comes first.
   */
  scatterGather<T>(
    drafts: CommandDraft[],
    options: ScatterGatherOptions<T>,
  ): Promise<ScatterGatherResult<T>> {
    return scatterGather(this, drafts, options);
  }

  /**
   * After a restart: the approvals this orchestrator asked for that are still pending. Each is
   * awaited and, once approved, executed; the promise gives every final response.
   */
  async resumeApprovals(options: Pick<CommandSendOptions, "signal"> = {}): Promise<AgentResponse[]> {
    const pending = await this.approvals.pending();
    return Promise.all(
      pending.map(async (approval) => {
        const command = approval.command;
        const started = performance.now();
        const target = this.targets.get(command.to);
        if (!target) return this.finish(this.unknownAgent(command, started), command);
        const refused = await this.approvals.awaitDecision(approval, command, started, options);
        if (refused) return this.finish(refused, command);
        return this.execute(command, target, { ...options, fallbacks: approval.fallbacks }, true);
      }),
    );
  }

  /** Waits for fire-and-forget work still running in this process. */
  async drain(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  /** Mounts this orchestrator's metrics on the gateway it runs in (`startGateway({ extensions })`). */
  gatewayExtension(): GatewayExtension {
    return {
      name: "orchestration-metrics",
      mount: (ctx) => {
        ctx.metrics.addCollector(this.metrics.collector());
        return {};
      },
    };
  }

  // ---- the pipeline every command goes through ----

  /** Validation, the audit entry of the command, and the target lookup. */
  private async admit(
    input: AgentCommand,
  ): Promise<{ command: AgentCommand; target: Target } | { refusal: AgentResponse }> {
    const started = performance.now();
    const parsed = AgentCommand.safeParse(input);
    const raw = input as unknown as Record<string, unknown> | undefined;
    const commandId =
      typeof raw?.id === "string" && raw.id !== "" && raw.id.length <= 256 ? raw.id : "unknown";
    const invalid = (message: string, problems: { path: string; message: string }[]) => {
      const base = { commandId, from: this.id, durationMs: performance.now() - started };
      const response = failureResponse(
        base,
        { category: "user_error", recoverable: false, reason: "invalid_command", message },
        { problems },
      );
      return this.finish(response, { from: this.id });
    };
    if (!parsed.success) {
      const problems = problemsOf(parsed.error);
      return { refusal: await invalid(`invalid command: ${describeProblems(problems)}`, problems) };
    }
    const command = parsed.data;
    if (command.from !== this.id) {
      const problem = { path: "/from", message: `must be this orchestrator's id ${this.id}` };
      return { refusal: await invalid(`invalid command: /from: ${problem.message}`, [problem]) };
    }
    try {
      if (this.options.audit) await this.options.audit.record(commandEntry(command));
    } catch (err) {
      const message = `the command was not sent: its audit entry could not be written (${(err as Error).message})`;
      const response = failureResponse(baseOf(this.id, command, started), {
        category: "system_error",
        recoverable: true,
        reason: "audit_failed",
        message,
      });
      return { refusal: response };
    }
    const target = this.targets.get(command.to);
    if (!target) return { refusal: await this.finish(this.unknownAgent(command, started), command) };
    return { command, target };
  }

  /** Refuses a command requiring a permission the target is not granted: nothing is sent. */
  private permissionRefusal(
    command: AgentCommand,
    target: Target,
    started: number,
  ): AgentResponse | undefined {
    const missing = this.missingPermissions(command, target);
    if (missing.length === 0) return undefined;
    const message = `${target.id} is not granted ${missing.join(", ")}; the command was not sent`;
    return failureResponse(
      baseOf(this.id, command, started),
      { category: "permission_error", recoverable: false, reason: "permission_denied", message },
      { missing },
    );
  }

  /** After admission: gate (unless already approved), cache, retries on the target, then fallbacks. */
  private async execute(
    command: AgentCommand,
    target: Target,
    options: CommandSendOptions,
    approved: boolean,
  ): Promise<AgentResponse> {
    const started = performance.now();
    const fallbacks = (options.fallbacks ?? target.fallbacks).filter((id) => id !== command.to);
    const refused =
      this.permissionRefusal(command, target, started) ??
      (approved ? undefined : await this.approvals.check(command, fallbacks, options, started));
    if (refused) return this.finish(refused, command);
    const cacheable =
      this.config.performance.enable_caching &&
      !command.security?.requireApproval &&
      (options.cacheable ?? isCacheableAction(this.config, command.action));
    const cached = cacheable ? this.cache.get(command) : undefined;
    if (cached) {
      this.metrics.cacheHit(target.id);
      return this.finish(reissue(cached, command), command);
    }
    let response = await this.attempts.withRetries(command, target, options.signal);
    const skipped: string[] = [];
    for (const fallbackId of fallbacks) {
      if (!warrantsFallback(response) || options.signal?.aborted) break;
      const fallback = this.targets.get(fallbackId);
      const missing = fallback ? this.missingPermissions(command, fallback) : [];
      if (!fallback || missing.length > 0) {
        skipped.push(
          fallback ? `${fallbackId} (not granted ${missing.join(", ")})` : `${fallbackId} (not registered)`,
        );
        continue;
      }
      const next = {
        ...command,
        id: randomUUID(),
        timestamp: new Date().toISOString(),
        to: fallbackId,
        context: { ...command.context, correlationId: command.context?.correlationId ?? command.id },
      };
      if (this.options.audit) {
        try {
          await this.options.audit.record(commandEntry(next));
        } catch (err) {
          this.report(err);
          break;
        }
      }
      response = await this.attempts.withRetries(next, fallback, options.signal);
    }
    if (skipped.length > 0 && !isSuccessful(response)) {
      response.results.summary = `${response.results.summary ?? response.status}; fallbacks not used: ${skipped.join(", ")}`;
    }
    if (cacheable && isSuccessful(response) && response.from === command.to)
      this.cache.set(command, response);
    return response;
  }

  private unknownAgent(command: AgentCommand, started: number): AgentResponse {
    const message = `no agent ${command.to} is registered with this orchestrator`;
    return failureResponse(
      baseOf(this.id, command, started),
      { category: "user_error", recoverable: false, reason: "unknown_agent", message },
      {
        problems: [{ path: "/to", message: "unknown agent" }],
      },
    );
  }

  private missingPermissions(command: AgentCommand, target: Target): string[] {
    if (!this.config.security.require_permissions) return [];
    return (command.security?.permissions ?? []).filter((permission) => !target.permissions.has(permission));
  }

  /** Records the response (a failure to do so is reported, the response still returned). */
  private async finish(
    response: AgentResponse,
    command: { from: string; action?: AgentCommand["action"] },
  ): Promise<AgentResponse> {
    if (this.options.audit) {
      try {
        await this.options.audit.record(responseEntry(response, command));
      } catch (err) {
        this.report(err);
      }
    }
    return response;
  }

  private track(task: Promise<unknown>): void {
    const tracked = task.catch((err) => this.report(err)).finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  private report(err: unknown): void {
    const error = err instanceof Error ? err : new Error(String(err));
    if (this.options.onError) this.options.onError(error);
    else process.emitWarning(error.message, { code: "ACP_ORCHESTRATOR_ERROR" });
  }
}
