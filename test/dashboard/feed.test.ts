import { describe, expect, it, vi } from "vitest";
import { checkSignature } from "../../src/extensions/dashboard/detail.js";
import { LiveFeed } from "../../src/extensions/dashboard/feed.js";
import type { FeedItem, MessageDetail, VolumeBucket } from "../../src/extensions/dashboard/index.js";
import { buildRequest, createSigner, signMessage } from "../../src/protocol/index.js";
import { type RestAnswer, restRecord } from "../../src/wire/deprecated-names.js";
import {
  aliceAsksBob,
  dashboard,
  eventually,
  followStream,
  principalToken,
  useCast,
} from "../helpers/dashboard.js";

const items = (json: Record<string, unknown>) => json.items as FeedItem[];

describe("the summary feed", () => {
  const cast = useCast();

  it("shows a principal's exchanges newest first, live over SSE with keep-alives, and nobody else's", async () => {
    const c = await cast();
    const [alice, carol] = [await principalToken(c.gw, "alice"), await principalToken(c.gw, "carol")];
    const aliceStream = await followStream(c.gw, alice);
    const carolStream = await followStream(c.gw, carol);
    expect(await aliceStream.next("ready")).toEqual({
      viewer: { kind: "principal", principal_id: "alice", principalId: "alice" },
    });

    await aliceAsksBob(c);
    const response = (await aliceStream.next(
      "summary",
      (d) => (d as FeedItem).type === "response",
    )) as FeedItem;
    expect(response).toMatchObject({
      from: { agent: "bob-scheduler", principal: "bob" },
      to: { agent: "alice-scheduler", principal: "alice" },
      encrypted: false,
      status: "queued",
    });
    // The gateway's sentence names what was asked, not the request's id.
    expect(response.summary).toMatch(/^bob-scheduler answered alice-scheduler's /);
    await aliceStream.next("status", (d) => (d as { id: string; status: string }).id === response.id);
    await aliceStream.next("comment", (d) => d === "keep-alive");

    // Carol's own exchange reaches her stream after alice's (one ordered feed): she never saw alice's.
    const carolAgent = await c.connect(c.carol);
    await carolAgent.request("bob-scheduler", { action: "ping" });
    await carolStream.next("summary", (d) => (d as FeedItem).type === "response");
    const seenByCarol = carolStream.events
      .filter((e) => e.event === "summary")
      .map((e) => e.data as FeedItem);
    expect(seenByCarol.length).toBeGreaterThan(0);
    for (const item of seenByCarol) expect([item.from.agent, item.to.agent]).toContain("carol-agent");

    const feed = items((await dashboard(c.gw, alice, "/feed")).json);
    expect(feed.map((i) => i.type)).toEqual([
      "response",
      "request",
      "notification",
      "notification",
      "notification",
      "notification",
    ]);
    expect(feed.map((i) => i.at)).toEqual([...feed.map((i) => i.at)].sort().reverse());
    expect(
      feed
        .filter((i) => i.step)
        .map((i) => i.step)
        .sort(),
    ).toEqual(["announce", "announce", "capabilities", "capabilities"]);
    for (const item of feed) expect([item.from.agent, item.to.agent]).toContain("alice-scheduler");
    const carolFeed = items((await dashboard(c.gw, carol, "/feed")).json);
    expect(carolFeed.length).toBe(6);
    for (const item of carolFeed) expect([item.from.agent, item.to.agent]).toContain("carol-agent");
    expect(items((await dashboard(c.gw, c.gw.adminToken, "/feed")).json)).toHaveLength(12);
    aliceStream.close();
    carolStream.close();
  });

  it("filters by agent, peer, type and time, and names each bad parameter", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    await (await c.connect(c.carol)).request("bob-scheduler", { action: "ping" });
    const admin = c.gw.adminToken;
    const get = async (query: string) => items((await dashboard(c.gw, admin, `/feed${query}`)).json);

    expect((await get("?type=request")).map((i) => i.from.agent).sort()).toEqual([
      "alice-scheduler",
      "carol-agent",
    ]);
    const between = await get("?agent=alice-scheduler&peer=bob-scheduler");
    expect(between).toHaveLength(6);
    expect(await get("?agent=alice-scheduler&peer=carol-agent")).toEqual([]);
    expect(await get("?peer=carol-agent")).toHaveLength(6);
    expect(await get("?limit=2")).toHaveLength(2);
    expect(await get(`?since=${new Date(Date.now() + 60_000).toISOString()}`)).toEqual([]);
    expect(
      await get(
        `?until=${new Date(Date.now() - 3_600_000).toISOString()}&since=${new Date(Date.now() - 7_200_000).toISOString()}`,
      ),
    ).toEqual([]);

    const bad = await dashboard(c.gw, admin, "/feed?type=gossip&limit=0&since=yesterday");
    expect(bad.status).toBe(400);
    expect(
      (bad.json.error as { data: { problems: { path: string }[] } }).data.problems.map((p) => p.path),
    ).toEqual(["type", "limit", "since"]);
    const backwards = await dashboard(
      c.gw,
      admin,
      `/feed?since=${new Date().toISOString()}&until=2020-01-01T00:00:00Z`,
    );
    expect(backwards.json.error).toMatchObject({
      data: { problems: [{ path: "until", message: "must not be before since" }] },
    });
  });

  it("shows encrypted exchanges only as having occurred", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const alice = c.agents.get("alice-scheduler")!;
    await alice.request(
      "bob-scheduler",
      { action: "share", secret_plan: "launch codes 12345" },
      { encrypt: true },
    );
    const token = await principalToken(c.gw, "alice");
    const feed = items((await dashboard(c.gw, token, "/feed?limit=2")).json);
    expect(feed.map((i) => [i.type, i.encrypted, i.summary])).toEqual([
      ["response", true, "An encrypted exchange occurred between bob-scheduler and alice-scheduler."],
      ["request", true, "An encrypted exchange occurred between alice-scheduler and bob-scheduler."],
    ]);
    const detail = await dashboard(c.gw, token, `/messages/${feed[1]!.id}?from=${feed[1]!.from.agent}`);
    expect(detail.json.item).toMatchObject({ encrypted: true });
    for (const text of [JSON.stringify(feed), JSON.stringify(detail.json)]) {
      expect(text).not.toContain("launch codes");
      expect(text).not.toContain("secret_plan");
    }
  });

  it("lists messages stored in the same millisecond newest first, in the order they were stored", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const alice = c.agents.get("alice-scheduler")!;
    // The broker's clock stands still, so both messages are stored (queued) in the same millisecond.
    const clock = vi.spyOn(Date, "now").mockReturnValue(Date.now());
    let sent: string[];
    try {
      sent = [
        (await alice.notify("bob-scheduler", { n: 1 })).id,
        (await alice.notify("bob-scheduler", { n: 2 })).id,
      ];
    } finally {
      clock.mockRestore();
    }
    const shown = async () =>
      items((await dashboard(c.gw, c.gw.adminToken, "/feed?type=notification&limit=100")).json);
    let feed: FeedItem[] = [];
    await eventually(async () => {
      feed = await shown();
      return sent.every((id) => feed.some((item) => item.id === id));
    }, "both notifications are in the feed");
    const listed = feed.filter((item) => sent.includes(item.id));
    expect(listed[0]!.at).toBe(listed[1]!.at);
    expect(listed.map((item) => item.id)).toEqual([...sent].reverse());
  });

  it("summarises a message accepted here once, exactly as reading it back would", async () => {
    const c = await cast();
    const { broker, registry, relay } = c.gw.gateway.context;
    const handedOver: string[] = [];
    const stopListening = relay.onAccepted(({ id }) => handedOver.push(id));
    // A second feed on the same broker that is never handed the relay's entry: it reads each back.
    const errors: unknown[] = [];
    const readBack = new LiveFeed(broker, registry, (err) => errors.push(err));
    await readBack.start();
    await aliceAsksBob(c);
    const alice = c.agents.get("alice-scheduler")!;
    await alice.request("bob-scheduler", { action: "share" }, { encrypt: true });
    const admin = c.gw.adminToken;
    const shown = async () => items((await dashboard(c.gw, admin, "/feed?limit=100")).json);
    await eventually(async () => (await shown()).length === readBack.recent().length, "both feeds caught up");
    await readBack.settled();
    // Both as the API answers them: snake_case, the camelCase names beside them.
    const withoutStatus = (item: FeedItem) => {
      const {
        status: _s,
        retry_count: _r,
        retryCount: _rc,
        ...rest
      } = restRecord(item) as Record<string, unknown>;
      return rest;
    };
    const live = await shown();
    expect(live.map(withoutStatus).reverse()).toEqual(readBack.recent().map(withoutStatus));
    expect(handedOver.sort()).toEqual(live.map((i) => i.id).sort());
    expect(errors).toEqual([]);
    stopListening();
    await readBack.stop();
  });
});

