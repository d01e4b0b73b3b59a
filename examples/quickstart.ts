import { AcpAgent } from "acp-kit/client";

// Keys from `acp keygen --agent-id agent-bob --principal-id bob` (and alice's), API keys from
// `acp agent register`.
const bob = new AcpAgent({
  gateway: "http://127.0.0.1:8080",
  keyFile: "bob.key",
  apiKey: process.env.BOB_API_KEY!,
});
bob.onRequest("agent.request", (body, ctx) => ({ echo: body, for: ctx.principalId }));
await bob.connect(); // handlers first: the offline queue is delivered right away

const alice = new AcpAgent({
  gateway: "http://127.0.0.1:8080",
  keyFile: "alice.key",
  apiKey: process.env.ALICE_API_KEY!,
});
await alice.connect();
const answer = await alice.request("agent-bob", { action: "ping" }); // handshakes first if needed
console.log(answer); // { echo: { action: "ping" }, for: "alice" }: bob answered, for alice's principal

await alice.close();
await bob.close();
