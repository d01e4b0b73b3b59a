import { afterEach, expect, it } from "vitest";
import { startTestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { agentFor } from "./fixtures.js";

const tmp = useTmpDir();
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

it("smoke", async () => {
  const gw = await startTestGateway();
  closers.push(() => gw.close());
  const a = await gw.register("alice-assistant", "alice");
  const b = await gw.register("bob-assistant", "bob");
  const dir = tmp();
  const alice = agentFor(gw, a, dir);
  const bob = agentFor(gw, b, dir);
  alice.on("error", (e) => console.error("alice", e));
  bob.on("error", (e) => console.error("bob", e));
  await alice.connect();
  await bob.connect();
  closers.push(() => alice.close(), () => bob.close());
  bob.onRequest(async (body) => ({ echo: body }));
  const res = await alice.request("bob-assistant", { action: "get-availability" });
  expect(res).toEqual({ echo: { action: "get-availability" } });
});
