/**
 * Coordination files do not reach outside their session. Whoever can write in a session directory
 * (an agent, or a tool an agent was talked into running) plants links: `reports/x.json ->
 * /any/file`, `reports -> /any/dir`, a session directory that is itself a link, a FIFO. The gateway
 * must never follow them to show a remote MCP client or the dashboard a file from elsewhere, and
 * must never echo a file's content, its size or a server path in an error to a remote caller: they
 * get the file's name relative to the session and a generic reason. The local CLI (the files'
 * owner) still gets the full story.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { describe, expect, it } from "vitest";
import { Session } from "../../src/coordination/index.js";
import { streamableHttpClientTransport } from "../../src/mcp/index.js";
import { runAcp } from "../helpers/cli.js";
import { api, startTestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

const SECRET = "TOPSECRET";
const report = (summary: string) => ({
  agent_name: "writer",
  timestamp: "2026-01-01T00:00:00Z",
  status: "completed",
  summary,
  findings: [],
});

/**
 * Files outside the sessions (what the links point at), and four sessions the agent `alpha` takes
 * part in: one with linked and special files beside real ones, one whose reports/ is a link, one
 * whose coordination.json is a link to a file that is not JSON, one whose directory is a link.
 */
async function plant(base: string) {
  const root = join(base, "context");
  const outside = join(base, "outside");
  mkdirSync(join(outside, "reports"), { recursive: true });
  mkdirSync(join(outside, "session", "reports"), { recursive: true });
  writeFileSync(join(outside, "passwd"), `root:x:0:0:${SECRET}-LINE:/root:/bin/bash\n`);
  writeFileSync(join(outside, "report.json"), JSON.stringify(report(`${SECRET}-REPORT`)));
  writeFileSync(join(outside, "artifact.json"), JSON.stringify({ secret: `${SECRET}-DATA` }));
  writeFileSync(join(outside, "reports", "writer.json"), JSON.stringify(report(`${SECRET}-DIR`)));

  const files = await Session.create({ root });
  await files.updateAgent("alpha", { status: "in_progress" });
  await files.writeReport("writer", report("the real report"));
  await files.putArtifact("good", { fine: true });
  symlinkSync(join(outside, "report.json"), join(files.paths.reports, "linked.json"));
  symlinkSync(join(outside, "passwd"), join(files.paths.reports, "garbage.json"));
  symlinkSync(join(outside, "artifact.json"), join(files.paths.data, "leak.json"));
  execFileSync("mkfifo", [join(files.paths.reports, "fifo.json")]);

  const linkedDir = await Session.create({ root });
  await linkedDir.updateAgent("alpha", { status: "waiting" });
  execFileSync("rm", ["-r", linkedDir.paths.reports]);
  symlinkSync(join(outside, "reports"), linkedDir.paths.reports);

  const linkedCoordination = await Session.create({ root });
  execFileSync("rm", [linkedCoordination.paths.coordination]);
  symlinkSync(join(outside, "passwd"), linkedCoordination.paths.coordination);

  const linkedSessionId = "0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d";
  writeFileSync(
    join(outside, "session", "coordination.json"),
    JSON.stringify({
      session_id: linkedSessionId,
      started_at: "2026-01-01T00:00:00Z",
      agents: { alpha: { status: "waiting", dependencies: [] } },
    }),
  );
  writeFileSync(
    join(outside, "session", "reports", "writer.json"),
    JSON.stringify(report(`${SECRET}-SESSION`)),
  );
  symlinkSync(join(outside, "session"), join(root, linkedSessionId));

  return { root, outside, files, linkedDir, linkedCoordination, linkedSessionId };
}