describe("a message's detail", () => {
  const cast = useCast();

  it("has its headers, delivery timeline, re-checked signature and relay audit entry; only for participants", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const alice = await principalToken(c.gw, "alice");
    const bob = await principalToken(c.gw, "bob");
    const carol = await principalToken(c.gw, "carol");
    const request = items((await dashboard(c.gw, alice, "/feed?type=request")).json)[0]!;
    // A feed item is snake_case, the camelCase names beside them for the deprecation period.
    expect(request).toMatchObject({ summary_by: expect.any(String), summaryBy: expect.any(String) });
    const path = `/messages/${request.id}?from=alice-scheduler`;
    let detail: MessageDetail | undefined;
    await eventually(async () => {
      detail = (await dashboard(c.gw, alice, path)).json as unknown as MessageDetail;
      return detail.status === "acknowledged" && detail.audit.length === 1;
    }, "the request is acknowledged and audited");
    expect(detail!.timeline.map((s) => s.status)).toEqual(["queued", "delivered", "acknowledged"]);
    expect((detail as unknown as { retry_count: number }).retry_count).toBe(0);
    expect(detail!.retryCount).toBe(0); // the camelCase name, for the deprecation period
    expect(detail!.headers).toMatchObject({
      "agent-id": "alice-scheduler",
      "principal-id": "alice",
      "recipient-id": "bob-scheduler",
      "message-id": request.id,
      "message-type": "request",
    });
    expect(detail!.signature).toMatchObject({ result: "verified", kid: c.alice.signer.kid });
    expect(detail!.audit[0]).toMatchObject({
      direction: "sent",
      from: { agent: "alice-scheduler", principal: "alice" },
      to: { agent: "bob-scheduler", principal: "bob" },
      file: expect.stringMatching(/^alice-scheduler\/\d{4}-\d{2}\.jsonl$/),
    });

    expect((await dashboard(c.gw, bob, path)).status).toBe(200);
    expect((await dashboard(c.gw, c.gw.adminToken, path)).status).toBe(200);
    const hidden = await dashboard(c.gw, carol, path);
    expect(hidden.status).toBe(404);
    expect(hidden.json.error).toMatchObject({ message: `no message ${request.id}` });
    expect((await dashboard(c.gw, alice, "/messages/no-such-id?from=alice-scheduler")).status).toBe(404);
    // The sender is part of a message's name: another sender's id is another (here: no) message.
    expect((await dashboard(c.gw, alice, `/messages/${request.id}?from=bob-scheduler`)).status).toBe(404);
  });

  it("a tampered or unknown-sender envelope does not verify", async () => {
    const c = await cast();
    const registry = c.gw.gateway.context.registry;
    const signed = signMessage(
      buildRequest(c.alice.sender, "bob-scheduler", { action: "pay", amount: 10 }),
      c.alice.signer,
    );
    expect(await checkSignature(registry, signed)).toMatchObject({ result: "verified" });
    const tampered = { ...signed, params: { ...signed.params, body: { action: "pay", amount: 10_000 } } };
    expect(await checkSignature(registry, tampered)).toMatchObject({
      result: "invalid",
      kid: c.alice.signer.kid,
    });
    const stranger = { ...c.alice, sender: { ...c.alice.sender, agentId: "stranger" } };
    const unsigned = signMessage(
      buildRequest(stranger.sender, "bob-scheduler", {}),
      createSigner({ ...c.alice.identity, agentId: "stranger" }),
    );
    expect(await checkSignature(registry, unsigned)).toMatchObject({
      result: "unknown-key",
      detail: "stranger is not registered at this gateway",
    });
  });
});

