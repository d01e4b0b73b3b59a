import { describe, expect, it } from "vitest";
import { AcpError } from "../../../../src/protocol/index.js";
import { until } from "../../../helpers/until.js";
import { useOutboundBed } from "./testbed.js";

describe("A2A out: task status, cancel, and an agent that is down", () => {
  const bed = useOutboundBed();

  it.each([
    ["streaming (SendStreamingMessage)", true],
    ["polling (SendMessage, then GetTask)", false],
  ])("an ACP cancel of a running task becomes CancelTask, %s", async (_name, streaming) => {
    const server = await bed.a2a({ behaviour: "slow-task", streaming });
    await bed.addA2A({ url: server.url, agent_id: "slow" });
    const alice = await bed.caller();
    const statuses: Record<string, unknown>[] = [];
    alice.onNotification((body, context) => {
      if (context.method === "agent.a2a.status") statuses.push(body);
    });
    const answer = alice.request("slow", { text: "take your time" }).catch((e: unknown) => e);
    const [first] = await until(
      () => statuses,
      (s) => s.length > 0,
      "the bridge reports the task",
    );
    await alice.notify("slow", { taskId: first?.taskId }, { method: "agent.a2a.cancel" });
    const err = await answer;
    expect(err).toBeInstanceOf(AcpError);
    expect((err as AcpError).kind).toBe("Cancelled");
    expect((err as AcpError).data.a2a).toMatchObject({ a2a: { taskId: first?.taskId, state: "canceled" } });
    const status = await alice.request("slow", { taskId: first?.taskId }, { method: "agent.a2a.task" });
    expect(status).toMatchObject({ a2a: { taskId: first?.taskId, state: "canceled" } });
  });

  it("only the requester can see or cancel its task", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    await bed.addA2A({ url: server.url, agent_id: "echo" });
    const alice = await bed.caller("alice");
    const bob = await bed.caller("bob");
    const done = await alice.request("echo", { text: "mine" });
    const taskId = (done.a2a as { taskId: string }).taskId;
    const own = await alice.request("echo", { taskId }, { method: "agent.a2a.task" });
    expect(own).toMatchObject({ a2a: { taskId, state: "completed" } });
    const err = await bob.request("echo", { taskId }, { method: "agent.a2a.task" }).catch((e: unknown) => e);
    expect((err as AcpError).kind).toBe("NotFound");
    expect((err as AcpError).data.problems).toEqual([
      expect.objectContaining({ path: "/params/body/taskId" }),
    ]);
  });

  it("an A2A agent that is down: the caller gets a clear error, the request stays recorded, it works again once back", async () => {
    const server = await bed.a2a({ behaviour: "echo-task" });
    const port = Number(new URL(server.url).port);
    await bed.addA2A({ url: server.url, agent_id: "echo" });
    await server.close();
    const alice = await bed.caller();
    const err = await alice.request("echo", { text: "anyone?" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcpError);
    expect((err as AcpError).code).toBe(-32603);
    expect((err as AcpError).message).toMatch(/unreachable \(ECONNREFUSED\); tried 2 time/);
    expect((err as AcpError).data.a2a).toMatchObject({ failure: "unreachable", attempts: 2 });
    const page = await bed.gw.gateway.broker.list({
      participant: "alice",
      to: "echo",
      method: "agent.request",
    });
    expect(page.items).toHaveLength(1);
    expect(page.items[0]).toMatchObject({ status: "failed", deadLetter: { reason: "rejected" } });
    expect((await bed.gw.gateway.broker.get(page.items[0]!))?.envelope).toContain("anyone?");

    const back = await bed.a2a({ behaviour: "echo-task", port });
    const body = await alice.request("echo", { text: "anyone now?" });
    expect(body).toMatchObject({ a2a: { state: "completed" } });
    expect(back.received).toEqual(["anyone now?"]);
  });
});
