import { AcpAgent } from "acp-kit/client";
import { AcpError } from "acp-kit/protocol";

const gateway = "http://127.0.0.1:8080";

// Bob's side: answers availability requests and takes handoffs.
const bob = new AcpAgent({
  gateway,
  keyFile: "bob-scheduler.key",
  apiKey: process.env.BOB_API_KEY!,
  layers: [0, 1, 2],
  announce: { capabilities: ["calendar-management"], purpose: "Manage bob's calendar" },
  capabilities: { tools: ["calendar.read"], domains: ["scheduling"], limits: [], requests: [] },
});
bob.onRequest("agent.request", async (body, ctx) => {
  if (body.action !== "get-availability")
    throw new AcpError("MethodNotFound", `unknown action ${body.action}`);
  return { available_slots: ["2026-02-18T10:00:00Z", "2026-02-19T14:00:00Z"], for: ctx.principalId };
});
bob.onHandoff((handoff) => ({ accepted: true, next: handoff.remaining }));
bob.onNotification((body, ctx) => console.log(`${ctx.from} says`, body));
await bob.connect(); // register handlers first: the offline queue is delivered right away

// Alice's side: asks, tells, hands off.
const alice = new AcpAgent({
  gateway,
  keyFile: "alice-scheduler.key",
  apiKey: process.env.ALICE_API_KEY!,
  trust: { sharedContextPrincipals: ["bob"] },
});
alice.on("error", (err) => console.error(err.message));
await alice.connect();

await alice.handshake("bob-scheduler"); // optional: request/notify/handoff do it when needed
const { available_slots } = await alice.request(
  "bob-scheduler",
  { action: "get-availability", parameters: { duration_minutes: 60 } },
  { timeoutMs: 10_000, summary: "Asked for bob's free hours next week" },
);
await alice.notify("bob-scheduler", { status: "picked the first slot" });
const answer = await alice.handoff("bob-scheduler", {
  completed: ["agreed on 2026-02-18T10:00:00Z"],
  remaining: "send the invitation",
  context: { slot: available_slots },
});
console.log(answer); // { accepted: true, next: "send the invitation" }
console.log(alice.trust("bob-scheduler")); // { level: "elevated", score: 0.5, … }

await alice.close();
await bob.close();
