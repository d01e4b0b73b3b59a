/**
 * Abuse of the gateway's limits, against `acp gateway` in its own process (64 KB envelopes,
 * 50 messages/s per agent): oversized bodies and frames, deeply nested JSON, malformed request
 * targets, floods past the rate limit, slow-loris connections. Each is refused with its documented
 * code, the gateway keeps serving, and its memory stays bounded.
 */
import { request } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { buildNotification, ErrorCode, signMessage } from "../../src/protocol/index.js";
import { ADMIN_TOKEN, api } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { recordFigures } from "./support/figures.js";
import { deeplyNested } from "./support/hostile.js";
import { memoryOf, sleep } from "./support/processes.js";
import { MessageStream } from "./support/stream.js";
import { startTarget, type Target } from "./support/target.js";

const MAX_ENVELOPE = 64 * 1024;
const RATE = 50;
const codeOf = (json: Record<string, unknown>) => (json.error as { code: number }).code;

/** Sends raw bytes on a fresh connection; resolves with what came back before the server closed (or 5 s). */
function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(bytes));
    let answer = "";
    socket.on("data", (chunk) => {
      answer += chunk.toString();
    });
    socket.on("error", () => undefined);
    const timer = setTimeout(() => socket.destroy(), 5_000);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(answer);
    });
  });
}

