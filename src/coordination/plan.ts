/**
 * The coordinator's plan (`acp session run PLAN.yaml`): which agents, the command each runs, whom
 * each depends on, and how failures are handled. Checked whole before anything starts: a schema
 * error, an unknown dependency or a cycle names the file, the line and the field.
 */
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { LineCounter, parseDocument } from "yaml";
import { z } from "zod";
import { CoordinationError } from "./errors.js";
import { AgentNameSchema } from "./schemas.js";
import { formatPath, lineOfPath, validateWith } from "./validate.js";

const PlanAgentSchema = z.strictObject({
  /** A shell command line, or an argv array run without a shell. */
  command: z.union([z.string().min(1), z.array(z.string()).min(1)]),
  depends_on: z.array(AgentNameSchema).default([]),
  description: z.string().optional(),
  /** A critical agent's final failure stops the run; a non-critical one is continued without. */
  critical: z.boolean().optional(),
  /** Extra attempts after a failure. */
  retries: z.number().int().min(0).max(100).optional(),
  timeout_seconds: z.number().positive().optional(),
  cwd: z.string().optional(),
  env: z.record(z.string(), z.string()).default({}),
});

export const PlanSchema = z.strictObject({
  name: z.string().optional(),
  project_type: z.string().optional(),
  project_path: z.string().optional(),
  max_parallel: z.number().int().min(1).optional(),
  defaults: z
    .strictObject({
      critical: z.boolean().default(true),
      retries: z.number().int().min(0).max(100).default(0),
      timeout_seconds: z.number().positive().optional(),
    })
    .default({ critical: true, retries: 0 }),
  agents: z
    .record(AgentNameSchema, PlanAgentSchema)
    .refine((agents) => Object.keys(agents).length > 0, "a plan needs at least one agent"),
});
export type PlanInput = z.input<typeof PlanSchema>;

/** One agent of a checked plan, with the defaults applied and paths made absolute. */
export interface PlannedAgent {
  name: string;
  command: string | string[];
  dependsOn: string[];
  description?: string;
  critical: boolean;
  retries: number;
  timeoutMs?: number;
  cwd: string;
  env: Record<string, string>;
}

export interface Plan {
  file: string;
  name?: string;
  projectType?: string;
  projectPath?: string;
  maxParallel?: number;
  /** In plan order; `order` is a dependency-respecting order of the same names. */
  agents: PlannedAgent[];
  order: string[];
}

/** Reads and validates a plan file (YAML or JSON), as `parsePlan` does its text. */
export async function loadPlan(file: string): Promise<Plan> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new CoordinationError("not_found", `cannot read plan (${(err as NodeJS.ErrnoException).code})`, {
      file,
    });
  }
  return parsePlan(text, file);
}

/**
 * Validates a plan: its agents, their dependencies (no unknown name, no cycle) and their commands; an error
 * names `file`, the line and the field.
 */
export function parsePlan(text: string, file: string): Plan {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  const syntax = doc.errors[0];
  if (syntax !== undefined) {
    const detail = syntax.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
    throw new CoordinationError("invalid", `not valid YAML: ${detail}`, {
      file,
      line: syntax.linePos?.[0].line,
    });
  }
  const plan = validateWith(PlanSchema, doc.toJS(), { file, text });
  const fail = (detail: string, path: (string | number)[]): never => {
    throw new CoordinationError("invalid", detail, {
      file,
      line: lineOfPath(text, path),
      field: formatPath(path),
    });
  };
  for (const [name, agent] of Object.entries(plan.agents)) {
    agent.depends_on.forEach((dependency, i) => {
      if (!(dependency in plan.agents))
        fail(`unknown agent "${dependency}"`, ["agents", name, "depends_on", i]);
    });
  }
  const cycle = findCycle(Object.fromEntries(Object.entries(plan.agents).map(([n, a]) => [n, a.depends_on])));
  if (cycle !== undefined)
    fail(`dependency cycle: ${cycle.join(" → ")}`, ["agents", cycle[0]!, "depends_on"]);

  const base = dirname(resolve(file));
  const agents = Object.entries(plan.agents).map(([name, agent]): PlannedAgent => {
    const timeoutSeconds = agent.timeout_seconds ?? plan.defaults.timeout_seconds;
    return {
      name,
      command: agent.command,
      dependsOn: agent.depends_on,
      ...(agent.description !== undefined && { description: agent.description }),
      critical: agent.critical ?? plan.defaults.critical,
      retries: agent.retries ?? plan.defaults.retries,
      ...(timeoutSeconds !== undefined && { timeoutMs: timeoutSeconds * 1000 }),
      cwd: resolve(base, agent.cwd ?? "."),
      env: agent.env,
    };
  });
  return {
    file,
    ...(plan.name !== undefined && { name: plan.name }),
    ...(plan.project_type !== undefined && { projectType: plan.project_type }),
    ...(plan.project_path !== undefined && { projectPath: resolve(base, plan.project_path) }),
    ...(plan.max_parallel !== undefined && { maxParallel: plan.max_parallel }),
    agents,
    order: topologicalOrder(agents),
  };
}

/** A dependency cycle as `[a, b, …, a]`, or undefined when the graph is acyclic. */
export function findCycle(dependencies: Record<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, "visiting" | "done">();
  const stack: string[] = [];
  const visit = (name: string): string[] | undefined => {
    if (state.get(name) === "done") return undefined;
    if (state.get(name) === "visiting") return [...stack.slice(stack.indexOf(name)), name];
    state.set(name, "visiting");
    stack.push(name);
    for (const dependency of dependencies[name] ?? []) {
      const cycle = visit(dependency);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(name, "done");
    return undefined;
  };
  for (const name of Object.keys(dependencies)) {
    const cycle = visit(name);
    if (cycle) return cycle;
  }
  return undefined;
}

function topologicalOrder(agents: readonly PlannedAgent[]): string[] {
  const order: string[] = [];
  const placed = new Set<string>();
  while (order.length < agents.length) {
    for (const agent of agents) {
      if (!placed.has(agent.name) && agent.dependsOn.every((d) => placed.has(d))) {
        placed.add(agent.name);
        order.push(agent.name);
      }
    }
  }
  return order;
}
