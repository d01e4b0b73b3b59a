import { s } from "./dom.js";
import type { SessionAgentView } from "./types.js";

const NODE_W = 176;
const NODE_H = 46;
const COL_GAP = 72;
const ROW_GAP = 18;
const PAD = 16;

interface Placed {
  name: string;
  status: string;
  x: number;
  y: number;
  missing: boolean;
}

/** Depth = length of the longest dependency chain below an agent; a cycle (invalid plan) counts as 0. */
function depths(agents: Map<string, string[]>): Map<string, number> {
  const depth = new Map<string, number>();
  const visiting = new Set<string>();
  const visit = (name: string): number => {
    const known = depth.get(name);
    if (known !== undefined) return known;
    if (visiting.has(name)) return 0;
    visiting.add(name);
    const deps = agents.get(name) ?? [];
    const value = deps.length === 0 ? 0 : 1 + Math.max(...deps.map(visit));
    visiting.delete(name);
    depth.set(name, value);
    return value;
  };
  for (const name of agents.keys()) visit(name);
  return depth;
}

function label(text: string, max = 22): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * A session's agents as a left-to-right dependency graph: an agent sits one column right of the
 * deepest agent it depends on; arrows point from a dependency to the agent that waits for it.
 */
export function dependencyGraph(agents: SessionAgentView[]): SVGSVGElement {
  const edges = new Map<string, string[]>();
  for (const agent of agents) edges.set(agent.name, agent.dependencies ?? []);
  // Dependencies that name no agent of the session are drawn too, dashed, so the gap is visible.
  for (const deps of [...edges.values()]) for (const dep of deps) if (!edges.has(dep)) edges.set(dep, []);
  const status = new Map(agents.map((a) => [a.name, a.status as string]));
  const depth = depths(edges);
  const columnCount = Math.max(0, ...depth.values()) + 1;
  const columns: string[][] = Array.from({ length: columnCount }, () => []);
  for (const [name, d] of depth) columns[d]?.push(name);
  const placed = new Map<string, Placed>();
  columns.forEach((names, col) => {
    names.sort().forEach((name, row) => {
      placed.set(name, {
        name,
        status: status.get(name) ?? "missing",
        x: PAD + col * (NODE_W + COL_GAP),
        y: PAD + row * (NODE_H + ROW_GAP),
        missing: !status.has(name),
      });
    });
  });
  const rows = Math.max(1, ...columns.map((c) => c.length));
  const width = PAD * 2 + Math.max(1, columns.length) * NODE_W + Math.max(0, columns.length - 1) * COL_GAP;
  const height = PAD * 2 + rows * NODE_H + (rows - 1) * ROW_GAP;

  const arrows = [...edges].flatMap(([name, deps]) =>
    deps.map((dep) => {
      const from = placed.get(dep);
      const to = placed.get(name);
      if (!from || !to) return null;
      const [x1, y1, x2, y2] = [from.x + NODE_W, from.y + NODE_H / 2, to.x - 4, to.y + NODE_H / 2];
      const bend = Math.max(24, (x2 - x1) / 2);
      return s(
        "path",
        {
          class: "edge",
          d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`,
          "marker-end": "url(#arrow)",
        },
        s("title", {}, `${name} depends on ${dep}`),
      );
    }),
  );
  const nodes = [...placed.values()].map((node) =>
    s(
      "g",
      {
        class: `node node-${node.status}${node.missing ? " node-missing" : ""}`,
        transform: `translate(${node.x},${node.y})`,
      },
      s(
        "title",
        {},
        `${node.name}: ${node.missing ? "not an agent of this session" : node.status.replace(/_/g, " ")}`,
      ),
      s("rect", { width: NODE_W, height: NODE_H, rx: 8, ry: 8 }),
      s("text", { x: 12, y: 19, class: "node-name" }, label(node.name)),
      s(
        "text",
        { x: 12, y: 36, class: "node-status" },
        node.missing ? "missing" : node.status.replace(/_/g, " "),
      ),
    ),
  );
  const described = agents
    .map(
      (a) =>
        `${a.name} (${a.status}${(a.dependencies ?? []).length > 0 ? `, after ${(a.dependencies ?? []).join(", ")}` : ""})`,
    )
    .join("; ");
  return s(
    "svg",
    {
      class: "graph",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": `Dependency graph: ${described || "no agents"}`,
    },
    s(
      "defs",
      {},
      s(
        "marker",
        {
          id: "arrow",
          viewBox: "0 0 10 10",
          refX: 9,
          refY: 5,
          markerWidth: 8,
          markerHeight: 8,
          orient: "auto-start-reverse",
        },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }),
      ),
    ),
    arrows,
    nodes,
  );
}
