/**
 * The gateway is not trusted: an agent checks end to end what it is handed. A gateway that lies
 * (lying-gateway.ts, in front of a real one) hands bob a message alice signed for carol, or alice's
 * message to bob under another id than the one she signed. Bob refuses each (a `reject` naming the
 * reason, never his handler, an `error` event), and takes the next honest delivery as usual.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { importPublicKey, newMessageId } from "../../src/protocol/index.js";
import { agentFor, eventually, relayVerifiedConnection } from "../client/fixtures.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { type LyingGateway, startLyingGateway } from "./lying-gateway.js";

describe("an agent behind a gateway that lies", () => {
  const tmp = useTmpDir("acp-lying-");
  let gw: TestGateway;
  let lying: LyingGateway;
  const agents: AcpAgent[] = [];
  let a: TestAgent;
  let alice: AcpAgent;
  let bob: AcpAgent;
  let bobErrors: Error[];
  let handledByBob: unknown[];

  async function connect(who: TestAgent, url: string): Promise<AcpAgent> {
    const agent = agentFor({ url }, who, tmp());
    await agent.connect();
    agents.push(agent);
    return agent;
  }

  /** Bob's `reject` frames for a delivery from alice with this id. */
  const bobRejected = (id: string) =>
    lying
      .sentBy("bob-assistant")
      .filter((f) => f.type === "reject" && f.id === id && f.from === "alice-assistant");

  beforeEach(async () => {
    gw = await startTestGateway();
    lying = await startLyingGateway(gw.url);
    a = await gw.register("alice-assistant", "alice");
    const b = await gw.register("bob-assistant", "bob");
    alice = await connect(a, gw.url);
    bob = await connect(b, lying.url);
    bobErrors = [];
    bob.on("error", (err) => bobErrors.push(err));
    handledByBob = [];
    bob.onNotification((body) => {
      handledByBob.push(body);
    });
    await alice.handshake("bob-assistant");
    await eventually(() => bob.handshakeState("alice-assistant") === "established", "bob is established");
  });

  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    await lying.close();
    await gw.close();
  });

  /** Bob is healthy afterwards: with the gateway honest again, alice's next notification is handled. */
  async function bobStillWorks(): Promise<void> {
    lying.lie(undefined);
    await alice.notify("bob-assistant", { honest: true });
    await eventually(
      () => handledByBob.some((body) => (body as { honest?: boolean }).honest),
      "bob handled the honest notification",
    );
  }

  it("refuses a message signed for another agent that the gateway delivers to it", async () => {
    const carol = await connect(await gw.register("carol-assistant", "carol"), lying.url);
    const handledByCarol: unknown[] = [];
    carol.onNotification((body) => {
      handledByCarol.push(body);
    });
    await alice.handshake("carol-assistant");
    // The lie: what the gateway has for carol goes to bob's socket instead.
    lying.lie((frame, socketOf) =>
      socketOf === "carol-assistant" && frame.method === "agent.notification"
        ? { to: "bob-assistant", frame }
        : undefined,
    );
    const { id } = await alice.notify("carol-assistant", { for: "carol only" });

    await eventually(() => bobRejected(id).length > 0, "bob rejected the re-routed delivery");
    expect(String(bobRejected(id)[0]?.reason)).toMatch(/addressed to carol-assistant, not bob-assistant/);
    expect(bobErrors.map((e) => (e as { kind?: string }).kind)).toContain("Misrouted");
    expect(handledByBob).toEqual([]);
    expect(lying.sentBy("bob-assistant").some((f) => f.type === "acknowledge" && f.id === id)).toBe(false);
    await bobStillWorks();
  });

  it("refuses a message signed for another agent even when its in-process relay marked it verified", async () => {
    // A gateway's own agent trusts its relay's signature check (verifiedByRelay) and checks the
    // routing itself: this connection marks every delivery verified, as that relay would.
    const relayed = await gw.register("relayed-assistant", "relayed");
    const keys = new Map([["alice-assistant", importPublicKey(a.identity.signing)]]);
    const agent = agentFor({ url: lying.url }, relayed, tmp(), {
      connection: relayVerifiedConnection(lying.url, relayed.apiKey, keys),
    });
    const errors: Error[] = [];
    const handled: unknown[] = [];
    agent.on("error", (err) => errors.push(err));
    agent.onNotification((body) => {
      handled.push(body);
    });
    await agent.connect();
    agents.push(agent);
    await alice.handshake("relayed-assistant");
    lying.lie((frame, socketOf) =>
      socketOf === "bob-assistant" && frame.method === "agent.notification"
        ? { to: "relayed-assistant", frame }
        : undefined,
    );
    const { id } = await alice.notify("bob-assistant", { for: "bob only" });
    const rejected = () =>
      lying.sentBy("relayed-assistant").filter((f) => f.type === "reject" && f.id === id);
    await eventually(() => rejected().length > 0, "the agent rejected the re-routed delivery");
    expect(String(rejected()[0]?.reason)).toMatch(/addressed to bob-assistant, not relayed-assistant/);
    expect(errors.map((e) => (e as { kind?: string }).kind)).toContain("Misrouted");
    expect(handled).toEqual([]);
  });

  it("refuses a delivery whose id is not the message-id its sender signed", async () => {
    const lieId = newMessageId();
    let signedId: string | undefined;
    // The lie: alice's genuine notification, handed over under another id.
    lying.lie((frame, socketOf) => {
      if (socketOf !== "bob-assistant" || frame.method !== "agent.notification" || signedId) return undefined;
      signedId = frame.id;
      return { to: "bob-assistant", frame: { ...frame, id: lieId } };
    });
    await alice.notify("bob-assistant", { n: 1 });

    await eventually(() => bobRejected(lieId).length > 0, "bob rejected the delivery under a wrong id");
    expect(String(bobRejected(lieId)[0]?.reason)).toBe(
      `-32600 delivered as ${lieId} but signed as ${signedId}`,
    );
    expect(bobErrors.map((e) => (e as { kind?: string }).kind)).toContain("InvalidRequest");
    expect(handledByBob).toEqual([]);
    await bobStillWorks();
  });
});
