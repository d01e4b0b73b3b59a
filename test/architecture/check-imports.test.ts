import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { useTmpDir } from "../helpers/tmp.js";

const SCRIPT = fileURLToPath(new URL("../../scripts/check-imports.mjs", import.meta.url));
const SRC = fileURLToPath(new URL("../../src", import.meta.url));

function run(root: string) {
  const result = spawnSync(process.execPath, [SCRIPT, root], { encoding: "utf8" });
  return { status: result.status, stderr: result.stderr, stdout: result.stdout };
}

function tree(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

describe("the import-direction rule (scripts/check-imports.mjs)", () => {
  const tmp = useTmpDir("acp-imports-");

  it("passes on the project's sources", () => {
    const result = run(SRC);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  it("names file:line of each violation: upward, into an extension, between extensions, a cycle", () => {
    const root = tmp();
    tree(root, {
      "protocol/index.ts": "export const x = 1;\n",
      "client/agent.ts": '// the SDK\nimport { startGateway } from "../gateway/gateway.js";\n',
      "gateway/gateway.ts":
        'import type { P } from "../protocol/index.js";\nexport { dash } from "../extensions/dashboard/extension.js";\n',
      "extensions/dashboard/extension.ts": 'import "../collab/store.js";\nexport const dash = 1;\n',
      "extensions/collab/store.ts": 'import { x } from "../../protocol/index.js";\n',
      "identity/files.ts": 'import { a } from "../audit/log.js";\n',
      "audit/log.ts": '\n\nimport { f } from "../identity/files.js";\n',
      "server.ts": 'import { dash } from "./extensions/dashboard/extension.js";\n',
    });
    const result = run(root);
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^client\/agent\.ts:2: client imports gateway\/gateway\.js, a higher layer/),
        expect.stringMatching(
          /^gateway\/gateway\.ts:2: imports extensions\/dashboard\/extension\.js; only the composition root/,
        ),
        expect.stringMatching(
          /^extensions\/dashboard\/extension\.ts:1: imports extensions\/collab\/store\.js; only the composition root/,
        ),
        expect.stringMatching(
          /^identity\/files\.ts:1: identity imports audit\/log\.js, a folder of its own layer/,
        ),
        expect.stringMatching(
          /^audit\/log\.ts:3: audit imports identity\/files\.js, a folder of its own layer/,
        ),
        expect.stringMatching(
          /closes an import cycle between folders: (identity → audit → identity|audit → identity → audit)/,
        ),
      ]),
    );
    // The composition root may import extensions; a lower layer's import is fine.
    expect(result.stderr).not.toMatch(/^server\.ts/m);
    expect(result.stderr).not.toMatch(/extensions\/collab\/store\.ts/);
    expect(lines.at(-1)).toBe(`${lines.length - 1} import rule violations`);
  });
});