describe("abuse of the gateway's limits", () => {
  const tmp = useTmpDir("acp-rel-abuse-");
  let target: Target;
  beforeAll(async () => {
    target = await startTarget(tmp(), ["--max-envelope", String(MAX_ENVELOPE), "--rate-limit", String(RATE)]);
  });
  afterAll(async () => {
    recordFigures("abuse-limits-memory", { ...memoryOf(target.gateway.pid) });
    await target.gateway.stop();
  });
  const post = (body: string) =>
    api(target.gateway.url, "/api/v1/messages", { apiKey: target.alpha.apiKey, rawBody: body });

  it("refuses oversized bodies and frames without buffering them", async () => {
    const { gateway, alpha } = target;
    const big = JSON.stringify(
      signMessage(
        buildNotification(alpha.sender, "agent-beta", { pad: "x".repeat(MAX_ENVELOPE) }),
        alpha.signer,
      ),
    );
    const declared = await post(big);
    const registration = await api(gateway.url, "/api/v1/agents", {
      rawBody: JSON.stringify({ agentId: "agent-big", pad: "x".repeat(70_000) }),
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });

    // 20 MB streamed without a Content-Length: refused as soon as the limit is passed.
    const before = memoryOf(gateway.pid).rssMb;
    const streamed = await new Promise<{ status: number; sentBeforeAnswer: number; code: number }>(
      (resolve) => {
        let sent = 0;
        let answered = false;
        const req = request(`${gateway.url}/api/v1/messages`, {
          method: "POST",
          headers: {
            "x-api-key": alpha.apiKey,
            "content-type": "application/json",
            "transfer-encoding": "chunked",
          },
        });
        req.on("response", (res) => {
          answered = true;
          let text = "";
          res.on("data", (chunk) => {
            text += chunk;
          });
          res.on("end", () => {
            req.destroy();
            resolve({ status: res.statusCode ?? 0, sentBeforeAnswer: sent, code: codeOf(JSON.parse(text)) });
          });
        });
        req.on("error", () => undefined);
        const chunk = Buffer.alloc(64 * 1024, "x");
        const pump = () => {
          while (!answered && sent < 20 * 1024 * 1024) {
            sent += chunk.length;
            if (!req.write(chunk)) return void req.once("drain", pump);
          }
          if (!answered) req.end();
        };
        pump();
      },
    );
    const after = memoryOf(gateway.pid).rssMb;

    const ws = new WebSocket(gateway.wsUrl, { headers: { "x-api-key": alpha.apiKey } });
    await new Promise((resolve) => ws.once("message", resolve));
    const closeCode = await new Promise<number>((resolve) => {
      ws.once("close", (code) => resolve(code));
      ws.send(JSON.stringify({ type: "submit", ref: 1, envelope: { pad: "x".repeat(3 * MAX_ENVELOPE) } }));
    });
    recordFigures("abuse-oversized", {
      declaredStatus: declared.status,
      registrationStatus: registration.status,
      streamedStatus: streamed.status,
      streamedKbSentBeforeAnswer: Math.round(streamed.sentBeforeAnswer / 1024),
      rssGrowthMb: after - before,
      oversizedFrameCloseCode: closeCode,
    });

    expect([declared.status, codeOf(declared.json)]).toEqual([413, ErrorCode.PayloadTooLarge]);
    expect([registration.status, codeOf(registration.json)]).toEqual([413, ErrorCode.PayloadTooLarge]);
    expect([streamed.status, streamed.code]).toEqual([413, ErrorCode.PayloadTooLarge]);
    expect(streamed.sentBeforeAnswer).toBeLessThan(20 * 1024 * 1024);
    expect(after - before).toBeLessThan(64);
    expect(closeCode).toBe(1009);
  });

  it("refuses deeply nested JSON with -32600 and handles moderate nesting normally", async () => {
    const { gateway, alpha } = target;
    const envelope = JSON.stringify(target.envelope());
    const nested = (depth: number) =>
      envelope.replace('"body":{"n":1}', `"body":{"n":${deeplyNested(depth)}}`);
    const deep = await post(nested(10_000));
    const moderate = await post(nested(100));
    const presence = await api(gateway.url, "/api/v1/agents/agent-alpha/presence", {
      method: "PUT",
      apiKey: alpha.apiKey,
      rawBody: `{"tasks":${deeplyNested(10_000)}}`,
    });
    const ws = new WebSocket(gateway.wsUrl, { headers: { "x-api-key": alpha.apiKey } });
    await new Promise((resolve) => ws.once("message", resolve));
    const frame = await new Promise<{ ref?: unknown; error?: { code: number } }>((resolve) => {
      ws.on("message", (data) => {
        const answer = JSON.parse(data.toString()) as {
          type: string;
          ref?: unknown;
          error?: { code: number };
        };
        if (answer.type === "error" || answer.type === "submitted") resolve(answer);
      });
      ws.send(nested(10_000).replace(/^/, '{"type":"submit","ref":"deep","envelope":').concat("}"));
    });
    ws.close();
    recordFigures("abuse-nesting", {
      envelopeDepth10000: `${deep.status}/${codeOf(deep.json)}`,
      envelopeDepth100: `${moderate.status}/${codeOf(moderate.json)}`,
      restDepth10000: `${presence.status}/${codeOf(presence.json)}`,
      wsDepth10000: String(frame.error?.code),
    });

    expect([deep.status, codeOf(deep.json)]).toEqual([400, ErrorCode.InvalidRequest]);
    // Within the limit the message goes through the pipeline: here the signature no longer matches.
    expect([moderate.status, codeOf(moderate.json)]).toEqual([401, ErrorCode.SignatureInvalid]);
    expect([presence.status, codeOf(presence.json)]).toEqual([400, ErrorCode.InvalidRequest]);
    expect(frame).toMatchObject({ ref: "deep", error: { code: ErrorCode.InvalidRequest } });
  });

  it("answers malformed request targets with 400 instead of dying", async () => {
    const { port } = target.gateway;
    const doubleSlash = await rawExchange(port, "GET // HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const badEscape = await rawExchange(
      port,
      "GET /api/v1/agents/%E0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    const badUpgrade = await rawExchange(
      port,
      "GET // HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    const health = await api(target.gateway.url, "/healthz");
    recordFigures("abuse-request-targets", {
      doubleSlash: doubleSlash.split("\r\n")[0] ?? "",
      badPercentEscape: badEscape.split("\r\n")[0] ?? "",
      badUpgradeAnswerBytes: badUpgrade.length,
      gatewayAlive: target.gateway.child.exitCode === null,
    });

    for (const answer of [doubleSlash, badEscape]) {
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toContain(`"code":${ErrorCode.InvalidRequest}`);
    }
    expect(badUpgrade).toBe("");
    expect(health.status).toBe(200);
    expect(target.gateway.child.exitCode).toBeNull();
  });

  it("answers a flood past the rate limit with 429 and Retry-After, and spares other agents", async () => {
    const { gateway, alpha, beta } = target;
    const started = Date.now();
    const flood = new MessageStream({
      urls: [gateway.url],
      from: alpha,
      to: "agent-beta",
      count: 600,
      concurrency: 30,
      deadlineMs: 60_000,
      resubmit: false,
    });
    const flooding = flood.run();
    const others: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await api(gateway.url, "/api/v1/messages", {
        apiKey: beta.apiKey,
        body: signMessage(buildNotification(beta.sender, "agent-alpha", { i }), beta.signer),
      });
      others.push(res.status);
    }
    await flooding;
    const seconds = (Date.now() - started) / 1000;
    const retryAfter = await api(gateway.url, "/api/v1/messages", {
      apiKey: alpha.apiKey,
      body: signMessage(buildNotification(alpha.sender, "agent-beta", {}), alpha.signer),
    });
    const bound = 2 * RATE + Math.ceil(RATE * seconds) + 1;
    recordFigures("abuse-rate-flood", {
      sent: flood.sent,
      accepted: flood.acknowledged.size,
      limited: flood.answers.get("429") ?? 0,
      otherAnswers: flood.describeAnswers(),
      seconds,
      acceptedBound: bound,
      otherAgentAccepted: others.filter((s) => s === 202).length,
    });

    expect(flood.answers.get("429")).toBeGreaterThan(0);
    expect(flood.acknowledged.size + (flood.answers.get("429") ?? 0)).toBe(600);
    expect(flood.errorCodes).toEqual(new Map([[ErrorCode.RateLimited, flood.answers.get("429")]]));
    expect(flood.acknowledged.size).toBeLessThanOrEqual(bound);
    expect(others).toEqual([202, 202, 202, 202, 202]);
    if (retryAfter.status === 429)
      expect(Number(retryAfter.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });

  it("cuts slow-loris connections off and keeps serving meanwhile", async () => {
    const { gateway, alpha } = target;
    const HEADER_DRIBBLERS = 300;
    const BODY_DRIBBLERS = 30;
    const opened = Date.now();
    const closedAfter: number[] = [];
    const answers: string[] = [];
    const sockets = Array.from({ length: HEADER_DRIBBLERS + BODY_DRIBBLERS }, (_, i) => {
      const socket = connect(gateway.port, "127.0.0.1");
      const headerOnly = i < HEADER_DRIBBLERS;
      socket.on("connect", () => {
        socket.write(
          headerOnly
            ? "POST /api/v1/messages HTTP/1.1\r\nHost: x\r\n"
            : `POST /api/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${alpha.apiKey}\r\ncontent-length: 1000\r\n\r\n{`,
        );
      });
      socket.on("data", (chunk) => answers.push(chunk.toString().split("\r\n")[0] ?? ""));
      socket.on("error", () => undefined);
      socket.on("close", () => closedAfter.push(Date.now() - opened));
      return socket;
    });
    // One more header line (or body byte) every 2 s, for as long as the gateway lets them.
    const dribble = setInterval(() => {
      sockets.forEach((socket, i) => {
        if (!socket.destroyed) socket.write(i < HEADER_DRIBBLERS ? "x-slow: 1\r\n" : " ");
      });
    }, 2_000);
    await sleep(3_000);
    const healthMeanwhile = await api(gateway.url, "/healthz");
    const messageMeanwhile = await api(gateway.url, "/api/v1/messages", {
      apiKey: alpha.apiKey,
      body: signMessage(buildNotification(alpha.sender, "agent-beta", {}), alpha.signer),
    });
    const rssWhileOpen = memoryOf(gateway.pid).rssMb;
    // Node's headersTimeout (20 s) and requestTimeout (60 s) are checked every 30 s: bounded wait.
    for (let i = 0; i < 120 && closedAfter.length < sockets.length; i++) await sleep(1_000);
    clearInterval(dribble);
    for (const socket of sockets) socket.destroy();
    recordFigures("abuse-slow-loris", {
      connections: sockets.length,
      closedByGateway: closedAfter.length,
      slowestCloseSeconds: Math.round(Math.max(...closedAfter) / 1000),
      answers: [...new Set(answers)].join(" | "),
      healthWhileOpen: healthMeanwhile.status,
      messageWhileOpen: messageMeanwhile.status,
      rssWhileOpenMb: rssWhileOpen,
    });

    expect(healthMeanwhile.status).toBe(200);
    expect([202, 429]).toContain(messageMeanwhile.status);
    expect(closedAfter.length).toBe(sockets.length);
  }, 180_000);
});
