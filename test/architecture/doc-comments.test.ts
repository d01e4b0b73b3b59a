/**
 * Every class and function a subpath export offers carries a doc comment, and so does each public
 * method of those classes: an editor shows it on hover, and it is the only documentation most users
 * of an API read. The check reads the declaration files tsc writes to dist/ (one declaration a line,
 * doc comments kept, members indented by four spaces), following each barrel's re-exports to the
 * module that declares the name, so a name re-exported from another module is held to the same rule.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const manifest = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as {
  exports: Record<string, string | { types: string; default: string }>;
};

/** A class or function declared in a declaration file, and the line it starts on. */
interface Declaration {
  kind: "class" | "function";
  file: string;
  line: number;
}

const cache = new Map<string, string[]>();
function linesOf(file: string): string[] {
  let lines = cache.get(file);
  if (!lines) {
    lines = readFileSync(file, "utf8").split("\n");
    cache.set(file, lines);
  }
  return lines;
}

/** `./entry.js` from dist/audit/index.d.ts → dist/audit/entry.d.ts (or …/entry/index.d.ts). */
function resolveModule(from: string, specifier: string): string {
  const base = join(dirname(from), specifier.replace(/\.js$/, ""));
  return existsSync(`${base}.d.ts`) ? `${base}.d.ts` : join(base, "index.d.ts");
}

/**
 * The classes and functions a declaration file exports, by exported name: its own declarations and,
 * through `export { a as b } from` and `export * from`, those of the modules it re-exports. Type-only
 * re-exports (`type X`) are types, not values, and are left out.
 */
function exportedDeclarations(file: string, seen = new Set<string>()): Map<string, Declaration> {
  const found = new Map<string, Declaration>();
  if (seen.has(file)) return found;
  seen.add(file);
  const lines = linesOf(file);
  const local = new Map<string, Declaration>();
  lines.forEach((text, line) => {
    const match = /^(export )?declare (?:abstract )?(class|function) ([\w$]+)/.exec(text);
    if (!match?.[3] || local.has(match[3])) return; // an overload's first line holds the comment
    local.set(match[3], { kind: match[2] as Declaration["kind"], file, line });
    if (match[1]) found.set(match[3], { kind: match[2] as Declaration["kind"], file, line });
  });
  const text = lines.join("\n");
  for (const [, typeOnly, list, from] of text.matchAll(
    /^export (type )?\{([^}]*)\}(?: from "([^"]+)")?;/gm,
  )) {
    if (typeOnly) continue;
    const source = from ? exportedDeclarations(resolveModule(file, from), seen) : local;
    for (const item of (list ?? "").split(",").map((entry) => entry.trim())) {
      if (!item || item.startsWith("type ")) continue;
      const [original = "", alias = original] = item.split(/\s+as\s+/);
      const declaration = source.get(original);
      if (declaration) found.set(alias, declaration);
    }
  }
  for (const [, from] of text.matchAll(/^export \* from "([^"]+)";/gm)) {
    for (const [name, declaration] of exportedDeclarations(resolveModule(file, from ?? ""), seen)) {
      if (!found.has(name)) found.set(name, declaration);
    }
  }
  seen.delete(file);
  return found;
}

/** The line above a declaration is the end of a doc comment. */
function documented(lines: string[], line: number): boolean {
  return lines[line - 1]?.trimEnd().endsWith("*/") ?? false;
}

/** A member of a class or interface body (four spaces in), or undefined for any other line. */
function memberOf(text: string): { name: string; method: boolean; hidden: boolean } | undefined {
  if (!/^ {4}\S/.test(text) || /^ {4}(\/\*\*|\*)/.test(text)) return undefined;
  const member = text.trim().replace(/^(?:(?:static|readonly|abstract|override|public|async)\s+)+/, "");
  const hidden = /^(private|protected)\b|^#private|^constructor\(/.test(member);
  const method = /^(?:(get|set) )?([\w$]+|\[[^\]]+\])\??(?:<.*>)?\(/.exec(member);
  if (method) return { name: `${method[1] ? `${method[1]} ` : ""}${method[2]}`, method: true, hidden };
  const property = /^([\w$]+)\??:/.exec(member);
  return property?.[1] ? { name: property[1], method: false, hidden } : undefined;
}

/** The documented members of an interface declared in `file` or imported into it, by name. */
function documentedInterfaceMembers(file: string, name: string): Set<string> {
  const members = new Set<string>();
  const lines = linesOf(file);
  const start = lines.findIndex((text) =>
    new RegExp(`^(export )?(declare )?interface ${name}\\b`).test(text),
  );
  if (start === -1) {
    const text = lines.join("\n");
    for (const [, list, from] of text.matchAll(/^import (?:type )?\{([^}]*)\} from "([^"]+)";/gm)) {
      const names = (list ?? "").split(",").map((item) => item.trim().replace(/^type /, ""));
      if (names.includes(name)) return documentedInterfaceMembers(resolveModule(file, from ?? ""), name);
    }
    return members;
  }
  for (let line = start + 1; line < lines.length && !lines[line]?.startsWith("}"); line += 1) {
    const member = memberOf(lines[line] ?? "");
    if (member && documented(lines, line)) members.add(member.name);
  }
  return members;
}

/**
 * A class's public methods (accessors and static methods too) that have no doc comment. Private and
 * protected members, the constructor and properties are left out; of an overloaded method, the first
 * signature carries the comment. A method of an interface the class implements may carry its
 * comment there instead: an editor shows the interface's comment on the class's method.
 */
function undocumentedMethods(declaration: Declaration): string[] {
  const lines = linesOf(declaration.file);
  const implemented = new Set<string>();
  const heading = /\bimplements (.*) \{$/.exec(lines[declaration.line] ?? "")?.[1] ?? "";
  for (const [name] of heading.matchAll(/\b[A-Z][\w$]*/g)) {
    for (const member of documentedInterfaceMembers(declaration.file, name)) implemented.add(member);
  }
  const missing: string[] = [];
  let previous = "";
  for (let line = declaration.line + 1; line < lines.length; line += 1) {
    const text = lines[line] ?? "";
    if (text.startsWith("}")) break;
    const member = memberOf(text);
    if (!member) continue;
    if (!member.method || member.hidden) {
      previous = "";
      continue;
    }
    const documentedHere = documented(lines, line) || implemented.has(member.name);
    if (member.name !== previous && !documentedHere) missing.push(member.name);
    previous = member.name;
  }
  return missing;
}

const subpaths = Object.entries(manifest.exports).filter(([key]) => key !== "./package.json" && key !== ".");

describe("doc comments on the public surface", () => {
  for (const [key, target] of subpaths) {
    const subpath = `acp-kit/${key.slice(2)}`;
    const barrel = `${ROOT}/${typeof target === "string" ? target : target.types}`;

    it(`${subpath}: every exported class and function, and each public method, has a doc comment`, () => {
      const missing: string[] = [];
      for (const [name, declaration] of exportedDeclarations(barrel)) {
        const where = relative(ROOT, declaration.file);
        if (!documented(linesOf(declaration.file), declaration.line)) missing.push(`${name} (${where})`);
        if (declaration.kind !== "class") continue;
        for (const method of undocumentedMethods(declaration)) missing.push(`${name}.${method} (${where})`);
      }
      expect(missing).toEqual([]);
    });
  }
});
