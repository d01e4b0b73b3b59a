/**
 * How the receive side (src/client/inbound.ts) settles what it is handed, through a gateway the
 * test plays at the socket (scripted-gateway.ts): each delivery handed to the application once,
 * acknowledged only after its handler finished and its record is durable, a redelivery only
 * acknowledged, handlers within `flow.concurrency`, `working` notices while a delivery is in hand,
 * and the application's HandledStore trusted for what an earlier run did.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { HandledRecord, HandledStore } from "../../src/client/index.js";
import { buildHandoff, buildNotification, newMessageId, signMessage } from "../../src/protocol/index.js";
import { useTmpDir } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";
import { deferred } from "./fixtures.js";
import { notification, request, type ScriptedPair, useScriptedPair } from "./scripted-gateway.js";

const tmp = useTmpDir("acp-inbound-");

/** Bob's settle frames (acknowledge, reject) for delivery `id`, in order. */
const settles = (t: ScriptedPair, id: string) =>
  t.gw
    .sentBy("bob-assistant")
    .filter((f) => (f.type === "acknowledge" || f.type === "reject") && f.id === id)
    .map((f) => f.type);

/**
 * Hands Bob an honest notification and waits for its acknowledgement: every delivery handed over
 * before it has been through Bob's verification chain by then.
 */
async function barrier(t: ScriptedPair): Promise<void> {
  const frame = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { barrier: true }));
  expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
}

const bodies = (t: ScriptedPair) => t.handled.map((h) => h.body).filter((body) => !body.barrier);

/**
 * Bob's notification handler holds each delivery whose body has `field` until `release` resolves;
 * `started` resolves when the first one is being handled.
 */
function holdingHandler(t: ScriptedPair, field: "slow" | "n") {
  const release = deferred();
  const started = deferred();
  t.bob.onNotification(async (body) => {
    if (body[field] === undefined) return;
    started.resolve();
    await release.promise;
  });
  return { release, started };
}

