import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const HEAVY = [
  "better-sqlite3",
  "@nats-io/nats-core",
  "@nats-io/transport-node",
  "@nats-io/jetstream",
  "@nats-io/kv",
] as const;
type Heavy = (typeof HEAVY)[number];
const NATS: Heavy[] = ["@nats-io/nats-core", "@nats-io/transport-node", "@nats-io/jetstream", "@nats-io/kv"];

/**
 * Imports `specifier` (through the package's own exports map, from dist/) in a fresh `node`, runs
 * `then` with the module as `m`, and says which heavy modules got loaded. All of them are CommonJS,
 * so the CommonJS cache shows them however they were reached.
 */
function loadedBy(specifier: string, then = ""): Heavy[] {
  const script = `
    import { createRequire } from "node:module";
    const m = await import(${JSON.stringify(specifier)});
    ${then}
    const cache = Object.keys(createRequire(import.meta.url).cache);
    const heavy = ${JSON.stringify(HEAVY)};
    process.stdout.write(JSON.stringify(heavy.filter((name) => cache.some((p) => p.includes("/node_modules/" + name + "/")))));
  `;
  const result = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(`importing ${specifier} failed:\n${result.stderr}`);
  return JSON.parse(result.stdout) as Heavy[];
}

/** What importing each public subpath may load: nothing heavy unless the subpath is about it. */
const EXPECTED: Record<string, Heavy[]> = {
  "acp-kit": [],
  "acp-kit/protocol": [],
  "acp-kit/identity": [],
  "acp-kit/handshake": [],
  "acp-kit/audit": [],
  // The broker subpath exports both drivers' classes (EmbeddedBroker, NatsBroker).
  "acp-kit/broker": [...HEAVY],
  // The gateway loads the driver it is started with, not at import.
  "acp-kit/gateway": [],
  "acp-kit/client": [],
  "acp-kit/mcp": [],
  "acp-kit/coordination": [],
  "acp-kit/orchestration": [],
  "acp-kit/collab": [],
  "acp-kit/dashboard": [],
  "acp-kit/server": [],
};

describe("package subpaths load only what they need (fresh node, from dist)", () => {
  it("covers every subpath of package.json's exports", () => {
    const exports = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")).exports as Record<
      string,
      unknown
    >;
    const subpaths = Object.keys(exports)
      .filter((key) => key !== "./package.json")
      .map((key) => (key === "." ? "acp-kit" : `acp-kit/${key.slice(2)}`));
    expect(subpaths.sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  for (const [subpath, expected] of Object.entries(EXPECTED)) {
    it(`${subpath} loads ${expected.length === 0 ? "no native or NATS module" : expected.join(", ")}`, () => {
      expect(loadedBy(subpath).sort()).toEqual([...expected].sort());
    });
  }

  it("acp-kit/orchestration loads SQLite once a SQLite approval store is opened, and never NATS", () => {
    const loaded = loadedBy(
      "acp-kit/orchestration",
      `const { mkdtempSync, rmSync } = await import("node:fs");
       const dir = mkdtempSync((await import("node:os")).tmpdir() + "/acp-loads-");
       const store = m.SqliteApprovalStore.open(dir + "/approvals.db");
       await store.close?.();
       rmSync(dir, { recursive: true, force: true });`,
    );
    expect(loaded).toEqual(["better-sqlite3"]);
  });

  it("an embedded gateway loads SQLite but not the NATS client", () => {
    const loaded = loadedBy(
      "acp-kit/gateway",
      `const { mkdtempSync, rmSync } = await import("node:fs");
       const dir = mkdtempSync((await import("node:os")).tmpdir() + "/acp-loads-");
       const pino = (await import("pino")).default;
       const gateway = await m.startGateway({ port: 0, data: dir, adminToken: "acpadm_test-Vb7qK2xN9mR4tW8zL1cF6hJ3pS5dG0yQ", logger: pino({ level: "silent" }) });
       await gateway.close();
       rmSync(dir, { recursive: true, force: true });`,
    );
    expect(loaded).toEqual(["better-sqlite3"]);
    expect(loaded.some((name) => NATS.includes(name))).toBe(false);
  });
});
