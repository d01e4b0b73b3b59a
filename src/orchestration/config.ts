import { z } from "zod";
import { ACTIONS, type Action, PRIORITIES, type Priority } from "./schemas.js";
import { parseYamlWith, readYamlFile } from "./yaml.js";

/**
 * `acp.yaml`, the command layer's configuration: version, timeouts, retry, security, performance,
 * with the layer's values as defaults. Keys the layer does not have are marked "addition" and documented in
 * docs/orchestration.md. Every object is strict: an unknown key is an error naming it.
 */
const ms = (fallback: number) =>
  z.int({ error: "must be a whole number of milliseconds" }).positive("must be positive").default(fallback);

const Timeouts = z.strictObject({
  default: ms(30_000),
  low_priority: ms(60_000),
  high_priority: ms(15_000),
  /** Addition: the command layer has no critical level; it defaults to high_priority. */
  critical_priority: z.int({ error: "must be a whole number of milliseconds" }).positive().optional(),
});

const Retry = z.strictObject({
  max_attempts: z.int({ error: "must be a whole number" }).min(1, "must be at least 1").max(100).default(3),
  backoff_ms: z.int({ error: "must be a whole number of milliseconds" }).nonnegative().default(1000),
  backoff_multiplier: z.number({ error: "must be a number" }).min(1, "must be at least 1").default(2),
  /** Addition: no single wait is longer than this. */
  max_backoff_ms: ms(30_000),
  /** Addition: "equal jitter", each wait is uniformly between half and all of the computed backoff. */
  jitter: z.boolean({ error: "must be true or false" }).default(true),
});

const Security = z.strictObject({
  require_permissions: z.boolean({ error: "must be true or false" }).default(true),
  /** Commands at or above this priority need a human approval; `none` turns the threshold off. */
  approval_threshold: z
    .enum([...PRIORITIES, "none"], { error: `must be one of ${[...PRIORITIES, "none"].join(", ")}` })
    .default("high"),
  /** basic: commands and final responses; detailed: also every retried attempt and fallback. */
  audit_level: z.enum(["basic", "detailed"], { error: "must be basic or detailed" }).default("detailed"),
  /** Addition: how long a command waits for its approval before it fails. */
  approval_timeout: ms(15 * 60_000),
});

const Performance = z.strictObject({
  enable_caching: z.boolean({ error: "must be true or false" }).default(true),
  /** Seconds, as in the command layer. */
  cache_ttl: z.int({ error: "must be a whole number of seconds" }).nonnegative().default(3600),
  max_parallel: z.int({ error: "must be a whole number" }).min(1, "must be at least 1").default(5),
  /** Addition: actions whose successful responses are cached without asking per command. */
  cacheable_actions: z.array(z.enum(ACTIONS, { error: `must be one of ${ACTIONS.join(", ")}` })).default([]),
});

/** Addition: the per-agent circuit breaker. */
const CircuitBreaker = z.strictObject({
  failure_threshold: z.int({ error: "must be a whole number" }).min(1, "must be at least 1").default(5),
  reset_timeout: ms(30_000),
});

export const AcpConfigSchema = z.strictObject({
  version: z
    .union([z.literal("2.0"), z.literal(2)], { error: 'must be "2.0"' })
    .transform(() => "2.0" as const)
    .default("2.0"),
  timeouts: Timeouts.default(Timeouts.parse({})),
  retry: Retry.default(Retry.parse({})),
  security: Security.default(Security.parse({})),
  performance: Performance.default(Performance.parse({})),
  circuit_breaker: CircuitBreaker.default(CircuitBreaker.parse({})),
});

export const ConfigFileSchema = z.strictObject({ acp: AcpConfigSchema.default(AcpConfigSchema.parse({})) });

export type OrchestrationConfig = z.output<typeof AcpConfigSchema>;
export type OrchestrationConfigInput = z.input<typeof AcpConfigSchema>;

/** The command layer's defaults, plus the additions' defaults. */
export function defaultConfig(): OrchestrationConfig {
  return AcpConfigSchema.parse({});
}

/** The whole file's shape, `{ acp: { … } }`, as `acp.yaml` has it. */
export type ConfigFileInput = z.input<typeof ConfigFileSchema>;

/**
 * Validates a config given in code: the `acp:` section's content, or the whole file's shape
 * (`{ acp: { … } }`, e.g. a parsed acp.yaml); errors name the key path.
 */
export function resolveConfig(
  input: OrchestrationConfigInput | ConfigFileInput = {},
  source = "config",
): OrchestrationConfig {
  const file = "acp" in input ? input : { acp: input };
  return parseYamlWith(JSON.stringify(file), source, ConfigFileSchema).acp;
}

/**
 * Parses and validates an acp.yaml text (`{ acp: { … } }`); a bad value is a ConfigError naming `file` and
 * the key path.
 */
export function parseConfig(text: string, file = "acp.yaml"): OrchestrationConfig {
  return parseYamlWith(text, file, ConfigFileSchema).acp;
}

/** Reads and validates an acp.yaml file, as `parseConfig` does its text. */
export async function loadConfig(file: string): Promise<OrchestrationConfig> {
  return (await readYamlFile(file, ConfigFileSchema)).acp;
}

/** The execution timeout of a command that does not set `context.timeout`. */
export function timeoutFor(config: OrchestrationConfig, priority: Priority): number {
  switch (priority) {
    case "low":
      return config.timeouts.low_priority;
    case "high":
      return config.timeouts.high_priority;
    case "critical":
      return config.timeouts.critical_priority ?? config.timeouts.high_priority;
    default:
      return config.timeouts.default;
  }
}

export function needsApprovalByPriority(config: OrchestrationConfig, priority: Priority): boolean {
  const threshold = config.security.approval_threshold;
  return threshold !== "none" && PRIORITIES.indexOf(priority) >= PRIORITIES.indexOf(threshold);
}

export function isCacheableAction(config: OrchestrationConfig, action: Action): boolean {
  return config.performance.cacheable_actions.includes(action);
}