describe("an agent hands each delivery to its application once", () => {
  const t = useScriptedPair(tmp);

  it("acknowledges a redelivery of a handled message without running the handler again", async () => {
    const frame = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    await t.gw.settled("bob-assistant", frame.id);
    t.gw.deliver("bob-assistant", frame.envelope, { attempt: 2 });
    await barrier(t);
    expect(settles(t, frame.id)).toEqual(["acknowledge", "acknowledge"]);
    expect(bodies(t)).toEqual([{ n: 1 }]);
  });

  it("acknowledges a redelivery of a handled message at once, while another delivery waits on the registry", async () => {
    const handled = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    await t.gw.settled("bob-assistant", handled.id);
    const carol = t.gw.register("carol-assistant", "carol");
    const answer = deferred();
    const getAgent = t.gw.directory.getAgent;
    t.gw.directory.getAgent = async (id) => {
      if (id === "carol-assistant") await answer.promise;
      return getAgent(id);
    };
    t.gw.deliver("bob-assistant", notification(carol, "bob-assistant"));
    t.gw.deliver("bob-assistant", handled.envelope, { attempt: 2 });
    await until(
      () => settles(t, handled.id),
      (s) => s.length === 2,
      "the redelivery is acknowledged",
    );
    answer.resolve();
  });

  it("ignores a redelivery while the handler still runs, and acknowledges once it finished", async () => {
    const { release, started } = holdingHandler(t, "slow");
    const frame = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { slow: true }));
    await started.promise;
    t.gw.deliver("bob-assistant", frame.envelope, { attempt: 2 });
    await barrier(t);
    expect(settles(t, frame.id)).toEqual([]);
    release.resolve();
    await t.gw.settled("bob-assistant", frame.id);
    await barrier(t);
    expect(settles(t, frame.id)).toEqual(["acknowledge"]);
    expect(bodies(t)).toEqual([{ slow: true }]);
  });

  it("takes another sender's message with the same id as another message", async () => {
    const carol = t.gw.register("carol-assistant", "carol");
    const carolAgent = await t.connect(carol);
    await carolAgent.handshake("bob-assistant");
    const id = newMessageId();
    const fromAlice = signMessage(
      buildNotification(t.a.sender, "bob-assistant", { who: "alice" }, { messageId: id }),
      t.a.signer,
    );
    const fromCarol = signMessage(
      buildNotification(carol.sender, "bob-assistant", { who: "carol" }, { messageId: id }),
      carol.signer,
    );
    t.gw.deliver("bob-assistant", fromAlice);
    t.gw.deliver("bob-assistant", fromCarol);
    await barrier(t);
    expect(bodies(t)).toEqual([{ who: "alice" }, { who: "carol" }]);
    expect(t.handled[1]?.context).toMatchObject({ from: "carol-assistant", messageId: id });
  });

  it("gives a notification's handler what was verified about it, and counts a clean exchange", async () => {
    const before = t.bob.trust("alice-assistant")!;
    const events: string[] = [];
    t.bob.on("message", (m) => events.push(`${m.kind} ${m.from} ${m.messageId}`));
    const signed = notification(t.a, "bob-assistant", { n: 1 });
    const frame = t.gw.deliver("bob-assistant", signed);
    await t.gw.settled("bob-assistant", frame.id);
    expect(t.handled[0]?.context).toMatchObject({
      from: "alice-assistant",
      principalId: "alice",
      method: "agent.notification",
      type: "notification",
      id: undefined,
      messageId: frame.id,
      headers: signed.params.headers,
      encrypted: false,
      handshake: { peer: "alice-assistant", state: "established" },
      trust: { peer: "alice-assistant", score: before.score },
    });
    expect(events).toEqual([`notification alice-assistant ${frame.id}`]);
    expect(t.bob.trust("alice-assistant")?.observations["clean-exchange"]).toBe(
      before.observations["clean-exchange"] + 1,
    );
  });

  it("reports a notification handler's throw, still runs the next handler, and acknowledges", async () => {
    const later: unknown[] = [];
    t.bob.onNotification(() => {
      throw new Error("handler failed");
    });
    t.bob.onNotification(async (body) => {
      await Promise.resolve();
      later.push(body);
    });
    const frame = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    expect(t.errors.map((e) => e.message)).toEqual(["handler failed"]);
    expect(later).toEqual([{ n: 1 }]);
  });

  it("answers a request and acknowledges it only after the gateway accepted the response", async () => {
    t.bob.onRequest((body, context) => ({ echo: body, id: context.id, type: context.type }));
    const signed = request(t.a, "bob-assistant", { q: 1 });
    const frame = t.gw.deliver("bob-assistant", signed);
    expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    const sent = t.gw.sentBy("bob-assistant");
    const responseAt = sent.findIndex(
      (f) => f.type === "submit" && (f.envelope as { id?: unknown }).id === signed.id,
    );
    expect(responseAt).toBeGreaterThanOrEqual(0);
    expect(responseAt).toBeLessThan(sent.findIndex((f) => f.type === "acknowledge" && f.id === frame.id));
    expect(t.gw.submittedBy("bob-assistant").at(-1)).toMatchObject({
      id: signed.id,
      result: { body: { echo: { q: 1 }, id: signed.id, type: "request" } },
    });
  });
});

describe("an agent runs at most flow.concurrency handlers at once, in arrival order", () => {
  const t = useScriptedPair(tmp, () => ({ flow: { concurrency: 1 } }));

  it("starts the second handler only once the first finished", async () => {
    const releases = [deferred(), deferred()];
    const started: number[] = [];
    t.bob.onNotification(async (body) => {
      if (typeof body.n !== "number") return;
      started.push(body.n);
      await releases[body.n]!.promise;
    });
    const first = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 0 }));
    const second = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    await expect.poll(() => started).toEqual([0]);
    releases[0]!.resolve();
    await t.gw.settled("bob-assistant", first.id);
    await expect.poll(() => started).toEqual([0, 1]);
    expect(settles(t, second.id)).toEqual([]);
    releases[1]!.resolve();
    expect(await t.gw.settled("bob-assistant", second.id)).toMatchObject({ type: "acknowledge" });
  });
});

