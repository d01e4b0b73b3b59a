/**
 * The code users copy is code that compiles: each example under examples/ is type-checked by
 * `npm run check` (tsconfig.json maps `acp-kit/*` to the sources), and every copy of it shown to
 * users (a fenced block after `<!-- example: examples/x.ts -->` in the README or docs/, an
 * `@example … (examples/x.ts …)` doc comment in src/) must be identical to the file, so the
 * README can never drift from the API.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

function* files(dir: string, pattern: RegExp): Generator<string> {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) yield* files(path, pattern);
    else if (pattern.test(entry.name)) yield path;
  }
}

interface Copy {
  where: string;
  example: string;
  text: string;
}

/** Fenced blocks marked `<!-- example: examples/x.ts -->` in a Markdown file. */
function markdownCopies(path: string): Copy[] {
  const marked = /<!-- example: (examples\/[\w-]+\.ts) -->\n```ts\n([\s\S]*?)```\n/g;
  return [...read(path).matchAll(marked)].map((m) => ({
    where: path,
    example: m[1] ?? "",
    text: m[2] ?? "",
  }));
}

/** `@example … (examples/x.ts …)` doc comments with a ```ts block, their ` * ` margins removed. */
function docCommentCopies(path: string): Copy[] {
  const tagged = /@example[^\n]*?\((examples\/[\w-]+\.ts)[\s\S]*?\n \* ```ts\n((?: \*.*\n)*?) \* ```\n/g;
  return [...read(path).matchAll(tagged)].map((m) => ({
    where: path,
    example: m[1] ?? "",
    text: (m[2] ?? "").replace(/^ \* ?/gm, ""),
  }));
}

const copies = [
  ...["README.md", ...files("docs", /\.md$/)].flatMap(markdownCopies),
  ...[...files("src", /\.ts$/)].flatMap(docCommentCopies),
];
const examples = [...files("examples", /\.ts$/)];

describe("examples shown to users", () => {
  it("the README shows the quickstart and AcpAgent's doc comment carries it", () => {
    const shown = copies
      .filter((copy) => copy.example === "examples/quickstart.ts")
      .map((copy) => copy.where);
    expect(shown).toEqual(expect.arrayContaining(["README.md", "src/client/agent.ts"]));
  });

  it("every example is shown somewhere", () => {
    const shown = new Set(copies.map((copy) => copy.example));
    expect(examples.filter((example) => !shown.has(example))).toEqual([]);
  });

  for (const copy of copies) {
    it(`${copy.where} shows ${copy.example} exactly as it is`, () => {
      expect(copy.text).toBe(read(copy.example));
    });
  }
});
