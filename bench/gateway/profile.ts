/**
 * Reads the V8 CPU profile(s) a `node --cpu-prof` gateway wrote and lists the functions with the
 * most self time, so a run with BENCH_GATEWAY_PROFILE=1 ends with the gateway's hot spots.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface HotSpot {
  function: string;
  location: string;
  selfMs: number;
  selfPercent: number;
}

function locationOf(url: string, line: number, root: string): string {
  if (!url) return "";
  const path = url.startsWith("file://") ? relative(root, new URL(url).pathname) : url;
  return `${path}:${line + 1}`;
}

/** Where a function lives, coarsely: an npm package, a file of ours, node's internals, or V8 itself. */
function areaOf(url: string, functionName: string, root: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  if (url.startsWith("node:")) return "node internals";
  const path = url.startsWith("file://") ? relative(root, new URL(url).pathname) : url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (pkg) return `npm ${pkg[1]}`;
  return path.replace(/^\.bench-build\//, "");
}

export interface ProfileSummary {
  functions: HotSpot[];
  areas: { area: string; selfMs: number; selfPercent: number }[];
}

/** Self time per function and per area (summed over every profile in `dir`), idle time excluded. */
export function hotSpots(dir: string, root: string, top = 15): ProfileSummary {
  const selfMicros = new Map<string, { fn: string; location: string; micros: number }>();
  const areaMicros = new Map<string, number>();
  let total = 0;
  for (const file of readdirSync(dir).filter((name) => name.endsWith(".cpuprofile"))) {
    const profile = JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile;
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    profile.samples.forEach((id, index) => {
      const frame = byId.get(id)?.callFrame;
      if (!frame || frame.functionName === "(idle)") return;
      const micros = profile.timeDeltas[index] ?? 0;
      const location = locationOf(frame.url, frame.lineNumber, root);
      const key = `${frame.functionName}@${location}`;
      const entry = selfMicros.get(key) ?? { fn: frame.functionName || "(anonymous)", location, micros: 0 };
      entry.micros += micros;
      selfMicros.set(key, entry);
      const area = areaOf(frame.url, frame.functionName, root);
      areaMicros.set(area, (areaMicros.get(area) ?? 0) + micros);
      total += micros;
    });
  }
  const percent = (micros: number) => (total > 0 ? (micros / total) * 100 : 0);
  return {
    functions: [...selfMicros.values()]
      .sort((a, b) => b.micros - a.micros)
      .slice(0, top)
      .map((e) => ({
        function: e.fn,
        location: e.location,
        selfMs: e.micros / 1000,
        selfPercent: percent(e.micros),
      })),
    areas: [...areaMicros]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([area, micros]) => ({ area, selfMs: micros / 1000, selfPercent: percent(micros) })),
  };
}