describe("an agent tells its gateway it is still working on a delivery in hand", () => {
  // The keep-alive's interval runs on a fake clock the test advances; sockets and the rest run on
  // the real one. An ack wait of 60 ms: a `working` notice every 50 ms (never more often).
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const t = useScriptedPair(tmp, () => ({}), { ackWaitMs: 60 });
  const workingOn = (id: string) =>
    t.gw.sentBy("bob-assistant").filter((f) => f.type === "working" && f.id === id).length;
  /** Waits for the `count`th notice about `id` and checks no other followed (expect.poll would advance the fake clock). */
  async function workingNotices(id: string, count: number): Promise<void> {
    await until(
      () => workingOn(id),
      (n) => n >= count,
      `${count} working notices`,
    );
    await barrier(t);
    expect(workingOn(id)).toBe(count);
  }

  it("sends `working` every 50 ms for a delivery until it is settled, once per period across a reconnect", async () => {
    const { release, started } = holdingHandler(t, "n");
    const frame = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    await started.promise;
    vi.advanceTimersByTime(49);
    await barrier(t);
    expect(workingOn(frame.id)).toBe(0);
    vi.advanceTimersByTime(1);
    await workingNotices(frame.id, 1);
    vi.advanceTimersByTime(50);
    await workingNotices(frame.id, 2);
    // A new socket: the keep-alive starts again, once.
    const reconnected = new Promise<void>((resolve) => t.bob.once("connected", () => resolve()));
    t.gw.disconnect("bob-assistant");
    await reconnected;
    vi.advanceTimersByTime(50);
    await workingNotices(frame.id, 3);
    await barrier(t);
    expect(workingOn(frame.id)).toBe(3);
    release.resolve();
    await t.gw.settled("bob-assistant", frame.id);
    vi.advanceTimersByTime(100);
    await barrier(t);
    expect(workingOn(frame.id)).toBe(3);
  });
});

describe("an agent that closes lets the handlers under way finish", () => {
  const t = useScriptedPair(tmp);

  it("acknowledges the running handler's delivery before its socket closes, and takes nothing new", async () => {
    const { release, started } = holdingHandler(t, "slow");
    const running = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { slow: true }));
    await started.promise;
    const closed = t.bob.close();
    const late = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { late: true }));
    // One turn of the event loop: a close() that did not wait for the handler has closed the socket.
    await new Promise((resolve) => setImmediate(resolve));
    release.resolve();
    await closed;
    // The socket stayed open while the handler ran (close() waited for it): its acknowledgement
    // went out on that socket, the only one, and nothing reconnects while closing.
    expect(settles(t, running.id)).toEqual(["acknowledge"]);
    expect(settles(t, late.id)).toEqual([]);
    expect(bodies(t)).toEqual([{ slow: true }]);
  });
});

/** A HandledStore in memory whose answers the test sets. */
function scriptedStore() {
  const records = new Map<string, HandledRecord>();
  const store: HandledStore & {
    records: typeof records;
    failGet: Error | undefined;
    failRecord: Error | undefined;
  } = {
    records,
    failGet: undefined,
    failRecord: undefined,
    get(key) {
      if (store.failGet) {
        const err = store.failGet;
        store.failGet = undefined;
        throw err;
      }
      return records.get(key);
    },
    record(key, record) {
      if (store.failRecord) throw store.failRecord;
      records.set(key, record);
    },
  };
  return store;
}

