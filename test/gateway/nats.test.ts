import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { consumerName, INBOX_STREAM } from "../../src/broker/nats/layout.js";
import { buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { api, FrameClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { describeWithNats, startNatsServer, useNatsServer } from "../helpers/nats.js";
import { gatewaySuite } from "./suite.js";
import { handshake, receive } from "../helpers/messaging.js";
import { gatewayLimitsSuite } from "./suite-limits.js";
import { severalSocketsSuite } from "./suite-sockets.js";

/** Connects until the gateway says `ready`: the first tries may meet the previous socket's inbox still closing. */
async function eventuallyConnected(wsUrl: string, apiKey: string): Promise<FrameClient> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const ws = await FrameClient.connect(wsUrl, apiKey);
    try {
      await ws.next("ready");
      return ws;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** A gateway on its own fresh nats-server; closing it stops both. */
async function gatewayOnNats(options: Record<string, unknown> = {}): Promise<TestGateway> {
  const nats = await startNatsServer();
  const gw = await startTestGateway({ ...options, natsUrl: nats.url });
  return {
    ...gw,
    close: async () => {
      await gw.close();
      await nats.dispose();
    },
  };
}

describeWithNats("gateway on NATS JetStream", () => {
  describe("relay", () => gatewaySuite(gatewayOnNats));
  describe("limits", () => gatewayLimitsSuite(gatewayOnNats));
  describe("several sockets of one agent, on two gateways", () =>
    severalSocketsSuite(async () => {
      const nats = await startNatsServer();
      const a = await startTestGateway({ natsUrl: nats.url });
      const b = await startTestGateway({ natsUrl: nats.url });
      return {
        a,
        b,
        close: async () => {
          await a.close();
          await b.close();
          await nats.dispose();
        },
      };
    }));

  describe("several gateways on one NATS", () => {
    const nats = useNatsServer();

    it("delivers to an agent on gateway A what was submitted at gateway B", async () => {
      const server = await nats();
      const a = await startTestGateway({ natsUrl: server.url });
      const b = await startTestGateway({ natsUrl: server.url });
      try {
        const alpha = await a.register("agent-alpha");
        const beta = await a.register("agent-beta");
        // Registered at A, known at B: the registry lives in NATS KV.
        await handshake(b, alpha, beta);
        const ws = await FrameClient.connect(a.gateway.wsUrl, beta.apiKey);
        await receive(ws, 2);
        const sent = await api(b.url, "/api/v1/messages", {
          apiKey: alpha.apiKey,
          body: signMessage(buildNotification(alpha.sender, "agent-beta", { via: "b" }), alpha.signer),
        });
        expect(sent.status).toBe(202);
        const frame = await ws.next("new_message", (f) => f.id === sent.json.id);
        ws.send({ type: "acknowledge", id: frame.id, from: frame.from });
        await expect
          .poll(
            async () =>
              (await api(b.url, `/api/v1/messages/${frame.id}/status`, { apiKey: alpha.apiKey })).json.status,
          )
          .toBe("acknowledged");
        await ws.close();
      } finally {
        await a.close();
        await b.close();
      }
    });

    it("loses no acknowledged message across a nats-server restart", async () => {
      const server = await nats();
      const gw = await startTestGateway({ natsUrl: server.url });
      try {
        const alpha = await gw.register("agent-alpha");
        const beta = await gw.register("agent-beta");
        await handshake(gw, alpha, beta);
        const accepted: string[] = [];
        const sendBatch = async (from: number) => {
          for (let n = from; n < from + 50; n++) {
            const r = await api(gw.url, "/api/v1/messages", {
              apiKey: alpha.apiKey,
              body: signMessage(buildNotification(alpha.sender, "agent-beta", { n }), alpha.signer),
            });
            if (r.status === 202) accepted.push(r.json.id as string);
          }
        };
        await sendBatch(0);
        await server.restart();
        await expect.poll(async () => (await api(gw.url, "/healthz")).status, { timeout: 20_000 }).toBe(200);
        await sendBatch(50);
        expect(accepted.length).toBeGreaterThanOrEqual(50);
        const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
        const ids = await receive(ws, accepted.length + 2);
        expect(accepted.filter((id) => !ids.includes(id))).toEqual([]);
        expect(new Set(ids).size).toBe(ids.length);
        await ws.close();
      } finally {
        await gw.close();
      }
    }, 60_000);

    it("closes an inbox that finished opening after its socket went, so the agent can connect again", async () => {
      const server = await nats();
      const gw = await startTestGateway({ natsUrl: server.url });
      try {
        const alpha = await gw.register("agent-alpha");
        const beta = await gw.register("agent-beta");
        // Nothing queued for beta yet (a delivery would end the forgotten inbox's loop and close it).
        // Consumer set-up on a busy NATS can take seconds; held here until the socket is gone.
        const broker = gw.gateway.broker;
        const openInbox = broker.openInbox.bind(broker);
        let release: () => void = () => undefined;
        const released = new Promise<void>((resolve) => {
          release = resolve;
        });
        let opening: () => void = () => undefined;
        const opened = new Promise<void>((resolve) => {
          opening = resolve;
        });
        broker.openInbox = async (...args) => {
          opening();
          await released;
          return openInbox(...args);
        };
        const early = new WebSocket(gw.gateway.wsUrl, { headers: { "x-api-key": beta.apiKey } });
        await new Promise((resolve) => early.once("open", resolve));
        await opened;
        await new Promise<void>((resolve) => {
          early.once("close", () => resolve());
          early.close();
        });
        release();
        broker.openInbox = openInbox;
        // Before the fix the inbox stayed open, unread, until a message came: no connection got ready.
        const ws = await eventuallyConnected(gw.gateway.wsUrl, beta.apiKey);
        await handshake(gw, alpha, beta);
        const body = signMessage(buildNotification(alpha.sender, "agent-beta", { n: 1 }), alpha.signer);
        expect((await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body })).status).toBe(202);
        const frame = await ws.next("new_message", (f) => f.method === "agent.notification");
        expect(frame.envelope).toEqual(body);
        await ws.close();
      } finally {
        await gw.close();
      }
    });

    it("opens the inbox again for a connected agent whose consumer was deleted on the server", async () => {
      const server = await nats();
      const gw = await startTestGateway({ natsUrl: server.url });
      const nc = await connect({ servers: server.url });
      try {
        const alpha = await gw.register("agent-alpha");
        const beta = await gw.register("agent-beta");
        await handshake(gw, alpha, beta);
        const ws = await FrameClient.connect(gw.gateway.wsUrl, beta.apiKey);
        await receive(ws, 2); // the handshake's, acknowledged
        // The first attempt to open the inbox again fails (the broker briefly unavailable): retried.
        const broker = gw.gateway.broker;
        const openInbox = broker.openInbox.bind(broker);
        let attempts = 0;
        broker.openInbox = async (...args) => {
          if (attempts++ === 0) throw new Error("JetStream briefly unavailable");
          return openInbox(...args);
        };
        // An operator (or a stream restored from a backup) removes the agent's consumer meanwhile.
        const jsm = await jetstreamManager(nc);
        const consumer = consumerName("agent-beta");
        await expect
          .poll(async () => (await jsm.consumers.info(INBOX_STREAM, consumer)).num_ack_pending)
          .toBe(0);
        // nats-server 2.9 can refuse the delete while it is still writing the consumer's state out.
        await expect
          .poll(() => jsm.consumers.delete(INBOX_STREAM, consumer).catch((error: Error) => error.message))
          .toBe(true);
        // The socket stays connected; the message sent now reaches it through a new consumer.
        const body = signMessage(buildNotification(alpha.sender, "agent-beta", { n: 1 }), alpha.signer);
        const sent = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body });
        expect(sent.status).toBe(202);
        const frame = await ws.next("new_message", (f) => f.id === sent.json.id);
        expect(frame.envelope).toEqual(body);
        expect(attempts).toBe(2);
        await ws.close();
      } finally {
        await nc.close();
        await gw.close();
      }
    });

    it("answers a resubmission 503, not Replay, while the stored envelope cannot be read back", async () => {
      const server = await nats();
      const gw = await startTestGateway({ natsUrl: server.url });
      const nc = await connect({ servers: server.url });
      try {
        const alpha = await gw.register("agent-alpha");
        const beta = await gw.register("agent-beta");
        await handshake(gw, alpha, beta);
        const body = signMessage(buildNotification(alpha.sender, "agent-beta", { n: 1 }), alpha.signer);
        const first = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body });
        expect(first.status).toBe(202);
        // What a lagging replica answers: the id is known (status record, dedup window), the
        // envelope is not found. Caused here by removing the message from the stream.
        const jsm = await jetstreamManager(nc);
        const stored = await jsm.streams.getMessage(INBOX_STREAM, { last_by_subj: "agent.agent-beta.inbox" });
        await jsm.streams.deleteMessage(INBOX_STREAM, stored!.seq);
        const again = await api(gw.url, "/api/v1/messages", { apiKey: alpha.apiKey, body });
        expect(again.status).toBe(503);
        expect(again.json.error).toMatchObject({
          code: ErrorCode.StorageUnavailable,
          data: { messageId: first.json.id },
        });
      } finally {
        await nc.close();
        await gw.close();
      }
    });
  });
});
