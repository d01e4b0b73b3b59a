/**
 * `agent.a2a.status` and `agent.a2a.progress` to a caller that does not stay: `acp send` (a one-shot,
 * replies-only session) takes the ones about its own request with the answer, and shows them; a
 * caller that has gone gets none queued, only the answer; a later session takes what is there and
 * dead-letters nothing.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GatewayClient } from "../../../../src/client/index.js";
import { writeIdentityFile } from "../../../../src/identity/index.js";
import type { TestAgent } from "../../../helpers/gateway.js";
import { runAcp } from "../../../helpers/cli.js";
import { until } from "../../../helpers/until.js";
import { agentFor } from "../../../client/fixtures.js";
import { useOutboundBed } from "./testbed.js";

describe("A2A out: status notifications to a caller that does not stay", { timeout: 120_000 }, () => {
  const bed = useOutboundBed();

  /** Everything addressed to `agent`, as its own listing shows it. */
  const inboxOf = async (agent: TestAgent) => {
    const client = new GatewayClient({ gateway: bed.gw.url, apiKey: agent.apiKey });
    return (await client.listMessages({ to: agent.identity.agentId, limit: 200 })).items;
  };

  it("acp send takes the status of its own request with the answer: nothing is left queued, nothing dead-lettered", async () => {
    const server = await bed.a2a({ behaviour: "echo-task", streaming: true });
    await bed.addA2A({ url: server.url, agent_id: "echo" });
    const alice = await bed.gw.register("alice", "principal-alice");
    const env = {
      ACP_GATEWAY: bed.gw.url,
      ACP_KEY: join(bed.dir, "alice.key"),
      ACP_API_KEY: alice.apiKey,
      ACP_AUDIT_DIR: join(bed.dir, "audit"),
      ACP_STATE_DIR: join(bed.dir, "state"),
    };
    await writeIdentityFile(env.ACP_KEY, alice.identity);

    const sent = await runAcp(["send", "--to", "echo", "--body", '{"text":"hello"}'], { env });
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toContain("done: hello");
    // What the A2A agent reported while it worked, shown as progress.
    expect(sent.stderr).toMatch(/task \S+ working/);
    expect(sent.stderr).toMatch(/task \S+ completed/);

    const inbox = await inboxOf(alice);
    const statuses = inbox.filter((m) => m.method === "agent.a2a.status");
    expect(statuses.length).toBeGreaterThanOrEqual(2);
    expect(inbox.filter((m) => m.status !== "acknowledged")).toEqual([]);

    // A later session of the same agent finds nothing of that exchange left to refuse.
    const later = await runAcp(["inbox", "--wait", "500"], { env });
    expect(later.code, later.stderr).toBe(0);
    expect(later.stdout).not.toContain("agent.a2a.status");
    expect((await inboxOf(alice)).filter((m) => m.status !== "acknowledged")).toEqual([]);
  });

  it("a caller that has gone gets only the answer queued; its next session, without its old state, takes it", async () => {
    const server = await bed.a2a({ behaviour: "stepwise", streaming: true });
    await bed.addA2A({ url: server.url, agent_id: "stepper" });
    const alice = await bed.gw.register("alice", "principal-alice");
    const first = agentFor(bed.gw, alice, join(bed.dir, "first"));
    const progress: unknown[] = [];
    first.onNotification((body) => {
      progress.push(body);
    });
    await first.connect();
    const answer = first.request("stepper", { text: "go" }, { timeoutMs: 60_000 }).catch((err) => err);
    await until(
      () => progress.length,
      (n) => n >= 2,
      "the caller saw the task start",
    );
    await first.close(); // gone, its request unanswered
    await answer;
    const directory = new GatewayClient({ gateway: bed.gw.url, apiKey: alice.apiKey });
    await until(
      async () => (await directory.getAgent("alice")).presence.state,
      (state) => state === "offline",
      "alice is offline",
    );
    for (let step = 0; step < 4; step++) server.gate.release();
    await until(
      () => inboxOf(alice),
      (inbox) => inbox.some((m) => m.kind === "response"),
      "the answer is queued for alice",
    );

    const queued = (await inboxOf(alice)).filter((m) => m.status === "queued");
    expect(queued.map((m) => m.kind)).toEqual(["response"]);

    // Another machine: no saved handshake; what is queued is taken, not refused.
    const second = agentFor(bed.gw, alice, join(bed.dir, "second"));
    const received: string[] = [];
    second.on("message", (m) => received.push(m.kind));
    await second.connect();
    bed.cleanup(() => second.close());
    await until(
      () => inboxOf(alice),
      (inbox) => inbox.every((m) => m.status === "acknowledged" || m.status === "failed"),
      "everything for alice is settled",
    );
    expect((await inboxOf(alice)).filter((m) => m.status === "failed")).toEqual([]);
    expect(received).toContain("response");
  });
});