describe("an agent trusts its application's HandledStore about what an earlier run did", () => {
  const store = scriptedStore();
  const t = useScriptedPair(tmp, () => ({ handledStore: store }));
  const handledRequests: unknown[] = [];
  const key = (id: string) => `alice-assistant/${id}`;
  const keyOf = (message: { params: { headers: { "message-id"?: string } } }) =>
    key(String(message.params.headers["message-id"]));
  /** What Bob submitted since the handshake. */
  let submittedBefore = 0;
  const submitted = () => t.gw.submittedBy("bob-assistant").slice(submittedBefore);
  beforeEach(() => {
    submittedBefore = t.gw.submittedBy("bob-assistant").length;
  });

  it("reports a store that cannot be read and leaves the delivery for its redelivery", async () => {
    store.failGet = new Error("store offline");
    const frame = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
    await barrier(t);
    expect(settles(t, frame.id)).toEqual([]);
    expect(t.errors.map((e) => e.message)).toEqual(["store offline"]);
    t.gw.deliver("bob-assistant", frame.envelope, { attempt: 2 });
    expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    expect(bodies(t)).toEqual([{ n: 1 }]);
    expect(store.records.get(key(frame.id))).toEqual({ done: true });
  });

  it("only acknowledges a message the store has as done, or as handled without an answer due", async () => {
    const done = notification(t.a, "bob-assistant", { n: 1 });
    const noted = notification(t.a, "bob-assistant", { n: 2 });
    store.records.set(keyOf(done), { done: true });
    store.records.set(keyOf(noted), { result: { ok: true } });
    const answered = request(t.a, "bob-assistant");
    store.records.set(keyOf(answered), { done: true });
    for (const message of [done, noted, answered]) {
      const frame = t.gw.deliver("bob-assistant", message);
      expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    }
    expect(bodies(t)).toEqual([]);
    expect(submitted()).toEqual([]);
  });

  it("answers a request the store has a result for with that result, without its handler", async () => {
    t.bob.onRequest((body) => {
      handledRequests.push(body);
      return { ran: true };
    });
    t.bob.onHandoff((body) => {
      handledRequests.push(body);
      return { accepted: true };
    });
    const signed = request(t.a, "bob-assistant");
    const handoff = signMessage(
      buildHandoff(t.a.sender, "bob-assistant", { completed: ["half"], remaining: ["rest"], context: {} }),
      t.a.signer,
    );
    store.records.set(keyOf(signed), { result: { recorded: 1 } });
    store.records.set(keyOf(handoff), { result: { recorded: 2 } });
    for (const message of [signed, handoff]) {
      const frame = t.gw.deliver("bob-assistant", message);
      expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    }
    expect(handledRequests).toEqual([]);
    expect(submitted()).toMatchObject([
      { id: signed.id, result: { body: { recorded: 1 } } },
      { id: handoff.id, result: { body: { recorded: 2 } } },
    ]);
  });

  it("sends the recorded response of a request again, as it is, without its handler", async () => {
    t.bob.onRequest((body) => {
      handledRequests.push(body);
      return { ran: true };
    });
    const signed = request(t.a, "bob-assistant");
    const response = { jsonrpc: "2.0", id: signed.id, result: { recorded: "envelope" } };
    store.records.set(keyOf(signed), { response });
    const frame = t.gw.deliver("bob-assistant", signed);
    expect(await t.gw.settled("bob-assistant", frame.id)).toMatchObject({ type: "acknowledge" });
    expect(handledRequests).toEqual([]);
    expect(submitted()).toEqual([response]);
  });

  it("reports a handled record the store could not write, and still settles the delivery", async () => {
    store.failRecord = new Error("disk full");
    try {
      const handled = t.gw.deliver("bob-assistant", notification(t.a, "bob-assistant", { n: 1 }));
      expect(await t.gw.settled("bob-assistant", handled.id)).toMatchObject({ type: "acknowledge" });
      const misrouted = t.gw.deliver("bob-assistant", notification(t.a, "carol-assistant"));
      expect(await t.gw.settled("bob-assistant", misrouted.id)).toMatchObject({ type: "reject" });
      await expect
        .poll(() => t.errors.map((e) => e.message))
        .toEqual([
          "disk full",
          expect.stringMatching(/^refused .* addressed to carol-assistant/),
          "disk full",
        ]);
    } finally {
      store.failRecord = undefined;
    }
  });
});
