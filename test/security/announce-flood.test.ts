/**
 * An agent's handshake is not a loop a peer can drive: every announce restarts it and is answered
 * with an announce, so a peer announcing more than 5 times within 10 s is refused (each further
 * announce rejected, unanswered) until its announces thin out; then it is heard again.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AcpAgent } from "../../src/client/index.js";
import { buildAnnounce, signMessage } from "../../src/protocol/index.js";
import { agentFor, eventually } from "../client/fixtures.js";
import { api, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";

describe("a peer that announces itself over and over", () => {
  const tmp = useTmpDir("acp-announce-flood-");
  let gw: TestGateway;
  let alice: TestAgent;
  let bob: AcpAgent;
  let bobErrors: Error[];
  let announcesHeard: number;

  beforeEach(async () => {
    gw = await startTestGateway();
    alice = await gw.register("alice-assistant", "alice");
    const b = await gw.register("bob-assistant", "bob");
    bob = agentFor(gw, b, tmp());
    bobErrors = [];
    announcesHeard = 0;
    bob.on("error", (err) => bobErrors.push(err));
    bob.on("handshake", (e) => {
      if (e.step === "announce" && e.direction === "received") announcesHeard++;
    });
    await bob.connect();
  });

  afterEach(async () => {
    vi.restoreAllMocks();
    await bob.close();
    await gw.close();
  });

  /** Alice (a raw client, not the SDK) announces herself to bob once more; resolves with its id. */
  async function announce(): Promise<string> {
    const message = buildAnnounce(alice.sender, "bob-assistant", { capabilities: ["x"], purpose: "again" });
    const answer = await api(gw.url, "/api/v1/messages", {
      apiKey: alice.apiKey,
      body: signMessage(message, alice.signer),
    });
    expect(answer.status, JSON.stringify(answer.json)).toBe(202);
    return message.params.headers["message-id"] as string;
  }

  const floodRefusals = () => bobErrors.filter((e) => /announced \d+ times within 10000 ms/.test(e.message));

  it("refuses the sixth announce within 10 s and the ones after it, then hears the peer again", async () => {
    for (let n = 1; n <= 5; n++) {
      await announce();
      await eventually(() => announcesHeard === n, `bob heard announce ${n}`);
    }
    expect(floodRefusals()).toEqual([]);
    const sixth = await announce();
    await eventually(() => floodRefusals().length === 1, "bob refused the sixth announce");
    expect(floodRefusals()[0]?.message).toContain(sixth);
    expect(floodRefusals()[0]?.message).toContain("alice-assistant announced 6 times within 10000 ms");
    expect(announcesHeard).toBe(5);
    // Still within the window: refused again.
    await announce();
    await eventually(() => floodRefusals().length === 2, "bob refused the seventh announce");
    expect(announcesHeard).toBe(5);
    // Ten seconds later (the clock moved, not the test waiting) the peer is heard again.
    const later = Date.now() + 10_001;
    vi.spyOn(Date, "now").mockImplementation(() => later);
    await announce();
    await eventually(() => announcesHeard === 6, "bob heard the announce after the window");
    expect(floodRefusals()).toHaveLength(2);
  });
});
