import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import type { Socket } from "node:net";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import {
  type Broker,
  type BrokerEvent,
  type NatsConnectionOptions,
  openBroker,
} from "../../src/broker/index.js";
import {
  consumerName,
  INBOX_STREAM,
  INDEX_SHARDS,
  indexStream,
  LEGACY_INDEX_STREAM,
} from "../../src/broker/nats/layout.js";
import { describeWithNats, useNatsServer } from "../helpers/nats.js";
import { needing } from "../helpers/process-limits.js";
import { useTmpDir } from "../helpers/tmp.js";
import { deliveredBefore, eventually, expectBrokerError, message, reader } from "./support.js";

const startNats = useNatsServer();
const tmp = useTmpDir("acp-nats-tls-");
/** The TLS test makes a self-signed certificate with openssl (it fails under CI=true without it). */
const opensslPath = ["/usr/bin/openssl", "/usr/local/bin/openssl"].find((path) => existsSync(path));
const opened: Broker[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((broker) => broker.close().catch(() => undefined)));
});

const warnings: string[] = [];

async function open(nats: NatsConnectionOptions, ackWaitMs = 5_000): Promise<Broker> {
  const broker = await openBroker({
    nats,
    delivery: { ackWaitMs },
    onWarning: (message) => warnings.push(message),
  });
  opened.push(broker);
  return broker;
}

const NS = 1_000_000;

