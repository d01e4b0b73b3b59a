/**
 * `list` on NATS: each message has an index entry on its sender's subject and one on its
 * recipient's, in their shards' index streams, walked with direct gets. A store made before the
 * shards has one index stream, `ACP_INDEX`, with one entry per message by pair
 * (`acp.index.<from>.<to>`): a broker opened on it lists those messages first, then the new ones,
 * until retention has emptied it.
 */
import { DiscardPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { expect, it } from "vitest";
import { type Broker, type ListQuery, openBroker, type SubmitInput } from "../../src/broker/index.js";
import {
  bucketOptions,
  INBOX_STREAM,
  LEGACY_INDEX_STREAM,
  pairIndexSubject,
  STATUS_BUCKET,
} from "../../src/broker/nats/layout.js";
import { LegacyIndex } from "../../src/broker/nats/legacy-index.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { writeEarlierMessage } from "./earlier-layout.js";
import { closedAfterEach, message } from "./support.js";

const startNats = useNatsServer();
const { opened, connections } = closedAfterEach();

async function open(servers: string): Promise<Broker> {
  const broker = await openBroker({ nats: { servers } });
  opened.push(broker);
  return broker;
}

async function jsmOf(servers: string) {
  const nc = await connect({ servers });
  connections.push(nc);
  return { nc, jsm: await jetstreamManager(nc), js: jetstream(nc) };
}

/**
 * The streams and records a broker made before the participant subjects wrote for `inputs`: the
 * index stream on `acp.index.*.*`, one entry per message by pair, status records pointing at it.
 */
async function writeEarlierLayout(servers: string, inputs: SubmitInput[]): Promise<void> {
  const { nc, jsm } = await jsmOf(servers);
  const common = {
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    allow_direct: true,
  };
  await jsm.streams.add({ ...common, name: INBOX_STREAM, subjects: ["agent.*.inbox"] });
  await jsm.streams.add({ ...common, name: LEGACY_INDEX_STREAM, subjects: ["acp.index.*.*"] });
  await new Kvm(nc).create(STATUS_BUCKET, bucketOptions(STATUS_BUCKET, 1));
  for (const input of inputs) await writeEarlierMessage(nc, input);
}

/** Every id of a listing, page by page (`limit` each). */
async function listAll(broker: Broker, query: ListQuery, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 50; pages++) {
    const page = await broker.list({ ...query, limit, ...(cursor ? { cursor } : {}) });
    ids.push(...page.items.map((item) => item.id));
    if (!page.nextCursor) return ids;
    cursor = page.nextCursor;
  }
  throw new Error("list did not end");
}

describeWithNats("NATS broker: list", () => {
  it("lists what a broker of the earlier index layout stored first, then what it stores now", async () => {
    const server = await startNats();
    const earlier = [
      message("alice", "bob"),
      message("bob", "alice"),
      message("carol", "dave"),
      message("alice", "alice"),
      message("carol", "alice"),
    ];
    await writeEarlierLayout(server.url, earlier);
    const broker = await open(server.url);
    const later = [
      message("alice", "bob"),
      message("dave", "alice"),
      message("alice", "alice"),
      message("bob", "carol"),
    ];
    for (const input of later) await broker.submit(input);
    const [ab, ba, cd, aa, ca] = earlier.map((input) => input.id);
    const [ab2, da2, aa2, bc2] = later.map((input) => input.id);
    const check = async (reader: Broker) => {
      for (const limit of [1, 2, 50]) {
        const all = (query: Omit<ListQuery, "limit">) => listAll(reader, query, limit);
        expect(await all({ participant: "alice" })).toEqual([ab, ba, aa, ca, ab2, da2, aa2]);
        expect(await all({ participant: "alice", from: "alice" })).toEqual([ab, aa, ab2, aa2]);
        expect(await all({ participant: "alice", to: "alice" })).toEqual([ba, aa, ca, da2, aa2]);
        expect(await all({ participant: "alice", from: "bob" })).toEqual([ba]);
        expect(await all({ participant: "alice", to: "bob" })).toEqual([ab, ab2]);
        expect(await all({ participant: "alice", from: "alice", to: "alice" })).toEqual([aa, aa2]);
        expect(await all({ participant: "bob" })).toEqual([ab, ba, ab2, bc2]);
        expect(await all({ participant: "dave" })).toEqual([cd, da2]);
        expect(await all({ participant: "erin" })).toEqual([]);
      }
    };
    await check(broker);
    // An earlier message settled through this broker reads as settled in the list.
    await broker.ack("bob", earlier[0] as SubmitInput);
    expect((await broker.list({ participant: "bob", limit: 1 })).items[0]).toMatchObject({
      id: ab,
      status: "acknowledged",
    });
    // A cursor an earlier broker handed out (the last entry it listed) goes on from there.
    const earlierCursor = Buffer.from("c1:2", "utf8").toString("base64url");
    expect(await listAll(broker, { participant: "alice", cursor: earlierCursor }, 2)).toEqual([
      aa,
      ca,
      ab2,
      da2,
      aa2,
    ]);
    // The earlier stream is left as it was, and a gateway started again lists the same.
    const { jsm } = await jsmOf(server.url);
    expect((await jsm.streams.info(LEGACY_INDEX_STREAM)).config.subjects).toEqual(["acp.index.*.*"]);
    await check(await open(server.url));
  });

  it("stops walking the earlier index stream once retention has emptied it", async () => {
    const server = await startNats();
    await writeEarlierLayout(server.url, [message("alice", "bob"), message("bob", "alice")]);
    const broker = await open(server.url);
    const later = message("alice", "bob");
    await broker.submit(later);
    const { jsm } = await jsmOf(server.url);
    let now = 1_000_000;
    const legacy = await LegacyIndex.open(jsm, () => now);
    expect(await legacy.present()).toBe(true);
    // What max_age does to the entries once they are old enough.
    await jsm.streams.purge(LEGACY_INDEX_STREAM);
    expect(await legacy.present()).toBe(true); // asked again once a minute
    now += 60_000;
    expect(await legacy.present()).toBe(false);
    expect((await (await open(server.url)).list({ participant: "alice" })).items.map((m) => m.id)).toEqual([
      later.id,
    ]);
  });

  it("remembers an earlier subject with nothing left from a sequence on, until that stream grows", async () => {
    const server = await startNats();
    await writeEarlierLayout(server.url, [message("alice", "bob")]);
    const { jsm, js } = await jsmOf(server.url);
    let now = 1_000_000;
    const legacy = await LegacyIndex.open(jsm, () => now);
    const subject = pairIndexSubject("alice", "*");
    expect(legacy.noneFrom(subject, 5)).toBe(false);
    legacy.noteNoneFrom(subject, 5);
    expect(legacy.noneFrom(subject, 5)).toBe(true);
    expect(legacy.noneFrom(subject, 9)).toBe(true);
    expect(legacy.noneFrom(subject, 4)).toBe(false);
    legacy.noteNoneFrom(subject, 7);
    expect(legacy.noneFrom(subject, 5)).toBe(true);
    legacy.noteNoneFrom(subject, 2);
    expect(legacy.noneFrom(subject, 2)).toBe(true);
    // A broker of the earlier layout, still running, indexes another message of alice's.
    await js.publish(pairIndexSubject("alice", "carol"), JSON.stringify(message("alice", "carol")));
    now += 60_000;
    expect(await legacy.present()).toBe(true);
    expect(legacy.noneFrom(subject, 5)).toBe(false);
  });
});
