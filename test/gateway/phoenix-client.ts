/**
 * The unmodified `phoenix` npm client (Phoenix's own JavaScript client) against a test gateway.
 * Node 20 has no global WebSocket, so the client is given `ws`'s as its transport, as its docs say.
 */
import { type Channel, Socket, type SocketConnectOption } from "phoenix";
import { afterEach } from "vitest";
import { WebSocket } from "ws";
import type { TestGateway } from "../helpers/gateway.js";

export interface NewMessage {
  id: string;
  from: string;
  kind: string;
  method: string;
  attempt: number;
  priority: string;
  envelope: Record<string, unknown>;
}

export interface Reply {
  status: "ok" | "error" | "timeout";
  response: Record<string, unknown>;
}

export interface PhoenixAgent {
  socket: Socket;
  channel: Channel;
  /** new_message pushes received so far. */
  messages: NewMessage[];
  /** Other pushes on the channel (phx_close, phx_error), by event. */
  events: string[];
  join(): Promise<Reply>;
  push(event: string, payload: object): Promise<Reply>;
  /** Resolves when the socket closes (with its close code), or stays pending. */
  closed: Promise<number>;
}

/** A Phoenix socket to the gateway's `/socket` and the channel `topic`; nothing reconnects by itself. */
export function phoenixAgent(
  gw: TestGateway,
  topic: string,
  options: Partial<SocketConnectOption> & { joinParams?: object } = {},
): PhoenixAgent {
  const { joinParams, ...socketOptions } = options;
  const socket = new Socket(`${gw.url.replace(/^http/, "ws")}/socket`, {
    transport: WebSocket as unknown as SocketConnectOption["transport"],
    reconnectAfterMs: () => 3_600_000,
    rejoinAfterMs: () => 3_600_000,
    timeout: 5_000,
    ...socketOptions,
  });
  let closedWith: (code: number) => void = () => undefined;
  const closed = new Promise<number>((resolve) => {
    closedWith = resolve;
  });
  socket.onClose((event: unknown) => closedWith((event as { code: number }).code));
  const channel = socket.channel(topic, joinParams ?? {});
  const messages: NewMessage[] = [];
  const events: string[] = [];
  channel.on("new_message", (payload: NewMessage) => {
    messages.push(payload);
  });
  channel.onClose(() => {
    events.push("phx_close");
  });
  channel.onError(() => {
    events.push("phx_error");
  });
  const settle = (push: ReturnType<Channel["push"]>) =>
    new Promise<Reply>((resolve) => {
      push
        .receive("ok", (response: Record<string, unknown>) => resolve({ status: "ok", response }))
        .receive("error", (response: Record<string, unknown>) => resolve({ status: "error", response }))
        .receive("timeout", () => resolve({ status: "timeout", response: {} }));
    });
  socket.connect();
  return {
    socket,
    channel,
    messages,
    events,
    closed,
    join: () => settle(channel.join()),
    push: (event, payload) => settle(channel.push(event, payload)),
  };
}

/** `phoenixAgent`, for one test file: every agent it opens is disconnected after its test. */
export function usePhoenixAgents(): typeof phoenixAgent {
  const opened: PhoenixAgent[] = [];
  afterEach(() => {
    for (const agent of opened.splice(0)) agent.socket.disconnect();
  });
  return (gw, topic, options) => {
    const agent = phoenixAgent(gw, topic, options);
    opened.push(agent);
    return agent;
  };
}
