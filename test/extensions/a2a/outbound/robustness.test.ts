import { describe, expect, it } from "vitest";
import { AcpError } from "../../../../src/protocol/index.js";
import { until } from "../../../helpers/until.js";
import { useOutboundBed } from "./testbed.js";

describe("A2A out: long tasks and oversized answers", () => {
  // A short ack wait: the broker redelivers the request while the A2A task still runs.
  const bed = useOutboundBed({ delivery: { ackWaitMs: 200, maxDeliver: 50, backoffFactor: 1 } });

  it("a request redelivered while its A2A task still runs is not sent to the A2A agent again", async () => {
    const server = await bed.a2a({ behaviour: "slow-task", streaming: true });
    await bed.addA2A({ url: server.url, agent_id: "slow" });
    const alice = await bed.caller();
    const statuses: Record<string, unknown>[] = [];
    alice.onNotification((body, context) => {
      if (context.method === "agent.a2a.status") statuses.push(body);
    });
    const answer = alice.request("slow", { text: "long job" }).catch((e: unknown) => e);
    const [first] = await until(
      () => statuses,
      (s) => s.length > 0,
      "the task is reported",
    );
    const { broker } = bed.gw.gateway;
    const [request] = (await broker.list({ participant: "alice", to: "slow", method: "agent.request" }))
      .items;
    // Several ack waits: the bridge is handed the request three times more while the task runs.
    await until(
      async () => (await broker.status(request!))?.retryCount ?? 0,
      (retries) => retries >= 3,
      "the request is redelivered three times",
    );
    await alice.notify("slow", { taskId: first?.taskId }, { method: "agent.a2a.cancel" });
    expect(((await answer) as AcpError).kind).toBe("Cancelled");
    expect(server.received).toEqual(["long job"]);
    await until(
      async () => (await broker.status(request!))?.status,
      (status) => status === "acknowledged",
      "the request is acknowledged once answered",
    );
  });

  it("an answer too large for an envelope becomes a clear error, not a redelivery loop", async () => {
    const server = await bed.a2a({ behaviour: "large-message" });
    await bed.addA2A({ url: server.url, agent_id: "echo" });
    const alice = await bed.caller();
    const err = await alice
      .request("echo", { text: "a lot please" }, { timeoutMs: 20_000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcpError);
    expect((err as AcpError).kind).toBe("PayloadTooLarge");
    expect((err as AcpError).message).toContain("the answer of echo exceeds the gateway's envelope limit");
    // Settled once answered: nothing is left to hand the bridge again.
    const { broker } = bed.gw.gateway;
    const [request] = (await broker.list({ participant: "alice", to: "echo", method: "agent.request" }))
      .items;
    await until(
      async () => (await broker.status(request!))?.status,
      (status) => status === "acknowledged",
      "the request is acknowledged once answered",
    );
    expect(server.received).toHaveLength(1);
  });
});
