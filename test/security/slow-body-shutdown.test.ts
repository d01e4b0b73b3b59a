import { connect, type Socket } from "node:net";
import pino from "pino";
import { afterEach, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

const opened: { gateway: TestGateway; socket?: Socket }[] = [];
afterEach(async () => {
  for (const { gateway, socket } of opened.splice(0)) {
    socket?.destroy();
    await gateway.close();
  }
});

/** `acp_http_requests_in_progress` as /metrics shows it (the scrape itself included). */
async function inProgress(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^acp_http_requests_in_progress (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
}

it("closing cuts off a request whose client stopped sending its body once the grace passed, and logs it", async () => {
  const warnings: Record<string, unknown>[] = [];
  const gateway = await startTestGateway({
    shutdownGraceMs: 300,
    logger: pino({ level: "warn" }, { write: (line: string) => void warnings.push(JSON.parse(line)) }),
  });
  const { port } = new URL(gateway.url);
  const socket = connect(Number(port), "127.0.0.1");
  opened.push({ gateway, socket });
  const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  socket.write(
    `POST /api/v1/agents?token=secret HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"agent_id":`,
  );
  // The slow request and the scrape itself: Node would wait five minutes for the rest of its body.
  await until(
    () => inProgress(gateway.url),
    (n) => n === 2,
    "the gateway counts the unfinished request",
  );

  await gateway.gateway.close();
  await ended;
  expect(warnings).toContainEqual(
    expect.objectContaining({
      msg: "closing with requests still in progress; they are cut off",
      requests: ["POST /api/v1/agents"],
      count: 1,
      graceMs: 300,
    }),
  );
});

it("closing waits for a request in progress that finishes within the grace, and answers it", async () => {
  const gateway = await startTestGateway({ shutdownGraceMs: 60_000 });
  opened.push({ gateway });
  const { port } = new URL(gateway.url);
  const socket = connect(Number(port), "127.0.0.1");
  opened[0] = { gateway, socket };
  let answer = "";
  socket.on("data", (chunk) => {
    answer += chunk.toString();
  });
  const body = JSON.stringify({ agent_id: "late" });
  socket.write(
    `POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  await until(
    () => inProgress(gateway.url),
    (n) => n === 2,
    "the gateway counts the unfinished request",
  );
  const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  const closed = gateway.gateway.close();
  socket.write(body);
  await closed;
  await ended;
  // Answered (a refusal naming what the body lacks), not cut off.
  expect(answer).toMatch(/^HTTP\/1\.1 400 /);
});
