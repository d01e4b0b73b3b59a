/**
 * `GET /api/v1/messages` lists the caller's own messages only. Replayed: an agent names another's
 * sender and recipient in the filters, and sends cursors it forged (every shape the brokers hand
 * out, at positions of its choosing) or took from another agent's listing. Each answer holds only
 * its own messages, or is refused as a bad cursor; the others' lists are unchanged and the gateway
 * stays healthy. On both brokers: their cursors and walks differ (NATS walks the caller's own
 * index subjects, in its shard).
 */
import { afterEach, describe, expect, it } from "vitest";
import { buildNotification } from "../../src/protocol/index.js";
import { api, startTestGateway, type TestAgent, type TestGateway } from "../helpers/gateway.js";
import { handshake, submit } from "../helpers/messaging.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";

const cursorOf = (text: string) => Buffer.from(text, "utf8").toString("base64url");

interface Listed {
  id: string;
  from: string;
  to: string;
}

function listSuite(start: () => Promise<TestGateway>): void {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  it("answers with the caller's own messages, whatever filters and cursor it sends", async () => {
    gw = await start();
    const gateway = gw;
    const [alice, bob, mallory] = await Promise.all([
      gateway.register("alice-agent"),
      gateway.register("bob-agent"),
      gateway.register("mallory-agent"),
    ]);
    await handshake(gateway, alice, bob);
    await handshake(gateway, mallory, bob);
    const send = async (from: TestAgent, to: string, n: number) =>
      (await submit(gateway, from, buildNotification(from.sender, to, { n }))).json.id as string;
    for (let n = 0; n < 4; n++) await send(alice, "bob-agent", n);
    await send(bob, "alice-agent", 9);
    await send(mallory, "bob-agent", 1);

    const list = async (who: TestAgent, query = "") =>
      api(gateway.url, `/api/v1/messages${query}`, { apiKey: who.apiKey });
    const items = (answer: { json: Record<string, unknown> }) => answer.json.items as Listed[];
    // Each list also holds the handshake's messages.
    const alicesBefore = items(await list(alice));
    const bobsBefore = items(await list(bob));
    const mallorysOwn = new Set(items(await list(mallory)).map((item) => item.id));
    // What the probes below would show of alice's if the filters decided whose messages are listed.
    expect(items(await list(alice, "?to_agent_id=bob-agent")).length).toBeGreaterThanOrEqual(4);
    const alicesCursor = (await list(alice, "?limit=1")).json.nextCursor as string;
    expect(alicesCursor).toEqual(expect.any(String));

    const forged = ["c1:0", "c1:1", "c1:3", "c2:0:0", "c2:x:0", "c2:x:1", "c2:2:5", "c2:0:999999"].map(
      (text) => `cursor=${cursorOf(text)}`,
    );
    const probes = [
      "",
      "?from_agent_id=alice-agent",
      "?to_agent_id=alice-agent",
      "?from_agent_id=alice-agent&to_agent_id=bob-agent",
      "?from_agent_id=bob-agent&to_agent_id=alice-agent",
      "?to_agent_id=bob-agent",
      "?from_agent_id=bob-agent",
      `?cursor=${alicesCursor}`,
      ...forged.map((query) => `?${query}`),
      ...forged.map((query) => `?from_agent_id=alice-agent&${query}`),
    ];
    for (const probe of probes) {
      const answer = await list(mallory, probe);
      // A cursor of the other broker's shape is refused, as one it never handed out.
      if (forged.some((query) => probe.endsWith(query)) && answer.status === 400) continue;
      expect(answer.status, `${probe}: ${JSON.stringify(answer.json)}`).toBe(200);
      for (const item of items(answer)) {
        expect([item.from, item.to], probe).toContain("mallory-agent");
        expect(mallorysOwn.has(item.id), probe).toBe(true);
      }
    }
    for (const forged of ["c2:y:1", "c3:1", "c2:1", "not a cursor", "c1:-1"]) {
      const answer = await list(mallory, `?cursor=${encodeURIComponent(cursorOf(forged))}`);
      expect(answer.status, forged).toBe(400);
      expect(answer.json.error).toMatchObject({ data: expect.anything() });
    }

    // Nothing changed for the others; the gateway answers as before.
    expect(items(await list(alice))).toEqual(alicesBefore);
    expect(items(await list(bob))).toEqual(bobsBefore);
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
  });
}

describe("message lists (embedded)", () => {
  listSuite(() => startTestGateway());
});

describeWithNats("message lists (NATS)", () => {
  const nats = useNatsServer();
  listSuite(async () => startTestGateway({ natsUrl: (await nats()).url }));
});