describe("coordination files through the gateway (MCP resources, dashboard)", () => {
  const tmp = useTmpDir("acp-sec-coord-");

  it("follows no link out of a session and echoes no content or server path; the local CLI still says what is wrong", async () => {
    const base = tmp();
    const planted = await plant(base);
    const gw = await startTestGateway({
      dataDir: join(base, "data"),
      dashboard: { sessionsRoot: planted.root },
    });
    const alpha = await gw.register("alpha");
    const client = new Client({ name: "remote", version: "1.0.0" });
    await client.connect(streamableHttpClientTransport(`${gw.url}/mcp`, { apiKey: alpha.apiKey }));
    /** Everything a remote caller got, to search for leaks. */
    const seen: string[] = [];
    const read = async (uri: string) => {
      try {
        const text = ((await client.readResource({ uri })).contents[0] as { text: string }).text;
        seen.push(text);
        return { json: JSON.parse(text) as Record<string, unknown> };
      } catch (err) {
        seen.push((err as Error).message);
        return { error: (err as Error).message };
      }
    };
    try {
      const generic = "is not a regular file inside the session directory";
      const { files, linkedDir, linkedCoordination, linkedSessionId } = planted;

      // Links and a FIFO among real reports: the real one is read, the others named, nothing followed.
      const reports = await read(`coordination://${files.id}/reports`);
      expect(reports.json?.reports).toEqual([
        { agent: "writer", report: expect.objectContaining({ summary: "the real report" }) },
      ]);
      expect(reports.json?.problems).toEqual(
        expect.arrayContaining([
          { file: "reports/garbage.json", reason: generic },
          { file: "reports/linked.json", reason: generic },
          { file: "reports/fifo.json", reason: generic },
        ]),
      );
      // A linked artifact is not listed (its target's size and date stay unknown).
      const session = await read(`coordination://${files.id}`);
      expect(((session.json?.artifacts ?? []) as { name: string }[]).map((a) => a.name)).toEqual(["good"]);

      // A reports/ directory that is a link: nothing in it is read.
      const throughDir = await read(`coordination://${linkedDir.id}/reports`);
      expect(throughDir.json?.reports).toEqual([]);
      expect(throughDir.json?.problems).toEqual([{ file: "reports/writer.json", reason: generic }]);

      // coordination.json a link to a file that is not JSON: a generic error, not the parse error.
      const linkedJson = await read(`coordination://${linkedCoordination.id}`);
      expect(linkedJson.error).toContain(`session ${linkedCoordination.id}: coordination.json: ${generic}`);
      // A session directory that is itself a link is not read at all.
      const linkedSession = await read(`coordination://${linkedSessionId}/reports`);
      expect(linkedSession.error).toBeDefined();
      const listed = (await client.listResources()).resources
        .map((r) => r.uri)
        .filter((uri) => uri.startsWith("coordination://"));
      expect(listed.sort()).toEqual([`coordination://${linkedDir.id}`, `coordination://${files.id}`].sort());

      // The dashboard (admin sees every session): the same generic words.
      const admin = { authorization: `Bearer ${gw.adminToken}` };
      const list = await api(gw.url, "/api/v1/dashboard/sessions", { headers: admin });
      seen.push(JSON.stringify(list.json));
      const broken = (list.json.sessions as { id: string; error?: string }[]).find(
        (s) => s.id === linkedCoordination.id,
      );
      expect(broken?.error).toBe(`coordination.json: ${generic}`);
      for (const id of [linkedCoordination.id, linkedSessionId]) {
        const detail = await api(gw.url, `/api/v1/dashboard/sessions/${id}`, { headers: admin });
        seen.push(JSON.stringify(detail.json));
        expect(detail.status).toBe(503);
      }

      const everything = seen.join("\n");
      expect(everything).not.toContain(SECRET);
      expect(everything).not.toContain("root:x");
      expect(everything).not.toContain(base);
      expect(everything).not.toMatch(/position \d+|is not valid JSON \(|bytes with no newline/);

      // The local CLI, run by the files' owner, names the file and the reason in full.
      const cli = await runAcp([
        "session",
        "report",
        "show",
        "linked",
        "--root",
        planted.root,
        "--session",
        files.id,
      ]);
      expect(cli.code).not.toBe(0);
      expect(cli.stderr).toContain(join(files.paths.reports, "linked.json"));
      expect(cli.stderr).toContain("is a symbolic link");

      // Healthy afterwards: a session without links is read whole, and the gateway answers.
      const clean = await Session.create({ root: planted.root });
      await clean.updateAgent("alpha", { status: "completed" });
      await clean.writeReport("alpha", { ...report("all good"), agent_name: "alpha" });
      expect((await read(`coordination://${clean.id}/reports`)).json).toEqual({
        reports: [{ agent: "alpha", report: expect.objectContaining({ summary: "all good" }) }],
      });
      expect((await api(gw.url, "/healthz")).status).toBe(200);
    } finally {
      await client.close();
      await gw.close();
    }
  }, 60_000);
});
