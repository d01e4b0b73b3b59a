#!/usr/bin/env node
/**
 * The import-direction rule of docs/architecture.md, checked by `npm run check`:
 * - a module imports only modules of its own layer's folder or of lower layers;
 * - nothing imports `src/extensions/**` except the composition root (src/server.ts), and one
 *   extension never imports another;
 * - the SDK (`src/client/**`) never imports the gateway or an extension (they are higher anyway);
 * - no import cycle between folders.
 * Type-only imports count: the rule is about what depends on what, not only what loads.
 * Usage: node scripts/check-imports.mjs [source root, default ./src]. Exits 1 naming file:line.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/** Layers, lowest first. A folder may import its own files and any folder of a lower layer. */
export const LAYERS = [
  ["protocol"],
  ["identity", "audit", "wire", "http"],
  ["handshake", "broker", "coordination"],
  ["collab", "mcp"],
  ["client"],
  ["gateway"],
  ["orchestration"],
  ["extensions"],
  ["server.ts"],
  ["cli", "index.ts"],
];

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*["']([^"']+)["']|\bimport\s*\(?\s*["']([^"']+)["']/g;

/** The unit a file belongs to: its top folder under src (each extension counts on its own). */
function unitOf(path) {
  const parts = path.replace(/\.js$/, ".ts").split("/");
  if (parts.length === 1) return parts[0];
  if (parts[0] === "extensions") return parts.length > 2 ? `extensions/${parts[1]}` : "extensions";
  return parts[0];
}

function layerOf(unit) {
  const top = unit.startsWith("extensions/") ? "extensions" : unit;
  const index = LAYERS.findIndex((layer) => layer.includes(top));
  return index === -1 ? undefined : index;
}

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mts|tsx)$/.test(name) && !name.endsWith(".d.ts")) yield path;
  }
}

/** Line number of a character offset. */
function lineAt(text, offset) {
  let line = 1;
  for (let i = 0; i < offset; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** Every violation in the tree under `root`, as `file:line: message` strings. */
export function checkImports(root) {
  const violations = [];
  const edges = new Map(); // unit → Map(unit → first "file:line")
  for (const file of sourceFiles(root)) {
    const from = relative(root, file).split(sep).join("/");
    const fromUnit = unitOf(from);
    const fromLayer = layerOf(fromUnit);
    const text = readFileSync(file, "utf8");
    if (fromLayer === undefined) {
      violations.push(`${from}:1: ${fromUnit} is in no layer; add it to LAYERS in scripts/check-imports.mjs`);
      continue;
    }
    for (const match of text.matchAll(IMPORT)) {
      const specifier = match[1] ?? match[2];
      if (!specifier?.startsWith(".")) continue;
      const target = relative(root, resolve(dirname(file), specifier))
        .split(sep)
        .join("/");
      if (target.startsWith("..")) continue;
      const toUnit = unitOf(target);
      if (toUnit === fromUnit) continue;
      // The match may start with the whitespace before the keyword.
      const where = `${from}:${lineAt(text, match.index + match[0].search(/\S/))}`;
      const toLayer = layerOf(toUnit);
      if (!edges.has(fromUnit)) edges.set(fromUnit, new Map());
      if (!edges.get(fromUnit).has(toUnit)) edges.get(fromUnit).set(toUnit, where);
      if (toUnit.startsWith("extensions") && fromUnit !== "server.ts") {
        violations.push(
          `${where}: imports ${target}; only the composition root (src/server.ts) imports extensions`,
        );
      } else if (toLayer === undefined) {
        violations.push(`${where}: imports ${target}, which is in no layer`);
      } else if (toLayer >= fromLayer) {
        const how = toLayer === fromLayer ? "a folder of its own layer" : "a higher layer";
        violations.push(
          `${where}: ${fromUnit} imports ${target}, ${how} (${toUnit}); see docs/architecture.md`,
        );
      }
    }
  }
  violations.push(...folderCycles(edges));
  return violations;
}

/** Cycles in the folder graph (each reported once, with the import that closes it). */
function folderCycles(edges) {
  const found = [];
  const state = new Map(); // unit → "open" | "done"
  const stack = [];
  const visit = (unit) => {
    state.set(unit, "open");
    stack.push(unit);
    for (const [next, where] of edges.get(unit) ?? []) {
      if (state.get(next) === "open") {
        const cycle = [...stack.slice(stack.indexOf(next)), next].join(" → ");
        found.push(`${where}: closes an import cycle between folders: ${cycle}`);
      } else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(unit, "done");
  };
  for (const unit of edges.keys()) if (!state.has(unit)) visit(unit);
  return found;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith("check-imports.mjs")) {
  const root = resolve(process.argv[2] ?? "src");
  const violations = checkImports(root);
  for (const violation of violations) console.error(violation);
  if (violations.length > 0) {
    console.error(`${violations.length} import rule violation${violations.length === 1 ? "" : "s"}`);
    process.exit(1);
  }
  console.log(`imports follow the layers (${root})`);
}
