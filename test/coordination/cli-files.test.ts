import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { acpSession } from "./helpers.js";

describe("acp session report / artifact", { timeout: 120_000 }, () => {
  const tmp = useTmpDir();
  const report = (severity: string, extra: Record<string, unknown> = {}) => ({
    summary: `found a ${severity} issue`,
    findings: [{ type: "issue", severity, title: `${severity} thing`, location: "a.ts:1" }],
    metrics: { items_analyzed: 10 },
    data_artifacts: ["data/shared.json"],
    next_actions: [`fix the ${severity} thing`],
    recommendations_for_automation: [`Skill: ${severity} checker`],
    ...extra,
  });

  it("writes, shows, summarises, filters findings and aggregates reports", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    const written = await acpSession(root, ["report", "write", "security-analyzer"], {
      env,
      input: JSON.stringify(report("high")),
    });
    expect(written).toMatchObject({ code: 0, stdout: "wrote reports/security-analyzer.json (1 findings)\n" });
    const file = join(tmp(), "perf.json");
    writeFileSync(file, JSON.stringify(report("low")));
    expect((await acpSession(root, ["report", "write", "perf-analyzer", file], { env })).code).toBe(0);
    await acpSession(root, ["report", "write", "skill-generator"], {
      env,
      input: JSON.stringify(report("medium")),
    });

    const shown = await acpSession(root, ["report", "show", "security-analyzer"], { env });
    expect(shown.stdout).toMatch(
      /^security-analyzer · completed · .*\n\nfound a high issue\n\nFindings \(1\):\n {2}\[high\] issue: high thing \(a\.ts:1\)/,
    );
    const summaries = await acpSession(root, ["report", "summaries", "--suffix", "analyzer"], { env });
    expect(summaries.stdout).toBe(
      "perf-analyzer: found a low issue\nsecurity-analyzer: found a high issue\n",
    );
    const high = JSON.parse(
      (await acpSession(root, ["report", "findings", "--severity", "high", "--json"], { env })).stdout,
    );
    expect(high).toEqual([expect.objectContaining({ agent: "security-analyzer", title: "high thing" })]);
    const aggregate = JSON.parse((await acpSession(root, ["report", "aggregate", "--json"], { env })).stdout);
    expect(aggregate).toMatchObject({
      reports: 3,
      total_findings: 3,
      high_severity: 1,
      automation_opportunities: 3,
      data_artifacts: ["data/shared.json"],
      metrics: { items_analyzed: 30 },
    });
    const human = await acpSession(root, ["report", "aggregate", "--suffix", "analyzer"], { env });
    expect(human.stdout).toMatch(/^reports: +2\ntotal findings: +2 \(high 1, medium 0, low 1\)/);
  });

  it("names the file, line and field of a bad report", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const file = join(tmp(), "bad.json");
    writeFileSync(file, JSON.stringify(report("critical"), null, 2));
    const result = await acpSession(root, ["report", "write", "x", file, "--session", id]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `acp: ${file}:6: findings[0].severity: Invalid option: expected one of "high"|"medium"|"low"\n`,
    );
    const syntax = await acpSession(root, ["report", "write", "x", "--session", id], {
      input: '{\n  "summary": "s",\n}',
    });
    expect(syntax.stderr).toMatch(/^acp: <stdin>:3: not valid JSON/);
    const missing = await acpSession(root, ["report", "show", "nobody", "--session", id]);
    expect(missing.stderr).toMatch(/agent "nobody" has written no report/);
  });

  it("puts, gets and lists artifacts", async () => {
    const root = tmp();
    const { id } = await Session.create({ root });
    const env = { ACP_SESSION_ID: id };
    const put = await acpSession(
      root,
      ["artifact", "put", "vulnerabilities", "--from", "security", "--description", "vulns"],
      {
        env,
        input: '{"vulnerabilities":[{"id":"SQL-001"}]}',
      },
    );
    expect(put.stdout).toBe("data/vulnerabilities.json\n");
    const file = join(tmp(), "graph.json");
    writeFileSync(file, '{"nodes":[]}');
    await acpSession(root, ["artifact", "put", "data/dependency-graph.json", file], { env });
    const got = await acpSession(root, ["artifact", "get", "vulnerabilities.json"], { env });
    expect(JSON.parse(got.stdout)).toEqual({ vulnerabilities: [{ id: "SQL-001" }] });
    const list = await acpSession(root, ["artifact", "list"], { env });
    expect(list.stdout).toMatch(
      /^data\/dependency-graph\.json {2}\d+ B .*\ndata\/vulnerabilities\.json {2}\d+ B .* by security\n$/,
    );
    const json = JSON.parse((await acpSession(root, ["artifact", "list", "--json"], { env })).stdout);
    expect(json.map((a: { name: string }) => a.name)).toEqual(["dependency-graph", "vulnerabilities"]);
    const notJson = await acpSession(root, ["artifact", "put", "x"], { env, input: "not json" });
    expect(notJson.stderr).toMatch(/^acp: <stdin>:1: not valid JSON/);
    const outside = await acpSession(root, ["artifact", "get", "../../etc/passwd"], { env });
    expect(outside.stderr).toMatch(/not a valid artifact name/);
  });
});