describe("message volume", () => {
  const cast = useCast();

  it("counts the viewer's messages per bucket, by type", async () => {
    const c = await cast();
    await aliceAsksBob(c);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const [alice, carol] = [await principalToken(c.gw, "alice"), await principalToken(c.gw, "carol")];
    const volume = (await dashboard(c.gw, alice, `/volume?since=${since}`)).json as RestAnswer<{
      bucketMs: number;
      buckets: VolumeBucket[];
    }>;
    expect(volume.bucket_ms).toBe(5 * 60_000);
    expect(volume.bucketMs).toBe(volume.bucket_ms); // the camelCase names, for the deprecation period
    expect(volume.buckets.length).toBeGreaterThanOrEqual(12);
    expect(volume.buckets[0]?.byType).toEqual(volume.buckets[0]?.by_type);
    const sum = (type: keyof VolumeBucket["byType"]) =>
      volume.buckets.reduce((n, b) => n + b.by_type[type], 0);
    expect([sum("request"), sum("response"), sum("notification"), sum("handoff")]).toEqual([1, 1, 4, 0]);
    expect(volume.buckets.reduce((n, b) => n + b.total, 0)).toBe(6);
    const nothing = (await dashboard(c.gw, carol, `/volume?since=${since}`)).json as {
      buckets: VolumeBucket[];
    };
    expect(nothing.buckets.every((b) => b.total === 0)).toBe(true);
    const long = (await dashboard(c.gw, alice, "/volume?since=2000-01-01T00:00:00Z")).json as typeof volume;
    expect(long.buckets.length).toBeLessThanOrEqual(50);
    expect(long.buckets.reduce((n, b) => n + b.total, 0)).toBe(6);
  });
});
