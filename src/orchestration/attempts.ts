import { randomUUID } from "node:crypto";
import { type BreakerState, CircuitBreaker } from "./breaker.js";
import { type OrchestrationConfig, timeoutFor } from "./config.js";
import { TimeoutAbort } from "./errors.js";
import { ConcurrencyLimiter } from "../client/limiter.js";
import type { OrchestrationMetrics } from "./metrics.js";
import { baseOf, cancelledResponse, failureReason, failureResponse } from "./responses.js";
import { backoffDelay, backoffPolicyFor, isRetriable, sleep } from "./retry.js";
import { type AgentCommand, type AgentResponse, isSuccessful } from "./schemas.js";
import type { Target } from "./targets.js";

/**
 * How one command reaches one agent: attempts with retries and backoff, each through the agent's
 * circuit breaker, a concurrency slot and a timeout. Every response it gives back has been recorded
 * (`record`) once it is final; with audit_level detailed, every attempt's.
 */
export class Attempts {
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly limiter: ConcurrencyLimiter;

  constructor(
    private readonly settings: {
      id: string;
      principal: string | undefined;
      config: OrchestrationConfig;
      metrics: OrchestrationMetrics;
      random: () => number;
      record: (response: AgentResponse, command: AgentCommand) => Promise<AgentResponse>;
    },
  ) {
    this.limiter = new ConcurrencyLimiter(settings.config.performance.max_parallel);
  }

  breakerState(agent: string): BreakerState {
    return this.breakers.get(agent)?.state ?? "closed";
  }

  forget(agent: string): void {
    this.breakers.delete(agent);
  }

  /**
   * Attempts until success, a failure that is not retriable, or the attempt budget; waits back off
   * between. The final response says how many attempts were made and how long they took in all. When
   * the circuit opens during the retries, the answer is the last real failure (not the bare
   * `circuit_open` refusal, which would hide what went wrong), saying that the circuit is now open.
   */
  async withRetries(
    command: AgentCommand,
    target: Target,
    signal: AbortSignal | undefined,
  ): Promise<AgentResponse> {
    const policy = backoffPolicyFor(command, this.settings.config);
    const detailed = this.settings.config.security.audit_level === "detailed";
    const started = performance.now();
    let lastFailure: AgentResponse | undefined;
    const final = (response: AgentResponse, attempts: number) =>
      this.settings.record(withAttempts(response, attempts, performance.now() - started), command);
    for (let attempt = 1; ; attempt++) {
      const response = await this.attempt(command, target, attempt, signal);
      if (failureReason(response) === "circuit_open") {
        // Refused without reaching the agent: not an attempt.
        return final(lastFailure ? circuitOpenedAfter(lastFailure, response) : response, attempt - 1);
      }
      if (!isSuccessful(response)) lastFailure = response;
      const last = attempt >= policy.maxAttempts || !isRetriable(response) || signal?.aborted;
      if (last) return final(response, attempt);
      if (detailed) await this.settings.record(response, command);
      try {
        await sleep(backoffDelay(policy, attempt, this.settings.random), signal);
      } catch (reason) {
        return final(this.aborted(command, reason, performance.now()), attempt);
      }
    }
  }

  /** One attempt: circuit, concurrency slot, timeout, dispatch; the outcome settles the circuit. */
  async attempt(
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
    const timeoutMs = command.context?.timeout ?? timeoutFor(this.settings.config, command.priority);
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
          principal: this.settings.principal,
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
    this.settings.metrics.observe(target.id, response.status, performance.now() - started);
    return response;
  }

  aborted(command: AgentCommand, reason: unknown, started: number): AgentResponse {
    const base = baseOf(this.settings.id, command, started);
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

  circuitOpen(command: AgentCommand, target: Target, started: number): AgentResponse {
    this.settings.metrics.circuitRejected(target.id);
    const breaker = this.breaker(target.id);
    const retryAt = breaker.retryAt;
    const message = `the circuit to ${target.id} is open after ${breaker.consecutiveFailures} consecutive failures${retryAt ? `; next trial after ${new Date(retryAt).toISOString()}` : ""}`;
    return failureResponse(baseOf(this.settings.id, command, started), {
      category: "system_error",
      recoverable: true,
      reason: "circuit_open",
      message,
    });
  }

  breaker(agent: string): CircuitBreaker {
    let breaker = this.breakers.get(agent);
    if (!breaker) {
      breaker = new CircuitBreaker({
        failureThreshold: this.settings.config.circuit_breaker.failure_threshold,
        resetTimeoutMs: this.settings.config.circuit_breaker.reset_timeout,
      });
      this.breakers.set(agent, breaker);
    }
    return breaker;
  }
}

/** The response with the attempt count and the whole time taken (an agent's own duration is kept). */
function withAttempts(response: AgentResponse, attempts: number, totalMs: number): AgentResponse {
  const totalDuration = Math.max(0, Math.round(totalMs));
  return {
    ...response,
    execution: {
      ...response.execution,
      duration: response.execution?.duration ?? totalDuration,
      attempts,
      totalDuration,
    },
  };
}

/** The last real failure, re-issued (new id) with the news that the circuit opened after it. */
function circuitOpenedAfter(failure: AgentResponse, refusal: AgentResponse): AgentResponse {
  const opened = refusal.error?.message ?? "the circuit is open";
  const message = `${failure.error?.message ?? failure.results.summary ?? failure.status}; not retried: ${opened}`;
  return {
    ...failure,
    id: randomUUID(),
    timestamp: new Date().toISOString(),
    results: { ...failure.results, summary: message },
    ...(failure.error ? { error: { ...failure.error, message } } : {}),
  };
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
