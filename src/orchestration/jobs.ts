import { z } from "zod";
import { AgentId } from "../protocol/index.js";
import type { Outcome } from "./patterns.js";
import { AgentCommand, type CommandDraft } from "./schemas.js";
import { readYamlFile } from "./yaml.js";

/**
 * The YAML job files of `acp command broadcast|scatter|pipeline FILE.yaml`. Commands are written
 * as drafts (to, action, priority, parameters, context, security); the orchestrator adds id,
 * timestamp, version and from. Errors name the file, line and key path.
 */
const draftShape = {
  action: AgentCommand.shape.action,
  priority: AgentCommand.shape.priority.optional(),
  parameters: AgentCommand.shape.parameters.optional(),
  context: AgentCommand.shape.context,
  security: AgentCommand.shape.security,
};
const Draft = z.strictObject({ to: AgentId, ...draftShape });
const PartialDraft = z.strictObject({
  to: AgentId.optional(),
  ...draftShape,
  action: draftShape.action.optional(),
});

/** Named aggregation functions for scatter-gather files (the library takes any function). */
export const aggregators = {
  /** `{ agent: data }` (a second command to the same agent is keyed `agent#2`). */
  collect: (successes: Outcome[]) => {
    const out: Record<string, unknown> = {};
    for (const outcome of successes) {
      let key = outcome.agent;
      for (let n = 2; key in out; n++) key = `${outcome.agent}#${n}`;
      out[key] = outcome.response.results.data;
    }
    return out;
  },
  /** Shallow merge of object results, in command order. */
  merge: (successes: Outcome[]) =>
    Object.assign(
      {},
      ...successes
        .map((o) => o.response.results.data)
        .filter((d) => typeof d === "object" && d !== null && !Array.isArray(d)),
    ),
  /** Array results concatenated (other results appended as elements). */
  concat: (successes: Outcome[]) => successes.flatMap((o) => o.response.results.data ?? []),
} as const;
export type AggregatorName = keyof typeof aggregators;

export const BroadcastJob = z.strictObject({
  targets: z.array(AgentId).min(1, "needs at least one agent"),
  ...draftShape,
});
export const ScatterJob = z.strictObject({
  /** Merged under each command (its parameters merged key by key). */
  defaults: PartialDraft.optional(),
  commands: z.array(PartialDraft).min(1, "needs at least one command"),
  min_success: z.int({ error: "must be a whole number" }).nonnegative().optional(),
  deadline_ms: z.int({ error: "must be a whole number of milliseconds" }).positive().optional(),
  aggregate: z.enum(Object.keys(aggregators) as [AggregatorName, ...AggregatorName[]]).default("collect"),
});
export const PipelineJob = z.strictObject({
  steps: z.array(Draft.extend({ input: z.string().min(1).optional() })).min(1, "needs at least one step"),
  continue_on_failure: z.boolean().default(false),
});

export type BroadcastJob = z.output<typeof BroadcastJob>;
export type ScatterJob = z.output<typeof ScatterJob>;
export type PipelineJob = z.output<typeof PipelineJob>;

export const loadBroadcastJob = (file: string) => readYamlFile(file, BroadcastJob);
export const loadPipelineJob = (file: string) => readYamlFile(file, PipelineJob);

/** The scatter job with defaults applied; every command must end up with `to` and `action`. */
export async function loadScatterJob(file: string): Promise<ScatterJob & { drafts: CommandDraft[] }> {
  const Complete = ScatterJob.superRefine((job, ctx) => {
    job.commands.forEach((command, index) => {
      for (const key of ["to", "action"] as const) {
        if (command[key] === undefined && job.defaults?.[key] === undefined) {
          ctx.addIssue({
            code: "custom",
            path: ["commands", index, key],
            message: "is required (here or in defaults)",
          });
        }
      }
    });
    if (job.min_success !== undefined && job.min_success > job.commands.length) {
      ctx.addIssue({
        code: "custom",
        path: ["min_success"],
        message: `must be at most the ${job.commands.length} commands`,
      });
    }
  });
  const job = await readYamlFile(file, Complete);
  const drafts = job.commands.map((command) => {
    const merged = { ...job.defaults, ...command };
    const parameters = { ...job.defaults?.parameters, ...command.parameters };
    return { ...merged, parameters } as CommandDraft;
  });
  return { ...job, drafts };
}
