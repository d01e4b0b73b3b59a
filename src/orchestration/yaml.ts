import { readFile } from "node:fs/promises";
import { isNode, LineCounter, parseDocument } from "yaml";
import type { z } from "zod";
import { ConfigError } from "./errors.js";

/** `acp.timeouts.default`, `steps[1].to`: how people read a YAML key path. */
export function keyPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const token of path) {
    if (typeof token === "number") out += `[${token}]`;
    else out += out === "" ? String(token) : `.${String(token)}`;
  }
  return out || "(document)";
}

/**
 * Parses YAML text and validates it with a zod schema. Every problem names the file, the line and
 * the key path (`acp.yaml:7: acp.retry.max_attempts: …`); an unknown key is reported at the key.
 */
export function parseYamlWith<S extends z.ZodType>(text: string, file: string, schema: S): z.output<S> {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const problems = doc.errors.map((err) => ({
      path: "(syntax)",
      line: lineCounter.linePos(err.pos[0]).line,
      message: err.message.split("\n")[0] ?? err.message,
    }));
    throw new ConfigError(
      `${file}:${problems[0]?.line}: not valid YAML (${problems[0]?.message})`,
      file,
      problems,
    );
  }
  const parsed = schema.safeParse(doc.toJS() ?? {});
  if (parsed.success) return parsed.data;
  const lineOf = (path: readonly PropertyKey[]): number | undefined => {
    for (let depth = path.length; depth >= 0; depth--) {
      const node = doc.getIn(path.slice(0, depth) as unknown[], true);
      if (isNode(node) && node.range) return lineCounter.linePos(node.range[0]).line;
    }
    return undefined;
  };
  const problems: { path: string; line?: number; message: string }[] = [];
  for (const issue of parsed.error.issues) {
    const keys = issue.code === "unrecognized_keys" ? issue.keys : [undefined];
    for (const key of keys) {
      const path = key === undefined ? issue.path : [...issue.path, key];
      const line = lineOf(path);
      problems.push({
        path: keyPath(path),
        ...(line !== undefined ? { line } : {}),
        message: key === undefined ? issue.message : "unknown key",
      });
    }
  }
  const lines = problems.map(
    (p) => `${file}${p.line !== undefined ? `:${p.line}` : ""}: ${p.path}: ${p.message}`,
  );
  throw new ConfigError(lines.join("\n"), file, problems);
}

export async function readYamlFile<S extends z.ZodType>(file: string, schema: S): Promise<z.output<S>> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ConfigError(
      `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
      file,
    );
  }
  return parseYamlWith(text, file, schema);
}
