import { describe, expect, it } from "vitest";
import type { WebSocket } from "ws";
import type { ServerFrame } from "../../src/gateway/index.js";
import { SubmitIntake } from "../../src/gateway/submit-intake.js";
import { buildNotification, signMessage } from "../../src/protocol/index.js";
import { api, FrameClient, startTestGateway } from "../helpers/gateway.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { until } from "../helpers/until.js";
import { handshake } from "../helpers/messaging.js";

/** A connection as the intake sees it: only whether it is being read. */
function connection(): WebSocket & { reading: boolean } {
  const ws = {
    reading: true,
    pause() {
      ws.reading = false;
    },
    resume() {
      ws.reading = true;
    },
  };
  return ws as unknown as WebSocket & { reading: boolean };
}

describe("SubmitIntake", () => {
  it("stops reading a connection that submits past the mark, and reads every paused one again once the backlog halves", () => {
    let pauses = 0;
    const intake = new SubmitIntake(4, () => pauses++);
    const [a, b] = [connection(), connection()];
    for (let i = 0; i < 3; i++) intake.begin(a);
    expect(a.reading).toBe(true);
    intake.begin(b); // the 4th in progress: b is not read any more
    expect([a.reading, b.reading]).toEqual([true, false]);
    intake.begin(a); // a frame a had sent already
    expect([a.reading, b.reading, pauses, intake.pausedConnections]).toEqual([false, false, 2, 2]);
    intake.end();
    intake.end();
    expect([a.reading, b.reading]).toEqual([false, false]); // 3 in progress: not yet half
    intake.end();
    expect([a.reading, b.reading, intake.inProgress, intake.pausedConnections]).toEqual([true, true, 2, 0]);
  });

  it("forgets a closed connection", () => {
    const intake = new SubmitIntake(1);
    const a = connection();
    intake.begin(a);
    intake.forget(a);
    intake.end();
    expect(a.reading).toBe(false);
    expect(intake.pausedConnections).toBe(0);
  });
});

/** A frame that answers a client's frame (not a delivery or a notice). */
const isAnswer = (frame: ServerFrame) => frame.type === "error" || frame.type === "submitted";

describeWithNats("a gateway whose broker falls behind", () => {
  const nats = useNatsServer();

  it("stops reading submitting sockets past its mark, then answers every submission once the broker catches up", async () => {
    const server = await nats();
    const gw = await startTestGateway({ natsUrl: server.url, maxSubmitsInProgress: 2 });
    let paused = false;
    try {
      const alpha = await gw.register("agent-alpha");
      const beta = await gw.register("agent-beta");
      await handshake(gw, alpha, beta);
      const ws = await FrameClient.connect(gw.gateway.wsUrl, alpha.apiKey);
      await ws.next("ready");
      // NATS stops answering (the process is stopped): submissions stay in progress.
      process.kill(server.pid, "SIGSTOP");
      paused = true;
      const submit = (ref: number) =>
        ws.send({
          type: "submit",
          ref,
          envelope: signMessage(buildNotification(alpha.sender, "agent-beta", { ref }), alpha.signer),
        });
      submit(0);
      submit(1);
      await until(
        async () =>
          (await (await fetch(`${gw.url}/metrics`)).text()).match(/^acp_ws_intake_paused_total (\d+)$/m)?.[1],
        (count) => count === "1",
        "the gateway stops reading the socket",
      );
      // Sent now, these wait unread in the socket: even a malformed frame gets no answer yet.
      submit(2);
      submit(3);
      ws.send({ type: "no-such-frame" });
      // Meanwhile the gateway reads and refuses a malformed submission over HTTP at once.
      const refused = await api(gw.url, "/api/v1/messages", { apiKey: beta.apiKey, rawBody: "{" });
      expect(refused.status).toBe(400);
      expect(ws.pending().filter(isAnswer)).toEqual([]);
      process.kill(server.pid, "SIGCONT");
      paused = false;
      await until(
        () => ws.pending().filter(isAnswer),
        (answers) => answers.length === 5,
        "every frame is answered",
        20_000,
      );
      // No answer came before the broker could answer again: the first is a submission's.
      const answers = ws.pending().filter(isAnswer);
      expect(answers[0]).toMatchObject({ type: "submitted", status: "queued" });
      const answered = [];
      for (let ref = 0; ref < 4; ref++) answered.push(await ws.next("submitted", (f) => f.ref === ref));
      expect(answered.map((f) => [f.ref, f.status, f.duplicate])).toEqual(
        [0, 1, 2, 3].map((ref) => [ref, "queued", false]),
      );
      expect((await ws.next("error")).error.message).toBe("unknown or malformed frame");
      await ws.close();
    } finally {
      if (paused) process.kill(server.pid, "SIGCONT");
      await gw.close();
    }
  }, 60_000);
});
