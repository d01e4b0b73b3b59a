import { randomUUID } from "node:crypto";
import type { GatewayExtension } from "../gateway/gateway.js";
import type { ApprovalRecord, ApprovalStore } from "./approvals.js";
import { type CommandAuditSink, commandEntry, responseEntry } from "./audit.js";
import { type BreakerState, CircuitBreaker } from "./breaker.js";
import { ResponseCache } from "./cache.js";
import {
  isCacheableAction,
  needsApprovalByPriority,
  type OrchestrationConfig,
  type OrchestrationConfigInput,
  resolveConfig,
  timeoutFor,
} from "./config.js";
import { classify, describeProblems, type FailureReason, problemsOf, TimeoutAbort } from "./errors.js";
import { ConcurrencyLimiter } from "./limiter.js";
import { OrchestrationMetrics } from "./metrics.js";
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
import { cancelledResponse, failureResponse, reissue } from "./responses.js";
import { backoffDelay, backoffPolicyFor, isRetriable, sleep, warrantsFallback } from "./retry.js";
import {
  AgentCommand,
  type AgentResponse,
  COMMAND_VERSION,
  type CommandDraft,
  isSuccessful,
} from "./schemas.js";
import { type AgentSpec, createTarget, type Target } from "./targets.js";

export interface OrchestratorOptions {
  /** This orchestrator's agent id: the `from` of its commands (with remote agents, the SDK agent's id). */
  id: string;
  /** The human principal it acts for; shown on approvals and in the audit log. */
  principal?: string;
  /** `acp.yaml`'s content (see loadConfig); omitted keys take the seed's defaults. */
  config?: OrchestrationConfig | OrchestrationConfigInput;
  /** Where every command and response is recorded; `false` only for throwaway tools and benchmarks. */
  audit: CommandAuditSink | false;
  /** Needed as soon as a command requires approval. */
  approvals?: ApprovalStore;
  /** Source of jitter, in [0, 1). Default Math.random. */
  random?: () => number;
  /** Failures that cannot be reported in a response (a response's audit entry that could not be written). */
  onError?: (err: Error) => void;
}

export interface SendOptions {
  signal?: AbortSignal;
  /** Overrides the target's registered fallbacks for this command. */
  fallbacks?: string[];
  /** Cache this command's successful response (default: only actions listed in `cacheable_actions`). */
  cacheable?: boolean;
  /** Called once an approval was requested, so a caller can say where to approve it. */
  onApproval?: (approval: ApprovalRecord) => void;
}

/** What `sendAsync` hands back: whether the command was handed over, or the response that refused it. */
export interface AsyncReceipt {
  commandId: string;
  accepted: boolean;
  response?: AgentResponse;
}

/**
 * Sends AgentCommands to agents in this process or remote ACP agents (through the SDK) with one API,
 * in the seed's five patterns, with timeouts, retries of recoverable failures, permission-checked
 * fallbacks, a half-opening circuit breaker per agent, cancellation, a concurrency limit, response
 * caching, human approval, and an audit entry for every command and response. `send` never rejects:
 * every outcome, including a refusal before sending, is an AgentResponse.
 */
export class Orchestrator {
  readonly id: string;
  readonly config: OrchestrationConfig;
  readonly metrics: OrchestrationMetrics;
  private readonly targets = new Map<string, Target>();
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly limiter: ConcurrencyLimiter;
  private readonly cache: ResponseCache;
  private readonly background = new Set<Promise<unknown>>();

  constructor(private readonly options: OrchestratorOptions) {
    this.id = options.id;
    this.config = resolveConfig(
      options.config as OrchestrationConfigInput | undefined,
      "orchestrator config",
    );
    this.limiter = new ConcurrencyLimiter(this.config.performance.max_parallel);
    this.cache = new ResponseCache(this.config.performance.cache_ttl * 1000);
    this.metrics = new OrchestrationMetrics((agent) => this.breakerState(agent));
  }

  addAgent(spec: AgentSpec): this {
    if (this.targets.has(spec.id)) throw new Error(`agent ${spec.id} is already registered`);
    this.targets.set(spec.id, createTarget(spec, this.id));
    return this;
  }

  removeAgent(id: string): boolean {
    this.breakers.delete(id);
    return this.targets.delete(id);
  }

  get agentIds(): string[] {
    return [...this.targets.keys()];
  }

