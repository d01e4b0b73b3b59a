/**
 * The public surface of each subpath export, held to a checked list (public-surface.json): a name
 * added to a barrel by accident (an internal helper, a re-export that drags a module's internals
 * along) fails here, and so does one removed. Changing the surface is deliberate: edit the barrel,
 * this list and the docs together. Each subpath has two lists: its runtime values (what `import()`
 * of the built module yields) and its type-only names (read from its declaration file in dist/).
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const manifest = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as {
  exports: Record<string, string | { types: string; default: string }>;
};
const expected = JSON.parse(
  readFileSync(fileURLToPath(new URL("./public-surface.json", import.meta.url)), "utf8"),
) as Record<string, { values: string[]; types: string[] }>;

/** `acp-kit`, `acp-kit/protocol`, …: every subpath a consumer can import. */
const subpaths = Object.keys(manifest.exports)
  .filter((key) => key !== "./package.json")
  .map((key) => (key === "." ? "acp-kit" : `acp-kit/${key.slice(2)}`));

/** The runtime names of every subpath, imported through the package's exports map from dist/. */
function surfaces(): Record<string, string[]> {
  const script = `
    const out = {};
    for (const spec of ${JSON.stringify(subpaths)}) out[spec] = Object.keys(await import(spec)).sort();
    process.stdout.write(JSON.stringify(out));
  `;
  const result = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(`importing the subpaths failed:\n${result.stderr}`);
  return JSON.parse(result.stdout) as Record<string, string[]>;
}

/** Every name a declaration file exports, values and types alike (tsc's output: one statement a line). */
function declaredNames(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const names = new Set<string>();
  for (const [, list] of text.matchAll(/^export (?:type )?\{([^}]*)\}/gm)) {
    for (const item of (list ?? "").split(",")) {
      const name = item
        .trim()
        .replace(/^type /, "")
        .split(" as ")
        .pop()
        ?.trim();
      if (name) names.add(name);
    }
  }
  const declaration =
    /^export (?:declare )?(?:abstract )?(?:function|const|let|class|enum|interface|type) (\w+)/gm;
  for (const [, name] of text.matchAll(declaration)) if (name) names.add(name);
  return [...names].sort();
}

/** The built declaration file of a subpath: `./dist/protocol/index.d.ts`. */
function declarationsOf(key: string): string {
  const target = manifest.exports[key];
  return `${ROOT}/${typeof target === "string" ? target : (target?.types ?? "")}`;
}

/** The source barrel behind a subpath: dist/protocol/index.js ← src/protocol/index.ts. */
function barrelOf(key: string): string {
  const target = manifest.exports[key];
  const built = typeof target === "string" ? target : (target?.default ?? "");
  return built.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts");
}

describe("public surface of each subpath export", () => {
  const actual = surfaces();

  it("lists every subpath but the root, which is the protocol's", () => {
    expect(Object.keys(expected).sort()).toEqual(subpaths.filter((s) => s !== "acp-kit").sort());
    expect(actual["acp-kit"]).toEqual(actual["acp-kit/protocol"]);
  });

  for (const key of Object.keys(manifest.exports).filter((k) => k !== "./package.json" && k !== ".")) {
    const subpath = `acp-kit/${key.slice(2)}`;
    const listed = expected[subpath] ?? { values: [], types: [] };

    it(`${subpath} exports exactly the runtime values in public-surface.json`, () => {
      const names = actual[subpath] ?? [];
      const unlisted = names.filter((name) => !listed.values.includes(name));
      const missing = listed.values.filter((name) => !names.includes(name));
      expect({ unlisted, missing }).toEqual({ unlisted: [], missing: [] });
    });

    it(`${subpath} exports exactly the types in public-surface.json`, () => {
      const values = actual[subpath] ?? [];
      const types = declaredNames(declarationsOf(key)).filter((name) => !values.includes(name));
      const unlisted = types.filter((name) => !listed.types.includes(name));
      const missing = listed.types.filter((name) => !types.includes(name));
      expect({ unlisted, missing }).toEqual({ unlisted: [], missing: [] });
    });
  }

  it("each subpath's barrel names what it exports (no export *, except the root re-exporting the protocol)", () => {
    const wildcards = Object.keys(manifest.exports)
      .filter((key) => key !== "./package.json" && key !== ".")
      .map(barrelOf)
      .filter((file) => /^export \*/m.test(readFileSync(`${ROOT}/${file}`, "utf8")));
    expect(wildcards).toEqual([]);
  });
});
