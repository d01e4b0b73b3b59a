import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { timeoutFor } from "../../src/orchestration/config.js";
import {
  ConfigError,
  defaultConfig,
  loadConfig,
  parseConfig,
  resolveConfig,
} from "../../src/orchestration/index.js";
import { loadScatterJob } from "../../src/orchestration/jobs.js";
import { useTmpDir } from "../helpers/tmp.js";

const tmp = useTmpDir("acp-config-");

/** The command layer's example configuration, verbatim. */
const EXAMPLE_YAML = `acp:
  version: "2.0"

  timeouts:
    default: 30000      # 30 seconds
    low_priority: 60000
    high_priority: 15000

  retry:
    max_attempts: 3
    backoff_ms: 1000
    backoff_multiplier: 2

  security:
    require_permissions: true
    approval_threshold: high
    audit_level: detailed

  performance:
    enable_caching: true
    cache_ttl: 3600
    max_parallel: 5
`;

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("acp.yaml", () => {
  it("loads the command layer's example configuration, and its values are the defaults", async () => {
    const file = join(tmp(), "acp.yaml");
    writeFileSync(file, EXAMPLE_YAML);
    const config = await loadConfig(file);
    expect(config).toEqual(defaultConfig());
    expect(config).toMatchObject({
      version: "2.0",
      timeouts: { default: 30_000, low_priority: 60_000, high_priority: 15_000 },
      retry: { max_attempts: 3, backoff_ms: 1000, backoff_multiplier: 2 },
      security: { require_permissions: true, approval_threshold: "high", audit_level: "detailed" },
      performance: { enable_caching: true, cache_ttl: 3600, max_parallel: 5 },
    });
    expect(timeoutFor(config, "critical")).toBe(15_000);
  });

  it("fills what a partial file leaves out", () => {
    const config = parseConfig("acp:\n  retry:\n    max_attempts: 7\n");
    expect(config.retry).toMatchObject({ max_attempts: 7, backoff_ms: 1000 });
    expect(config.timeouts.default).toBe(30_000);
  });

  it("an unknown key is an error naming the file, line and key path", () => {
    const err = errorOf(() =>
      parseConfig(EXAMPLE_YAML.replace("max_parallel: 5", "max_paralel: 5"), "conf/acp.yaml"),
    );
    expect(err.message).toBe("conf/acp.yaml:22: acp.performance.max_paralel: unknown key");
    expect(err.problems).toEqual([{ path: "acp.performance.max_paralel", line: 22, message: "unknown key" }]);
  });

  it("a wrong type is an error naming the key", () => {
    const err = errorOf(() =>
      parseConfig(EXAMPLE_YAML.replace("default: 30000", 'default: "30s"'), "acp.yaml"),
    );
    expect(err.message).toMatch(
      /^acp\.yaml:5: acp\.timeouts\.default: must be a whole number of milliseconds/,
    );
    const threshold = errorOf(() =>
      parseConfig(EXAMPLE_YAML.replace("approval_threshold: high", "approval_threshold: urgent")),
    );
    expect(threshold.message).toContain(
      "acp.security.approval_threshold: must be one of low, medium, high, critical, none",
    );
  });

  it("reports every problem at once, and a top-level unknown section", () => {
    const err = errorOf(() => parseConfig("acp:\n  retries: {}\n  retry:\n    max_attempts: 0\nextra: 1\n"));
    expect(err.problems.map((p) => p.path)).toEqual(
      expect.arrayContaining(["acp.retries", "acp.retry.max_attempts", "extra"]),
    );
  });

  it("a YAML syntax error names the line", () => {
    const err = errorOf(() => parseConfig("acp:\n  retry: [unclosed\n", "broken.yaml"));
    expect(err.message).toMatch(/^broken\.yaml:\d+: not valid YAML/);
  });

  it("a missing file is a ConfigError naming it", async () => {
    await expect(loadConfig("/nonexistent/acp.yaml")).rejects.toThrow(
      "cannot read /nonexistent/acp.yaml (ENOENT)",
    );
  });

  it("accepts version 2.0 written unquoted, and refuses another version", () => {
    expect(parseConfig("acp:\n  version: 2.0\n").version).toBe("2.0");
    expect(errorOf(() => parseConfig('acp:\n  version: "1.0"\n')).message).toContain(
      'acp.version: must be "2.0"',
    );
  });

  it("a config given in code is checked the same way", () => {
    expect(() => resolveConfig({ retry: { max_attempts: -1 } })).toThrow(
      /acp\.retry\.max_attempts: must be at least 1/,
    );
  });
});

describe("job files", () => {
  it("a scatter job applies defaults and names a command missing its target", async () => {
    const dir = tmp();
    const good = join(dir, "good.yaml");
    writeFileSync(
      good,
      "defaults:\n  action: ANALYZE\n  parameters: { code: x }\ncommands:\n  - to: a\n    parameters: { type: security }\n  - to: b\nmin_success: 1\n",
    );
    const job = await loadScatterJob(good);
    expect(job.drafts).toEqual([
      { action: "ANALYZE", to: "a", parameters: { code: "x", type: "security" } },
      { action: "ANALYZE", to: "b", parameters: { code: "x" } },
    ]);
    expect(job.aggregate).toBe("collect");
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "commands:\n  - action: ANALYZE\n  - to: b\n    action: EXPLODE\n");
    await expect(loadScatterJob(bad)).rejects.toThrow(
      /bad\.yaml:4: commands\[1\]\.action: Invalid option: expected one of "ANALYZE"/,
    );
    const missing = join(dir, "missing.yaml");
    writeFileSync(missing, "commands:\n  - action: ANALYZE\n");
    await expect(loadScatterJob(missing)).rejects.toThrow(
      "missing.yaml:2: commands[0].to: is required (here or in defaults)",
    );
  });
});
