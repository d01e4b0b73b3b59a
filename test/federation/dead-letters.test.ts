/**
 * Dead letters come back to the sender: a message to an agent of another domain that the remote
 * gateway dead-letters shows, in the sender's status at its own gateway, as failed with the reason.
 */
import { describe, expect, it } from "vitest";
import { handshakenAgents, useOrganizations } from "../helpers/federation.js";
import { api, type BrokerKind, FrameClient } from "../helpers/gateway.js";
import { describeWithNats } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

const { defer, linkedPair } = useOrganizations();

/** alpha@a.test's message, rejected by beta@b.test, shows at a.test as failed with beta's reason. */
async function rejectedComesBack(broker: BrokerKind): Promise<void> {
  const pair = await linkedPair({ broker });
  const { a, b } = pair;
  const { alpha, alphaReg, beta, betaReg } = await handshakenAgents(pair);
  await beta.close();

  // beta, now a plain WebSocket client, rejects what alpha sends it.
  const ws = await FrameClient.connect(b.gateway.wsUrl, betaReg.apiKey);
  defer(() => ws.close());
  const { id } = await alpha.notify("beta@b.test", { n: 1 });
  const frame = await ws.next("new_message", (f) => f.id === id);
  ws.send({ type: "reject", id: frame.id, from: frame.from, reason: "not my job" });

  const status = await until(
    () => api(a.url, `/api/v1/messages/${id}/status`, { apiKey: alphaReg.apiKey }),
    (r) => r.json.status === "failed",
    "alpha's status at a.test shows the dead letter",
  );
  expect(status.json).toMatchObject({
    peer: "b.test",
    status: "failed",
    dead_letter: { reason: "rejected", detail: "rejected by recipient: not my job" },
  });
}

describe("federation: dead letters come back to the sender", () => {
  it("shows a message the remote recipient rejected as failed, with its reason, at the sender's gateway", async () => {
    await rejectedComesBack("embedded");
  });
});

describeWithNats("federation: dead letters come back to the sender, each gateway on its own NATS", () => {
  it("shows a message the remote recipient rejected as failed, with its reason, at the sender's gateway", async () => {
    await rejectedComesBack("nats");
  });
});
