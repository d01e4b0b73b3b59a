import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CoordinationError, Session } from "../../src/coordination/index.js";
import { useTmpDir } from "../helpers/tmp.js";

/** coordination.json as a person would write it by hand, with `agents` spliced in. */
function handWritten(id: string, agents: string, extra = ""): string {
  return `{
  "session_id": "${id}",
  "started_at": "2025-01-23T10:00:00Z",${extra}
  "agents": {
${agents}
  }
}
`;
}

async function rejection(promise: Promise<unknown>): Promise<CoordinationError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CoordinationError);
  return err as CoordinationError;
}

describe("coordination.json written by hand", () => {
  const tmp = useTmpDir();

  it("reads the coordination protocol's own example", async () => {
    const session = await Session.create({ root: tmp() });
    const agents = `    "security-analyzer": {
      "status": "completed",
      "started_at": "2025-01-23T10:00:00Z",
      "completed_at": "2025-01-23T10:05:00Z",
      "report_path": "reports/security-analyzer.json",
      "dependencies": [],
      "progress": "Analysis complete"
    },
    "skill-generator": {
      "status": "waiting",
      "dependencies": ["security-analyzer"],
      "reason": "Waiting for analysis agents to complete",
      "x-custom": {"kept": true}
    }`;
    writeFileSync(
      session.paths.coordination,
      handWritten(session.id, agents, '\n  "project_type": "web_app",'),
    );
    const coordination = await session.readCoordination();
    expect(coordination.project_type).toBe("web_app");
    expect(coordination.agents["skill-generator"]?.dependencies).toEqual(["security-analyzer"]);
    // Unknown fields survive a rewrite.
    await session.updateAgent("skill-generator", { progress: "starting" });
    expect(
      JSON.parse(readFileSync(session.paths.coordination, "utf8")).agents["skill-generator"]["x-custom"],
    ).toEqual({
      kept: true,
    });
  });

  const cases: [string, (id: string) => string, RegExp][] = [
    [
      "a bad status",
      (id) => handWritten(id, '    "a": {\n      "status": "done"\n    }'),
      /coordination\.json:6: agents\.a\.status: Invalid option: expected one of "waiting"\|"in_progress"\|"completed"\|"failed"$/,
    ],
    [
      "a missing status",
      (id) => handWritten(id, '    "a": {\n      "progress": "x"\n    }'),
      /coordination\.json:5: agents\.a\.status: required field is missing/,
    ],
    [
      "a bad timestamp",
      (id) =>
        handWritten(id, '    "a": {\n      "status": "waiting",\n      "started_at": "yesterday"\n    }'),
      /coordination\.json:7: agents\.a\.started_at: must be an ISO 8601 timestamp/,
    ],
    [
      "dependencies that are not a list",
      (id) => handWritten(id, '    "a": {\n      "status": "waiting",\n      "dependencies": "b"\n    }'),
      /coordination\.json:7: agents\.a\.dependencies: Invalid input: expected array/,
    ],
    [
      "an agent name that is not a file name",
      (id) => handWritten(id, '    "../x": {\n      "status": "waiting"\n    }'),
      /agents\.\.\.\/x: invalid name: must be 1-128 letters/,
    ],
    [
      "a missing session_id",
      () => '{\n  "started_at": "2025-01-23T10:00:00Z",\n  "agents": {}\n}\n',
      /coordination\.json:1: session_id: required field is missing/,
    ],
    [
      "a session_id of another session",
      () => handWritten("a1b2c3d4-e5f6-7890-abcd-ef1234567890", ""),
      /coordination\.json: session_id: is a1b2c3d4-e5f6-7890-abcd-ef1234567890 but the directory is/,
    ],
    [
      "a JSON syntax error",
      (id) => handWritten(id, '    "a": {\n      "status": "waiting",\n    }'),
      /coordination\.json:7: not valid JSON/,
    ],
  ];
  for (const [what, content, message] of cases) {
    it(`rejects ${what}, naming file, line and field`, async () => {
      const session = await Session.create({ root: tmp() });
      writeFileSync(session.paths.coordination, content(session.id));
      const err = await rejection(session.readCoordination());
      expect(err.message).toMatch(message);
      expect(err.file).toBe(session.paths.coordination);
      // An update refuses to build on a broken file rather than overwrite it.
      await rejection(session.updateAgent("b", { progress: "x" }));
      expect(readFileSync(session.paths.coordination, "utf8")).toBe(content(session.id));
    });
  }
});

