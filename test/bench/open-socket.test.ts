/**
 * The benchmarks' agent socket must not drop deliveries that reach the client in the same read as
 * `ready`. ws emits every frame of one read synchronously, so a handler attached once `openSocket`
 * resolved missed them: at 200–500 agents on a loaded machine the handshake messages queued before
 * connecting then came only with JetStream's redelivery, 30–90 s later, or not within the
 * benchmark's 120 s.
 */
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import { openSocket } from "../../bench/gateway/acp-agents.js";

let server: WebSocketServer | undefined;

afterEach(async () => {
  for (const client of server?.clients ?? []) client.terminate();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A gateway stand-in that sends `ready` and two deliveries in one socket write. */
function gatewaySendingReadyWithDeliveries(): Promise<string> {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  server = wss;
  wss.on("connection", (ws) => {
    const socket = (ws as unknown as { _socket: import("node:net").Socket })._socket;
    socket.cork();
    ws.send(JSON.stringify({ type: "ready", agentId: "a", gateway: "g", heartbeatMs: 30_000 }));
    for (const id of ["m1", "m2"]) {
      ws.send(
        JSON.stringify({ type: "new_message", id, from: "b", kind: "request", method: "x", attempt: 1 }),
      );
    }
    socket.uncork();
  });
  return new Promise((resolve) =>
    wss.once("listening", () => resolve(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`)),
  );
}

describe("openSocket", () => {
  it("hands the frames that came in the same read as `ready` to onFrame", async () => {
    const url = await gatewaySendingReadyWithDeliveries();
    const ids: string[] = [];
    const ws = await openSocket(url, "key", (text) => ids.push((JSON.parse(text) as { id: string }).id));
    await expect.poll(() => ids, { timeout: 2_000 }).toEqual(["m1", "m2"]);
    ws.close();
  });
});
