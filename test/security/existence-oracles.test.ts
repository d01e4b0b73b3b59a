/**
 * No existence oracles: what belongs to others answers exactly as what does not exist, and owners
 * and ids have namespaces, so nobody learns of, or squats, another's team, vote, task or message id.
 */
import { ListTasksRequest } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { describe, expect, it } from "vitest";
import { AcpError } from "../../src/protocol/index.js";
import { agentFor } from "../client/fixtures.js";
import { useCollabBed } from "../collab/testbed.js";
import { sendRequest } from "../extensions/a2a/inbound-bed.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";

/** The refusal a promise ends with, as code and message (what a prober sees). */
async function answerOf(promise: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AcpError) return { code: err.code, message: err.message };
    return { code: 0, message: (err as Error).message };
  }
  throw new Error("expected a refusal");
}

function a2aClient(gw: TestGateway, agentId: string, bearer: string) {
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ authorization: `Bearer ${bearer}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
    }),
  ).createFromUrl(`${gw.url}/a2a/${agentId}/`);
}

describe("votes of other teams", () => {
  const bed = useCollabBed((options) => startTestGateway(options));

  it("a ballot for another team's vote answers as for a vote that does not exist", async () => {
    const alice = await bed.member("alice");
    const bob = await bed.member("bob");
    const mallory = await bed.offline("mallory");
    await alice.collab.teams.create("crew", "Crew", ["bob"]);
    await alice.collab.teams.openVote({
      voteId: "vote-ship-friday",
      teamId: "crew",
      channel: "decisions",
      question: "Ship on Friday?",
      options: ["yes", "no"],
      rule: { type: "majority" },
      closesAt: new Date(Date.now() + 60_000),
    });

    const theirs = await answerOf(mallory.collab.teams.vote("vote-ship-friday", "yes"));
    const nobodys = await answerOf(mallory.collab.teams.vote("vote-never-opened", "yes"));
    expect(theirs).toEqual({
      code: nobodys.code,
      message: nobodys.message.replace("never-opened", "ship-friday"),
    });
    expect(theirs.message).toBe("no vote vote-ship-friday");

    // Unchanged, and healthy: no ballot was counted; the electorate still votes.
    expect((await bob.collab.teams.getVote("vote-ship-friday")).cast).toBe(0);
    expect(await bob.collab.teams.vote("vote-ship-friday", "no")).toMatchObject({ changed: false });
  });
});

describe("A2A task owners", () => {
  it("an agent named admin neither lists nor reads the admin's tasks", async () => {
    const gw = await startTestGateway();
    try {
      const helper = await gw.register("helper", "principal-helper", { capabilities: ["a2a"] });
      const agent = agentFor(gw, helper, `${gw.dataDir}/helper`);
      agent.onRequest((body) => ({ text: `echo: ${String(body.text)}` }));
      await agent.connect();
      const impostor = await gw.register("admin", "p-mallory");

      const asAdmin = await a2aClient(gw, "helper", gw.adminToken);
      const adminTask = await asAdmin.sendMessage(sendRequest("the admin's question"));
      const taskId = (adminTask as { id: string }).id;
      expect(taskId).toEqual(expect.any(String));

      const asAgent = await a2aClient(gw, "helper", impostor.apiKey);
      expect((await asAgent.listTasks(ListTasksRequest.fromJSON({}))).tasks).toEqual([]);
      const theirs = await answerOf(asAgent.getTask({ tenant: "", id: taskId, historyLength: undefined }));
      const nobodys = await answerOf(
        asAgent.getTask({ tenant: "", id: "00000000-0000-4000-8000-000000000000", historyLength: undefined }),
      );
      expect(theirs.message.replace(taskId, "ID")).toBe(
        nobodys.message.replace("00000000-0000-4000-8000-000000000000", "ID"),
      );

      // The admin still has it; the agent's own calls work.
      expect((await asAdmin.listTasks(ListTasksRequest.fromJSON({}))).tasks.map((t) => t.id)).toEqual([
        taskId,
      ]);
      await asAgent.sendMessage(sendRequest("the agent's own question"));
      expect((await asAgent.listTasks(ListTasksRequest.fromJSON({}))).tasks).toHaveLength(1);
      await agent.close();
    } finally {
      await gw.close();
    }
  });
});