  breakerState(agent: string): BreakerState {
    return this.breakers.get(agent)?.state ?? "closed";
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
  async send(input: AgentCommand, options: SendOptions = {}): Promise<AgentResponse> {
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
    options: Pick<SendOptions, "signal" | "onApproval"> = {},
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
      (await this.approval(command, target.fallbacks, options, started));
    if (refused) return refuse(await this.finish(refused, command));
    if (this.breaker(target.id).state === "open")
      return refuse(await this.finish(this.circuitOpen(command, target, started), command));
    if (target.deliver) {
      try {
        await target.deliver(command);
      } catch (err) {
        return refuse(
          await this.finish(failureResponse(this.base(command, started), classify(err)), command),
        );
      }
    } else {
      this.track(
        this.attempt(command, target, 1, undefined).then((response) => this.finish(response, command)),
      );
    }
    return { commandId: command.id, accepted: true };
  }

  broadcast(
    base: Omit<CommandDraft, "to">,
    targets: string[],
    options: SendOptions & PatternOptions = {},
  ): Promise<BroadcastResult> {
    return broadcast(this, base, targets, options);
  }

  pipeline(steps: PipelineStep[], options: PipelineOptions = {}): Promise<PipelineResult> {
    return pipeline(this, steps, options);
  }

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
  async resumeApprovals(options: Pick<SendOptions, "signal"> = {}): Promise<AgentResponse[]> {
    const store = this.options.approvals;
    if (!store) return [];
    const pending = await store.list({ status: "pending", requestedBy: this.id });
    return Promise.all(
      pending.map(async (approval) => {
        const command = approval.command;
        const started = performance.now();
        const target = this.targets.get(command.to);
        if (!target) return this.finish(this.unknownAgent(command, started), command);
        const refused = await this.awaitDecision(approval, command, started, options);
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
      routes: (_router, ctx) => ctx.metrics.addCollector(this.metrics.collector()),
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
      const response = failureResponse(this.base(command, started), {
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
      this.base(command, started),
      { category: "permission_error", recoverable: false, reason: "permission_denied", message },
      { missing },
    );
  }

  /** Asks for approval when the command needs it and waits; gives the refusal, or undefined to go ahead. */
  private async approval(
    command: AgentCommand,
    fallbacks: readonly string[],
    options: Pick<SendOptions, "signal" | "onApproval">,
    started: number,
  ): Promise<AgentResponse | undefined> {
    const why = command.security?.requireApproval
      ? "the command sets security.requireApproval"
      : needsApprovalByPriority(this.config, command.priority)
        ? `priority ${command.priority} is at or above approval_threshold ${this.config.security.approval_threshold}`
        : undefined;
    if (why === undefined) return undefined;
    const store = this.options.approvals;
    const unavailable = (message: string) =>
      failureResponse(this.base(command, started), {
        category: "permission_error",
        recoverable: false,
        reason: "approval_unavailable",
        message,
      });
    if (!store)
      return unavailable(`${why}, but this orchestrator has no approval store; the command was not sent`);
    let approval: ApprovalRecord;
    try {
      approval = await store.create({
        command,
        fallbacks: [...fallbacks],
        reason: why,
        requestedBy: this.id,
        principal: this.options.principal ?? null,
        timeoutMs: this.config.security.approval_timeout,
      });
    } catch (err) {
      return unavailable(`${why}, but the approval could not be requested (${(err as Error).message})`);
    }
    options.onApproval?.(approval);
    return this.awaitDecision(approval, command, started, options);
  }

  private async awaitDecision(
    approval: ApprovalRecord,
    command: AgentCommand,
    started: number,
    options: Pick<SendOptions, "signal">,
  ): Promise<AgentResponse | undefined> {
    const store = this.options.approvals!;
    let decided: ApprovalRecord;
    try {
      decided = await store.waitForDecision(approval.id, options.signal);
    } catch (err) {
      if (options.signal?.aborted) {
        await store.decide(approval.id, { decision: "cancelled", by: this.id }).catch(() => undefined);
        return cancelledResponse(this.base(command, started), `while waiting for approval ${approval.id}`);
      }
      const message = `approval ${approval.id} could not be read (${(err as Error).message})`;
      return failureResponse(this.base(command, started), {
        category: "system_error",
        recoverable: false,
        reason: "approval_unavailable",
        message,
      });
    }
    const base = this.base(command, started);
    const deny = (reason: FailureReason, message: string) =>
      failureResponse(
        base,
        { category: "permission_error", recoverable: false, reason, message },
        { approvalId: approval.id },
      );
    switch (decided.status) {
      case "approved":
        return undefined;
      case "denied":
        return deny(
          "approval_denied",
          `approval ${approval.id} was denied by ${decided.decidedBy ?? "the principal"}${decided.note ? `: ${decided.note}` : ""}`,
        );
      case "expired":
        return deny(
          "approval_expired",
          `approval ${approval.id} expired: no decision by ${decided.expiresAt}; the command was not sent`,
        );
      default:
        return cancelledResponse(base, `approval ${approval.id} was withdrawn`);
    }
  }

  /** After admission: gate (unless already approved), cache, retries on the target, then fallbacks. */
  private async execute(
    command: AgentCommand,
    target: Target,
    options: SendOptions,
    approved: boolean,
  ): Promise<AgentResponse> {
    const started = performance.now();
    const fallbacks = (options.fallbacks ?? target.fallbacks).filter((id) => id !== command.to);
    const refused =
      this.permissionRefusal(command, target, started) ??
      (approved ? undefined : await this.approval(command, fallbacks, options, started));
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
    let response = await this.withRetries(command, target, options.signal);
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
      response = await this.withRetries(next, fallback, options.signal);
    }
    if (skipped.length > 0 && !isSuccessful(response)) {
      response.results.summary = `${response.results.summary ?? response.status}; fallbacks not used: ${skipped.join(", ")}`;
    }
    if (cacheable && isSuccessful(response) && response.from === command.to)
      this.cache.set(command, response);
    return response;
  }

  /** Attempts until success, a failure that is not retriable, or the attempt budget; waits back off between. */
  private async withRetries(
    command: AgentCommand,
    target: Target,
    signal: AbortSignal | undefined,
  ): Promise<AgentResponse> {
    const policy = backoffPolicyFor(command, this.config);
    const detailed = this.config.security.audit_level === "detailed";
    for (let attempt = 1; ; attempt++) {
      const response = await this.attempt(command, target, attempt, signal);
      const last = attempt >= policy.maxAttempts || !isRetriable(response) || signal?.aborted;
      if (last) return this.finish(response, command);
      if (detailed) await this.finish(response, command);
      try {
        await sleep(backoffDelay(policy, attempt, this.options.random ?? Math.random), signal);
      } catch (reason) {
        return this.finish(this.aborted(command, reason, performance.now()), command);
      }
    }
  }

  /** One attempt: circuit, concurrency slot, timeout, dispatch; the outcome settles the circuit. */
  private async attempt(
    command: AgentCommand,
    target: Target,
    attempt: number,
    signal: AbortSignal | undefined,
  ): Promise<AgentResponse> {
    const started = performance.now();
    const ticket = this.breaker(target.id).acquire();
    if (!ticket) return this.circuitOpen(command, target, started);
    let release: () => void;
    try {
      release = await this.limiter.acquire(signal);
    } catch (reason) {
      ticket.release();
      return this.aborted(command, reason, started);
    }
    const timeoutMs = command.context?.timeout ?? timeoutFor(this.config, command.priority);
    const controller = new AbortController();
    const forward = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", forward, { once: true });
    if (signal?.aborted) forward();
    const timer = setTimeout(
      () =>
        controller.abort(new TimeoutAbort("timeout", `no response from ${target.id} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    let response: AgentResponse;
    try {
      response = await raceAbort(
        target.dispatch(command, {
          signal: controller.signal,
          timeoutMs,
          attempt,
          principal: this.options.principal,
        }),
        controller.signal,
      );
    } catch (reason) {
      response = this.aborted(command, reason, started);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", forward);
      release();
    }
    // The agent may still be working on it: tell it we stopped waiting.
    if (response.status === "timeout" || response.status === "cancelled") target.cancel(command);
    if (isSuccessful(response)) ticket.succeed();
    else if (
      response.status === "cancelled" ||
      response.error?.code === "user_error" ||
      response.error?.code === "permission_error"
    )
      ticket.release();
    else ticket.fail();
    this.metrics.observe(target.id, response.status, performance.now() - started);
    return response;
  }

  private aborted(command: AgentCommand, reason: unknown, started: number): AgentResponse {
    const base = this.base(command, started);
    if (reason instanceof TimeoutAbort) {
      return failureResponse(base, {
        category: "timeout_error",
        recoverable: true,
        reason: reason.reason,
        message: reason.message,
      });
    }
    return cancelledResponse(base, reason instanceof Error ? reason.message : "the caller aborted");
  }

  private circuitOpen(command: AgentCommand, target: Target, started: number): AgentResponse {
    this.metrics.circuitRejected(target.id);
    const breaker = this.breaker(target.id);
    const retryAt = breaker.retryAt;
    const message = `the circuit to ${target.id} is open after ${breaker.consecutiveFailures} consecutive failures${retryAt ? `; next trial after ${new Date(retryAt).toISOString()}` : ""}`;
    return failureResponse(this.base(command, started), {
      category: "system_error",
      recoverable: true,
      reason: "circuit_open",
      message,
    });
  }

  private unknownAgent(command: AgentCommand, started: number): AgentResponse {
    const message = `no agent ${command.to} is registered with this orchestrator`;
    return failureResponse(
      this.base(command, started),
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

  private breaker(agent: string): CircuitBreaker {
    let breaker = this.breakers.get(agent);
    if (!breaker) {
      breaker = new CircuitBreaker({
        failureThreshold: this.config.circuit_breaker.failure_threshold,
        resetTimeoutMs: this.config.circuit_breaker.reset_timeout,
      });
      this.breakers.set(agent, breaker);
    }
    return breaker;
  }

  private base(command: { id: string }, started: number) {
    return { commandId: command.id, from: this.id, durationMs: performance.now() - started };
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

/** The dispatch's outcome, or a rejection with the signal's reason as soon as it aborts. */
function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
