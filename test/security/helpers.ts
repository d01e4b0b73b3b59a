/**
 * What the attack replays under test/security/ share: a listener that records every connection made to it (the attacker's host), and raw HTTP(S) calls
 * that send any Host or Origin header the attack needs.
 */
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { createServer, type Server, type Socket } from "node:net";

/** A host:port on 127.0.0.1 that records every connection and the bytes sent on it, then hangs up. */
export interface RecordingListener {
  port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Everything received, in order. */
  received(): Buffer;
  close(): Promise<void>;
}

export async function recordingListener(host = "127.0.0.1"): Promise<RecordingListener> {
  const chunks: Buffer[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      socket.destroy();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    get connections() {
      return connections;
    },
    received: () => Buffer.concat(chunks),
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One HTTP(S) request with exactly the headers given (Host and Origin included); `ca` trusts a test certificate. */
export function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; ca?: Buffer } = {},
): Promise<RawResponse> {
  const target = new URL(url);
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      target,
      {
        method: options.method ?? (options.body === undefined ? "GET" : "POST"),
        headers: {
          ...(options.body !== undefined && { "content-type": "application/json" }),
          ...options.headers,
        },
        ...(options.ca && { ca: options.ca }),
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** The JSON-RPC messages of an answer that is either JSON or a Server-Sent Events stream. */
export function jsonRpcMessages(response: RawResponse): Record<string, unknown>[] {
  if (!String(response.headers["content-type"] ?? "").startsWith("text/event-stream")) {
    return response.text === "" ? [] : [JSON.parse(response.text) as Record<string, unknown>];
  }
  return response.text
    .split(/\r?\n\r?\n/)
    .map((event) =>
      event
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n"),
    )
    .filter((data) => data !== "")
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}