describe("reports", () => {
  const tmp = useTmpDir();
  const finding = {
    type: "issue",
    severity: "high",
    title: "SQL Injection Risk",
    location: "src/db/queries.ts:42",
  };

  it("fills agent_name, timestamp and status, and reads back what it wrote", async () => {
    const session = await Session.create({ root: tmp() });
    const written = await session.writeReport("security-analyzer", {
      summary: "Found 1 issue.",
      findings: [finding],
    });
    expect(written).toMatchObject({
      agent_name: "security-analyzer",
      status: "completed",
      data_artifacts: [],
    });
    expect(await session.readReport("security-analyzer")).toEqual(written);
  });

  it("rejects a hand-written report file with the line of the wrong field", async () => {
    const session = await Session.create({ root: tmp() });
    const file = join(session.paths.reports, "x.json");
    writeFileSync(
      file,
      JSON.stringify(
        {
          agent_name: "x",
          timestamp: "2025-01-23T10:05:00Z",
          status: "completed",
          summary: "s",
          findings: [finding, { ...finding, severity: "critical" }],
        },
        null,
        2,
      ),
    );
    const err = await rejection(session.readReport("x"));
    expect(err.message).toMatch(
      /x\.json:(1[0-9]|[2-9]): findings\[1\]\.severity: Invalid option: expected one of "high"\|"medium"\|"low"/,
    );
    expect(err.line).toBe(
      readFileSync(file, "utf8")
        .split("\n")
        .findIndex((l) => l.includes('"critical"')) + 1,
    );
    await rejection(session.readReports());
  });

  const inputs: [string, unknown, RegExp][] = [
    ["a missing summary", { findings: [] }, /^r\.json: summary: required field is missing/],
    [
      "a finding without a title",
      { summary: "s", findings: [{ type: "issue", severity: "low" }] },
      /findings\[0\]\.title: required/,
    ],
    [
      "an unknown finding type",
      { summary: "s", findings: [{ ...finding, type: "bug" }] },
      /findings\[0\]\.type: Invalid option/,
    ],
    [
      "a report for another agent",
      { summary: "s", agent_name: "other" },
      /agent_name: is "other" but the report is for "me"/,
    ],
    ["a bad report status", { summary: "s", status: "done" }, /status: Invalid option/],
    [
      "non-string next actions",
      { summary: "s", next_actions: [1] },
      /next_actions\[0\]: Invalid input: expected string/,
    ],
  ];
  for (const [what, input, message] of inputs) {
    it(`refuses to write ${what}`, async () => {
      const session = await Session.create({ root: tmp() });
      expect((await rejection(session.writeReport("me", input, { file: "r.json" }))).message).toMatch(
        message,
      );
      await expect(session.readReport("me")).rejects.toThrow(/has written no report/);
    });
  }
});

describe("artifacts", () => {
  const tmp = useTmpDir();

  it("stores JSON under data/, announces it, and lists who made it", async () => {
    const session = await Session.create({ root: tmp() });
    const ref = await session.putArtifact(
      "vulnerabilities",
      { vulnerabilities: [{ id: "SQL-001" }] },
      {
        from: "security-analyzer",
        description: "Detailed vulnerability data",
      },
    );
    expect(ref).toBe("data/vulnerabilities.json");
    expect(await session.getArtifact("data/vulnerabilities.json")).toEqual({
      vulnerabilities: [{ id: "SQL-001" }],
    });
    const [listed] = await session.listArtifacts();
    expect(listed).toMatchObject({ name: "vulnerabilities", ref, created_by: ["security-analyzer"] });
    const { events } = await session.readEvents({ type: "data" });
    expect(events[0]?.event).toMatchObject({ artifact: ref, description: "Detailed vulnerability data" });
  });

  it("rejects names that would leave data/, and reports a hand-broken artifact's line", async () => {
    const session = await Session.create({ root: tmp() });
    await expect(session.putArtifact("../coordination", {})).rejects.toThrow(/not a valid artifact name/);
    await expect(session.getArtifact("nothing")).rejects.toThrow(/no artifact "nothing"/);
    writeFileSync(join(session.paths.data, "broken.json"), '{\n  "a": 1,\n  "b": \n}\n');
    await expect(session.getArtifact("broken")).rejects.toThrow(/broken\.json:4: not valid JSON/);
  });
});
