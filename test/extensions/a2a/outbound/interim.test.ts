/**
 * What an A2A agent says while it works reaches the ACP caller as it says it: interim status text
 * and artifact chunks as `agent.a2a.progress`, in order; and a task continued after
 * `input-required` is followed to its real next state, not answered with the state it was in.
 */
import { describe, expect, it } from "vitest";
import { until } from "../../../helpers/until.js";
import { useOutboundBed } from "./testbed.js";

const MODES = [
  ["streaming (SendStreamingMessage)", true],
  ["polling (SendMessage, then GetTask)", false],
] as const;

describe("A2A out: interim text and artifacts, and input-required follow-ups", () => {
  const bed = useOutboundBed();

  it.each(MODES)("a follow-up to input-required gets the task's next state, %s", async (_name, streaming) => {
    const server = await bed.a2a({ behaviour: "ask-name", streaming });
    await bed.addA2A({ url: server.url, agent_id: "greeter" });
    const alice = await bed.caller();
    const statuses: { messageId: string; state: string }[] = [];
    alice.onNotification((body, context) => {
      if (context.method === "agent.a2a.status") statuses.push(body as { messageId: string; state: string });
    });

    const asked = await alice.request("greeter", { text: "hi" });
    expect(asked).toMatchObject({ text: "what is your name?", a2a: { state: "input-required" } });
    const { taskId } = asked.a2a as { taskId: string };
    const answered = await alice.request("greeter", { text: "Ada", taskId });
    expect(answered).toMatchObject({ text: "hello, Ada", a2a: { taskId, state: "completed" } });
    expect(server.received).toEqual(["hi", "Ada"]);
    // The agent re-announced the task as it was before working on the answer: no news to the caller.
    const first = statuses[0]?.messageId;
    const followUp = statuses.filter((s) => s.messageId !== first).map((s) => s.state);
    expect(followUp).not.toContain("input-required");
    expect(followUp.at(-1)).toBe("completed");
  });

  it.each(MODES)(
    "status text and artifact chunks reach the caller as they come, %s",
    async (_name, streaming) => {
      const server = await bed.a2a({ behaviour: "stepwise", streaming });
      await bed.addA2A({ url: server.url, agent_id: "stepper" });
      const alice = await bed.caller();
      const progress: Record<string, unknown>[] = [];
      alice.onNotification((body, context) => {
        if (context.method === "agent.a2a.progress") progress.push(body);
      });
      const answer = alice.request("stepper", { text: "go" });
      // Each step waits until the caller has seen the one before: nothing is held until the end.
      for (const text of ["step 1", "Hel", "lo", "step 2"]) {
        await until(
          () => progress.map((p) => p.text),
          (texts) => texts.includes(text),
          `the caller has seen "${text}"`,
        );
        server.gate.release();
      }
      const done = await answer;
      expect(done).toMatchObject({
        text: "done\nHello",
        a2a: { state: "completed" },
        artifacts: [{ artifactId: "result", parts: [{ text: "Hel" }, { text: "lo" }] }],
      });
      const { taskId } = done.a2a as { taskId: string };
      expect(progress).toEqual([
        expect.objectContaining({
          taskId,
          seq: 1,
          state: "working",
          text: "step 1",
          message: expect.any(Object),
        }),
        expect.objectContaining({
          seq: 2,
          text: "Hel",
          append: false,
          artifact: expect.objectContaining({ artifactId: "result", parts: [{ text: "Hel" }] }),
        }),
        expect.objectContaining({
          seq: 3,
          text: "lo",
          append: true,
          artifact: expect.objectContaining({ artifactId: "result", parts: [{ text: "lo" }] }),
        }),
        expect.objectContaining({ seq: 4, state: "working", text: "step 2" }),
      ]);
      expect(new Set(progress.map((p) => p.messageId)).size).toBe(1);
    },
  );
});

describe("A2A out: a chatty A2A agent", () => {
  const bed = useOutboundBed({}, { maxProgressPerRequest: 5 });

  it("is forwarded only up to the bridge's limit of progress per request; the answer still comes", async () => {
    const server = await bed.a2a({ behaviour: "chatty", streaming: true });
    await bed.addA2A({ url: server.url, agent_id: "chatty" });
    const alice = await bed.caller();
    const seqs: number[] = [];
    alice.onNotification((body, context) => {
      if (context.method === "agent.a2a.progress") seqs.push(body.seq as number);
    });
    expect(await alice.request("chatty", { text: "go" })).toMatchObject({ text: "done" });
    await until(
      () => seqs.length,
      (n) => n >= 5,
      "the caller has the progress sent",
    );
    // Sent before the answer, so had a sixth been sent it would be here too.
    expect(seqs.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5]);
  });
});
