/**
 * A gateway that lies, as a test double at the socket: it stands in front of a real gateway,
 * passes HTTP through unchanged, and relays each agent's WebSocket frame by frame, so everything
 * is real except what `lie` changes. `lie` sees each `new_message` frame the real gateway sends
 * and says which agent's socket gets what instead (another agent's delivery, another id). Frames
 * the agents send back are recorded, so a test sees how an agent settled what it was handed.
 * `silence` makes the open sockets go quiet (no frame, no pong) while staying open: a gateway
 * that hangs rather than dies.
 */
import { createServer, request as httpRequest, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import WebSocket, { WebSocketServer } from "ws";
import type { ServerFrame } from "../../src/wire/api.js";

export type DeliveryFrame = Extract<ServerFrame, { type: "new_message" }>;

/** Where a delivery goes instead: `undefined` passes it on unchanged. */
export type Lie = (
  frame: DeliveryFrame,
  socketOf: string,
) => { to: string; frame: DeliveryFrame } | undefined;

export interface LyingGateway {
  readonly url: string;
  /** From now on, each delivery goes through `lie`. */
  lie(lie: Lie | undefined): void;
  /** From now on the sockets open now hear nothing (no frames, no pongs); new ones are served. */
  silence(): void;
  /** The frames agent `agentId` sent its gateway (acknowledge, reject, submit…), in order. */
  sentBy(agentId: string): Record<string, unknown>[];
  close(): Promise<void>;
}

export async function startLyingGateway(upstream: string): Promise<LyingGateway> {
  const target = new URL(upstream);
  const sockets = new Map<string, WebSocket>();
  const sent = new Map<string, Record<string, unknown>[]>();
  let current: Lie | undefined;
  const silenced = new WeakSet<WebSocket>();

  const server = createServer((req, res) => {
    const forwarded = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on("error", () => res.destroy());
    req.pipe(forwarded);
  });
  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    wss.handleUpgrade(req, socket, head, (agentSide) => relay(agentSide, req));
  });

  function relay(agentSide: WebSocket, req: IncomingMessage): void {
    const apiKey = req.headers["x-api-key"];
    const gatewaySide = new WebSocket(`ws://${target.host}${req.url}`, {
      headers: typeof apiKey === "string" ? { "x-api-key": apiKey } : {},
    });
    let agentId = "";
    const early: WebSocket.RawData[] = [];
    gatewaySide.on("open", () => {
      for (const data of early.splice(0)) gatewaySide.send(data.toString());
    });
    agentSide.on("message", (data) => {
      if (agentId) sent.get(agentId)?.push(JSON.parse(data.toString()) as Record<string, unknown>);
      if (gatewaySide.readyState === WebSocket.OPEN) gatewaySide.send(data.toString());
      else early.push(data);
    });
    agentSide.on("ping", (data) => {
      if (!silenced.has(agentSide)) agentSide.pong(data);
    });
    gatewaySide.on("message", (data) => {
      if (silenced.has(agentSide)) return;
      const frame = JSON.parse(data.toString()) as ServerFrame;
      if (frame.type === "ready") {
        agentId = frame.agentId;
        sockets.set(agentId, agentSide);
        if (!sent.has(agentId)) sent.set(agentId, []);
      }
      const instead = frame.type === "new_message" ? current?.(frame, agentId) : undefined;
      if (!instead) agentSide.send(data.toString());
      else sockets.get(instead.to)?.send(JSON.stringify(instead.frame));
    });
    const end = (code?: number) => {
      if (sockets.get(agentId) === agentSide) sockets.delete(agentId);
      for (const ws of [agentSide, gatewaySide]) {
        if (ws.readyState === WebSocket.OPEN) ws.close(code && code >= 4000 ? code : 1000);
        else ws.terminate();
      }
    };
    agentSide.on("close", () => end());
    gatewaySide.on("close", (code) => end(code));
    agentSide.on("error", () => end());
    gatewaySide.on("error", () => end());
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("the lying gateway has no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    lie(lie) {
      current = lie;
    },
    silence() {
      for (const ws of wss.clients) silenced.add(ws);
    },
    sentBy: (agentId) => [...(sent.get(agentId) ?? [])],
    close: async () => {
      for (const ws of wss.clients) ws.terminate();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
