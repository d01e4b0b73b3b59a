/**
 * The package as a dependency: `npm pack`ed, installed in a fresh TypeScript project with strict
 * settings and `skipLibCheck: false`, a program using every subpath export type-checks. So the
 * published declarations name only what a consumer installs: the package's dependencies and the
 * consumer's own @types/node, never a devDependency's types (TS7016).
 *
 * Offline and quick: the tarball is unpacked into the scratch project's node_modules, as
 * `npm install <tarball>` would put it, and the package's production dependencies (`npm ls
 * --omit=dev`) are linked from this repository's node_modules; `preserveSymlinks` keeps the
 * compiler from finding anything else through the links' real paths.
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLE = fileURLToPath(new URL("./consumer/example.ts", import.meta.url));
const TSC = join(ROOT, "node_modules", ".bin", "tsc");
const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  exports: Record<string, unknown>;
  dependencies: Record<string, string>;
};

/** `tsc --init`'s strictness, with the library check on. */
const CONSUMER_TSCONFIG = {
  compilerOptions: {
    module: "nodenext",
    target: "esnext",
    types: ["node"],
    strict: true,
    noUncheckedIndexedAccess: true,
    // tsc --init also sets exactOptionalPropertyTypes, under which the NATS client's own declarations
    // (@nats-io/nats-core 3.x: MsgImpl, NatsConnectionImpl) fail, whoever depends on them.
    verbatimModuleSyntax: true,
    isolatedModules: true,
    noUncheckedSideEffectImports: true,
    moduleDetection: "force",
    skipLibCheck: false,
    preserveSymlinks: true,
    noEmit: true,
  },
  files: ["example.ts"],
};

/** The scratch project, shared by the tests below. */
let project = "";

function link(name: string): void {
  const target = join(project, "node_modules", name);
  mkdirSync(dirname(target), { recursive: true });
  symlinkSync(join(ROOT, "node_modules", name), target, "dir");
}

/** The top-level packages of the production dependency tree (nested ones come with their parent). */
function productionPackages(): string[] {
  const paths = execFileSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], {
    cwd: ROOT,
    encoding: "utf8",
  })
    .split("\n")
    .map((path) => relative(ROOT, path))
    .filter((path) => path.startsWith("node_modules/"));
  const names = paths.map((path) => {
    const [, first, second] = path.split("/");
    return first?.startsWith("@") ? `${first}/${second}` : (first ?? "");
  });
  return [...new Set(names)].sort();
}

/** Whether an installed package has declarations of its own (else they would come from @types). */
function shipsTypes(name: string): boolean {
  const dir = join(ROOT, "node_modules", name);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as Record<string, unknown>;
  return (
    "types" in pkg ||
    "typings" in pkg ||
    JSON.stringify(pkg["exports"] ?? {}).includes('"types"') ||
    existsSync(join(dir, "index.d.ts"))
  );
}

/** `@types/better-sqlite3` for `better-sqlite3`, `@types/scope__name` for `@scope/name`. */
const typesPackageOf = (name: string) => `@types/${name.replace(/^@([^/]+)\//, "$1__")}`;

/** The declaration files a consumer can reach: from each export's `types`, through relative imports. */
function reachableDeclarations(installed: string): string[] {
  const entries = Object.values(manifest.exports).flatMap((target) =>
    typeof target === "object" && target !== null && "types" in target ? [String(target.types)] : [],
  );
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file) || !existsSync(file)) return;
    seen.add(file);
    for (const [, specifier] of readFileSync(file, "utf8").matchAll(/(?:from |import\()"(\.[^"]*)"/g)) {
      visit(join(dirname(file), (specifier ?? "").replace(/\.js$/, ".d.ts")));
    }
  };
  for (const entry of entries) visit(join(installed, entry));
  return [...seen];
}

afterAll(() => rmSync(project, { recursive: true, force: true }));

beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), "acp-package-types-"));
  // dist/ is built by the global setup; pack it as published.
  const packed = execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", project], {
    cwd: ROOT,
    encoding: "utf8",
  });
  const [{ filename }] = JSON.parse(packed) as [{ filename: string }];
  const installed = join(project, "node_modules", "acp-kit");
  mkdirSync(installed, { recursive: true });
  execFileSync("tar", ["-xzf", join(project, filename), "-C", installed, "--strip-components=1"]);
  for (const name of productionPackages()) link(name);
  // The consumer's own: a Node project's types (and what they depend on).
  link("@types/node");
  link("undici-types");
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "consumer", type: "module", private: true }),
  );
  writeFileSync(join(project, "tsconfig.json"), JSON.stringify(CONSUMER_TSCONFIG, null, 2));
  writeFileSync(join(project, "example.ts"), readFileSync(EXAMPLE, "utf8"));
}, 120_000);

describe("acp-kit as a dependency of a TypeScript project", { timeout: 120_000 }, () => {
  it("the example imports every subpath export", () => {
    const imported = [...readFileSync(EXAMPLE, "utf8").matchAll(/from "(acp-kit(?:\/[\w-]+)?)"/g)].map(
      (m) => m[1],
    );
    const subpaths = Object.keys(manifest.exports)
      .filter((key) => key !== "./package.json")
      .map((key) => (key === "." ? "acp-kit" : `acp-kit/${key.slice(2)}`));
    expect([...new Set(imported)].sort()).toEqual(subpaths.sort());
  });

  it("the declarations a consumer reaches import only dependencies that bring their types, and Node's modules", () => {
    const installed = join(project, "node_modules", "acp-kit");
    const strays: string[] = [];
    const reachable = reachableDeclarations(installed);
    expect(reachable.length).toBeGreaterThan(100);
    for (const file of reachable) {
      const text = readFileSync(file, "utf8");
      for (const [, specifier] of text.matchAll(/(?:from |import\()"([^".][^"]*)"/g)) {
        const name = specifier?.startsWith("@")
          ? specifier.split("/").slice(0, 2).join("/")
          : specifier?.split("/")[0];
        if (name === undefined || name.startsWith("node:") || name === "acp-kit") continue;
        const typed =
          name in manifest.dependencies &&
          (shipsTypes(name) || typesPackageOf(name) in manifest.dependencies);
        if (!typed) strays.push(`${relative(installed, file)}: ${specifier}`);
      }
    }
    expect(strays).toEqual([]);
  });

  it("type-checks a program using every subpath export, with skipLibCheck off", () => {
    const result = spawnSync(TSC, ["-p", project], { encoding: "utf8" });
    expect(result.stdout + result.stderr).toBe("");
    expect(result.status).toBe(0);
  });
});