describeWithNats("NATS broker operations", () => {
  it("creates the documented stream, consumer and bucket layout", async () => {
    const server = await startNats();
    const broker = await open({ servers: server.url });
    await (await broker.openInbox("bob")).close();
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const inbox = (await jsm.streams.info(INBOX_STREAM)).config;
      expect(inbox).toMatchObject({
        subjects: ["agent.*.inbox"],
        storage: "file",
        max_age: 7 * 24 * 3600 * 1000 * NS,
      });
      expect(inbox.duplicate_window).toBeGreaterThanOrEqual(10 * 60 * 1000 * NS);
      for (let shard = 0; shard < INDEX_SHARDS; shard++) {
        const index = (await jsm.streams.info(indexStream(shard))).config;
        expect(index).toMatchObject({
          subjects: [`acp.index.${String(shard).padStart(2, "0")}.*.*`],
          allow_direct: true,
        });
      }
      // The index stream of the earlier layout is kept where it exists, never made.
      await expect(jsm.streams.info(LEGACY_INDEX_STREAM)).rejects.toThrow(/stream not found/);
      const consumer = (await jsm.consumers.info(INBOX_STREAM, consumerName("bob"))).config;
      // The broker counts attempts itself (maxDeliver 6: 1 + 5 retries); JetStream's own limit stays out of the way.
      expect(consumer).toMatchObject({
        filter_subject: "agent.bob.inbox",
        ack_policy: "explicit",
        max_deliver: 1_000_000,
      });
      expect(consumer.backoff).toEqual([5_000, 10_000, 20_000, 40_000, 80_000].map((ms) => ms * NS));
      expect((await jsm.streams.info("KV_acp_message_status")).config.storage).toBe("file");
    } finally {
      await nc.close();
    }
  });

  it("a resubmission after JetStream's duplicate window is still a duplicate: stored and delivered once", async () => {
    const server = await startNats();
    const broker = await open({ servers: server.url });
    const bob = await broker.openInbox("bob");
    const nc = await connect({ servers: server.url });
    try {
      // The 10-minute window, made short on the real streams rather than waited out.
      const jsm = await jetstreamManager(nc);
      for (const stream of [
        INBOX_STREAM,
        ...Array.from({ length: INDEX_SHARDS }, (_, shard) => indexStream(shard)),
      ]) {
        const { config } = await jsm.streams.info(stream);
        await jsm.streams.update(stream, { ...config, duplicate_window: 200 * 1_000_000 });
      }
      const input = message("alice", "bob");
      expect(await broker.submit(input)).toMatchObject({ duplicate: false });
      const received = reader(bob);
      const first = await received.next();
      // JetStream forgets the id once its window passed: the resend is a new stream message. Resent
      // until it is; inside the window JetStream itself calls it a duplicate.
      const late = await eventually(async () => {
        const result = await broker.submit(input);
        expect((await jsm.streams.info(INBOX_STREAM)).state.messages).toBe(2);
        return result;
      });
      expect(late).toEqual({ id: input.id, status: "delivered", duplicate: true });
      // Its index entries were written again, and are not listed: each side lists the message once.
      for (const query of [
        { participant: "alice" },
        { participant: "bob" },
        { participant: "bob", from: "alice" },
      ]) {
        expect((await broker.list(query)).items.map((item) => item.id)).toEqual([input.id]);
      }
      await broker.ack("bob", first);
      expect(await deliveredBefore(broker, received, "bob")).toEqual([]);
      expect(await broker.submit(input)).toMatchObject({ status: "acknowledged", duplicate: true });
      expect(await deliveredBefore(broker, received, "bob")).toEqual([]);
      expect(await broker.get({ from: "alice", id: input.id })).toMatchObject({ status: "acknowledged" });
    } finally {
      await nc.close();
      await bob.close();
    }
  });

  it("brings an existing consumer to the inbox's config when it opens again, keeping what was acknowledged", async () => {
    const server = await startNats();
    const gatewayA = await open({ servers: server.url }, 5_000);
    const [first, second] = [message("alice", "bob"), message("alice", "bob")];
    await gatewayA.submit(first);
    await gatewayA.submit(second);
    const inbox = await gatewayA.openInbox("bob", { maxInFlight: 1 });
    expect(await reader(inbox).next()).toMatchObject({ id: first.id, attempt: 1 });
    await gatewayA.ack("bob", first);
    await inbox.close();
    // Another gateway with another ack wait and in-flight limit opens the same consumer.
    const gatewayB = await open({ servers: server.url }, 7_000);
    const again = reader(await gatewayB.openInbox("bob", { maxInFlight: 4 }));
    expect(await again.next()).toMatchObject({ id: second.id, attempt: 1 });
    expect(await deliveredBefore(gatewayB, again, "bob")).toEqual([]);
    const nc = await connect({ servers: server.url });
    try {
      const consumer = (await (await jetstreamManager(nc)).consumers.info(INBOX_STREAM, consumerName("bob")))
        .config;
      expect(consumer.max_ack_pending).toBe(4);
      expect(consumer.backoff?.[0]).toBe(7_000 * NS);
    } finally {
      await nc.close();
    }
  });

  it("holds what one turn publishes until the turn ends, then sends it in one write", async () => {
    const server = await startNats();
    const broker = await open({ servers: server.url });
    const socket = (broker as unknown as { nc: { protocol: { transport: { socket: Socket } } } }).nc.protocol
      .transport.socket;
    const submits = Array.from({ length: 10 }, () => broker.submit(message("alice", "bob")));
    // The client hands its buffer to the socket at a microtask checkpoint; the socket keeps it.
    await Promise.resolve();
    await Promise.resolve();
    expect(socket.writableCorked).toBe(1);
    expect(socket.writableLength).toBeGreaterThan(10 * 100);
    await new Promise((resolve) => setImmediate(resolve));
    expect(socket.writableCorked).toBe(0);
    expect((await Promise.all(submits)).map((result) => result.status)).toEqual(Array(10).fill("queued"));
  });

  it("relays between two gateways: submitted at B, delivered at A, acknowledged at B", async () => {
    const server = await startNats();
    const gatewayA = await open({ servers: server.url }, 400);
    const gatewayB = await open({ servers: server.url }, 400);
    const seenAtA: string[] = [];
    await gatewayA.events((event: BrokerEvent) => {
      if (event.type === "message.status") seenAtA.push(`${event.message.id}:${event.message.status}`);
    });
    const inbox = reader(await gatewayA.openInbox("bob"));
    const input = message("alice", "bob");
    await gatewayB.submit(input);
    expect(await inbox.next()).toMatchObject({ id: input.id, envelope: input.envelope, attempt: 1 });
    // The ack arrives at the other gateway (e.g. REST): it must reach A's consumer, or A would redeliver.
    await gatewayB.ack("bob", input);
    expect((await gatewayA.status(input))?.status).toBe("acknowledged");
    // Not even after its ack wait ran out at A.
    expect(await deliveredBefore(gatewayA, inbox, "bob", { redelivered: true })).toEqual([]);
    await eventually(async () =>
      expect(seenAtA.filter((seen) => seen.startsWith(`${input.id}:`))).toEqual([
        `${input.id}:queued`,
        `${input.id}:delivered`,
        `${input.id}:acknowledged`,
      ]),
    );
  });

  it("gives deliveries back at once to the inbox opened next through another gateway", async () => {
    const server = await startNats();
    const gatewayA = await open({ servers: server.url }, 30_000);
    const gatewayB = await open({ servers: server.url }, 30_000);
    const first = message("alice", "bob");
    const second = message("alice", "bob");
    await gatewayA.submit(first);
    await gatewayA.submit(second);
    const atA = await gatewayA.openInbox("bob");
    const readA = reader(atA);
    expect((await readA.next()).id).toBe(first.id);
    expect((await readA.next()).id).toBe(second.id);
    await atA.close(); // the agent's WebSocket to A dropped; it reconnects to B
    const atB = reader(await gatewayB.openInbox("bob"));
    // Within the reader's 10 s, not after the 30 s ack wait.
    expect(await atB.next()).toMatchObject({ id: first.id, attempt: 2 });
    expect(await atB.next()).toMatchObject({ id: second.id, attempt: 1 });
    await gatewayB.ack("bob", first);
    await gatewayB.ack("bob", second);
    expect((await gatewayA.status(second))?.status).toBe("acknowledged");
    expect(await deliveredBefore(gatewayB, atB, "bob")).toEqual([]);
  });

  it("keeps the ack-wait schedule after a close although JetStream counted the given-back delivery", async () => {
    const server = await startNats();
    // JetStream would wait 10 s for a second delivery; the policy's first ack wait is 1 s.
    const broker = await openBroker({
      nats: { servers: server.url },
      delivery: { ackWaitMs: 1_000, backoffFactor: 10 },
      onWarning: (warning) => warnings.push(warning),
    });
    opened.push(broker);
    const head = message("alice", "bob");
    const behind = message("alice", "bob");
    await broker.submit(head);
    await broker.submit(behind);
    const first = await broker.openInbox("bob");
    const firstReader = reader(first);
    await firstReader.next();
    await firstReader.next();
    await first.close();
    const again = reader(await broker.openInbox("bob"));
    expect(await again.next()).toMatchObject({ id: head.id, attempt: 2 });
    expect(await again.next()).toMatchObject({ id: behind.id, attempt: 1 });
    await broker.ack("bob", head);
    // Its JetStream delivery count is 2 (10 s wait), its attempt 1 (1 s): redelivered well before 10 s.
    expect(await again.next(6_000)).toMatchObject({ id: behind.id, attempt: 2 });
    expect(await broker.status(behind)).toMatchObject({ status: "delivered", retryCount: 1 });
  });

  it("exposes the server's max_payload less header room, refusing larger envelopes by their UTF-8 size", async () => {
    const server = await startNats();
    const broker = await open({ servers: server.url });
    // nats-server's default max_payload is 1 MB (1,048,576 bytes); 1,024 are kept for headers.
    expect(broker.maxEnvelopeBytes).toBe(1_048_576 - 1_024);
    const longest = {
      id: `m${"x".repeat(127)}`,
      from: `a${"l".repeat(127)}`,
      method: `agent.${"m".repeat(122)}`,
    };
    const fits = message(longest.from, "bob", {
      ...longest,
      envelope: JSON.stringify({ pad: "x".repeat(broker.maxEnvelopeBytes - 10) }),
    });
    expect(Buffer.byteLength(fits.envelope)).toBe(broker.maxEnvelopeBytes);
    await broker.submit(fits);
    const inbox = reader(await broker.openInbox("bob"));
    expect((await inbox.next()).envelope).toBe(fits.envelope);
    // Fewer characters than the limit, more bytes (é is two).
    const tooBig = message("alice", "bob", {
      envelope: JSON.stringify({ pad: "é".repeat(broker.maxEnvelopeBytes / 2) }),
    });
    expect(tooBig.envelope.length).toBeLessThan(broker.maxEnvelopeBytes);
    const refused = await expectBrokerError(broker.submit(tooBig), "invalid_argument", "envelope");
    expect(refused.message).toMatch(/max_payload/);
    expect(await broker.status(tooBig)).toBeNull();
  });

  it("loses nothing acknowledged when nats-server is killed and restarted", async () => {
    const server = await startNats();
    const broker = await open({ servers: server.url }, 1_000);
    const sent: string[] = [];
    for (let i = 0; i < 40; i++) {
      const input = message("alice", "bob");
      await broker.submit(input);
      sent.push(input.id);
    }
    const inbox = reader(await broker.openInbox("bob", { maxInFlight: 4 }));
    const acked = new Set<string>();
    while (acked.size < 15) {
      const delivery = await inbox.next();
      await broker.ack("bob", delivery);
      acked.add(delivery.id);
    }
    warnings.length = 0;
    await server.stop("SIGKILL");
    await expectBrokerError(broker.submit(message("alice", "bob")), "unavailable");
    await server.restart();

    const late = message("alice", "bob");
    await eventually(() => broker.submit(late), 15_000);
    sent.push(late.id);
    for (const id of sent) {
      const status = await broker.status({ from: "alice", id });
      if (acked.has(id)) expect(status?.status).toBe("acknowledged");
      else expect(["queued", "delivered"]).toContain(status?.status);
    }
    const remaining = new Set(sent.filter((id) => !acked.has(id)));
    while (remaining.size > 0) {
      const delivery = await inbox.next(20_000);
      expect(acked.has(delivery.id)).toBe(false);
      await broker.ack("bob", delivery);
      remaining.delete(delivery.id);
    }
    expect(await deliveredBefore(broker, inbox, "bob", { redelivered: true })).toEqual([]);
    // What failed during the outage was reported, without message bodies.
    for (const warning of warnings) expect(warning).not.toContain("jsonrpc");
  });

  needing("openssl", opensslPath !== undefined).it(
    "connects over TLS with the server's CA and refuses an unknown certificate",
    async () => {
      const dir = tmp();
      const certFile = join(dir, "cert.pem");
      const keyFile = join(dir, "key.pem");
      execFileSync(
        opensslPath!,
        [
          "req",
          "-x509",
          "-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:P-256",
          "-nodes",
          "-days",
          "1",
          "-keyout",
          keyFile,
          "-out",
          certFile,
          "-subj",
          "/CN=127.0.0.1",
          "-addext",
          "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        { stdio: "ignore" },
      );
      const server = await startNats({ tls: { certFile, keyFile } });
      const broker = await open({ servers: server.url, tls: { caFile: certFile } });
      expect((await broker.submit(message("alice", "bob"))).duplicate).toBe(false);
      const refused = await expectBrokerError(
        openBroker({ nats: { servers: server.url, tls: true } }),
        "unavailable",
      );
      expect(refused.message).toMatch(/certificate/i);
    },
  );

  it("connects with user/password or token and explains a refused login", async () => {
    const withPassword = await startNats({ user: "acp", pass: "s3cret" });
    const broker = await open({ servers: withPassword.url, user: "acp", pass: "s3cret" });
    expect((await broker.submit(message("alice", "bob"))).status).toBe("queued");
    const refused = await expectBrokerError(
      openBroker({ nats: { servers: withPassword.url, user: "acp", pass: "wrong" } }),
      "unavailable",
    );
    expect(refused.message).toMatch(/authoriz/i);
    const inUrl = await expectBrokerError(
      openBroker({ nats: { servers: withPassword.url.replace("//", "//acp:wrong-secret@") } }),
      "unavailable",
    );
    expect(inUrl.message).not.toContain("wrong-secret");

    const withToken = await startNats({ token: "t0ken-value" });
    const tokenBroker = await open({ servers: withToken.url, token: "t0ken-value" });
    expect((await tokenBroker.health()).ok).toBe(true);
    await expectBrokerError(openBroker({ nats: { servers: withToken.url, token: "nope" } }), "unavailable");
    await expectBrokerError(openBroker({ nats: { servers: [] } }), "invalid_argument", "nats.servers");
    await expectBrokerError(
      openBroker({ nats: { servers: withToken.url, credsFile: "/nonexistent/acp.creds" } }),
      "invalid_argument",
      "nats.credsFile",
    );
  });
});
