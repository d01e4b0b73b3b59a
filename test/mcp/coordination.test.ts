import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { stdioClientTransport } from "../../src/mcp/index.js";
import { CLI_PATH, runAcp } from "../helpers/cli.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until, useMcpGateway } from "../helpers/mcp-gateway.js";

const tmpDir = useTmpDir("acp-mcp-coord-");

async function acp(args: string[]): Promise<string> {
  const result = await runAcp(args);
  if (result.code !== 0) throw new Error(`acp ${args.join(" ")} failed: ${result.stderr}`);
  return result.stdout.trim();
}

/** A session under `root` with agents `names` (added with real `acp session update`). */
async function sessionWith(root: string, names: string[]): Promise<string> {
  const id = await acp(["session", "init", "--root", root, "--project-type", "review"]);
  for (const name of names)
    await acp(["session", "update", name, "--status", "waiting", "--root", root, "--session", id]);
  return id;
}

function watchUpdates(client: Client): string[] {
  const uris: string[] = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    uris.push(n.params.uri);
  });
  return uris;
}

async function readJson(client: Client, uri: string): Promise<Record<string, unknown>> {
  const { contents } = await client.readResource({ uri });
  return JSON.parse((contents[0] as { text: string }).text) as Record<string, unknown>;
}

describe("coordination://{session} resources", () => {
  it("acp mcp serve --coordination-root: lists, reads and notifies on a real `acp session update` and `log`", async () => {
    const root = tmpDir();
    const id = await sessionWith(root, ["security-analyzer"]);
    const client = new Client({ name: "desktop", version: "1.0.0" });
    await client.connect(
      stdioClientTransport({
        command: process.execPath,
        args: [CLI_PATH, "mcp", "serve", "--coordination-root", root, "--quiet"],
        stderr: "pipe",
      }),
    );
    try {
      expect(client.getServerCapabilities()?.resources).toMatchObject({ subscribe: true });
      const { resources } = await client.listResources();
      expect(resources).toEqual([
        expect.objectContaining({
          uri: `coordination://${id}`,
          description: expect.stringMatching(/^1 agents, review, started /),
        }),
      ]);
      const before = await readJson(client, `coordination://${id}`);
      expect(before).toMatchObject({
        coordination: { session_id: id, agents: { "security-analyzer": { status: "waiting" } } },
        artifacts: [],
      });

      const updated = watchUpdates(client);
      await client.subscribeResource({ uri: `coordination://${id}` });
      await client.subscribeResource({ uri: `coordination://${id}/events` });
      await acp([
        "session",
        "update",
        "security-analyzer",
        "--status",
        "in_progress",
        "--progress",
        "scanning",
        "--root",
        root,
        "--session",
        id,
      ]);
      await until(
        () => updated,
        (u) => u.includes(`coordination://${id}`),
        "coordination:// is notified of the update",
      );
      expect(updated).not.toContain(`coordination://${id}/events`);
      expect(await readJson(client, `coordination://${id}`)).toMatchObject({
        coordination: { agents: { "security-analyzer": { status: "in_progress", progress: "scanning" } } },
      });

      await acp([
        "session",
        "log",
        "security-analyzer",
        "finding",
        "hard-coded key",
        "--severity",
        "high",
        "--root",
        root,
        "--session",
        id,
      ]);
      await until(
        () => updated,
        (u) => u.includes(`coordination://${id}/events`),
        "…/events is notified of the new event",
      );
      const events = await readJson(client, `coordination://${id}/events`);
      expect(events.total).toBe(1);
      expect(events.events).toEqual([
        expect.objectContaining({
          type: "finding",
          from: "security-analyzer",
          message: "hard-coded key",
          severity: "high",
        }),
      ]);

      expect(await readJson(client, `coordination://${id}/reports`)).toEqual({ reports: [] });
      await expect(
        client.readResource({ uri: "coordination://00000000-0000-4000-8000-000000000000" }),
      ).rejects.toThrow("no coordination session 00000000-0000-4000-8000-000000000000");
      await expect(client.subscribeResource({ uri: "coordination://not-a-session" })).rejects.toThrow(
        "coordination://not-a-session is not a resource this server can notify about",
      );
    } finally {
      await client.close();
    }
  });

  describe("at the gateway, with a context root", () => {
    const root = useTmpDir("acp-mcp-gw-context-", "suite")();
    const bed = useMcpGateway({ coordinationRoot: root });

    it("an agent sees and watches the sessions it takes part in, and no others", async () => {
      const alice = await bed.register("alice");
      const bob = await bed.register("bob");
      const theirs = await sessionWith(root, ["alice", "carol"]);
      const other = await sessionWith(root, ["carol"]);
      const client = await bed.sdkClient("streamable", alice.apiKey);
      const { resources } = await client.listResources();
      expect(resources.map((r) => r.uri).filter((u) => u.startsWith("coordination://"))).toEqual([
        `coordination://${theirs}`,
      ]);
      await expect(client.readResource({ uri: `coordination://${other}` })).rejects.toThrow(
        `no coordination session ${other}`,
      );

      const updated = watchUpdates(client);
      await client.subscribeResource({ uri: `coordination://${theirs}` });
      await acp(["session", "update", "alice", "--status", "completed", "--root", root, "--session", theirs]);
      await until(
        () => updated,
        (u) => u.includes(`coordination://${theirs}`),
        "alice hears of the update",
      );

      const outsider = await bed.sdkClient("sse", bob.apiKey);
      await expect(outsider.subscribeResource({ uri: `coordination://${theirs}` })).rejects.toThrow(
        `no coordination session ${theirs}`,
      );
    });
  });
});
