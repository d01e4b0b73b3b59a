/**
 * A TCP relay between an agent and its gateway that can lose the gateway's answers: after
 * `swallowAnswers()` whatever the gateway sends on the open connections is dropped (what the agent
 * sends still arrives), and `cut()` then drops those connections. That is a submission the gateway
 * stored whose answer never reached the agent — the case a resend must settle as a duplicate.
 * New connections are relayed normally.
 */
import { connect, createServer, type Socket } from "node:net";

export interface AnswerDroppingProxy {
  readonly url: string;
  swallowAnswers(): void;
  cut(): void;
  close(): Promise<void>;
}

export async function startAnswerDroppingProxy(upstreamPort: number): Promise<AnswerDroppingProxy> {
  const open = new Set<{ client: Socket; upstream: Socket; swallow: boolean }>();
  const server = createServer((client) => {
    const upstream = connect(upstreamPort, "127.0.0.1");
    const pair = { client, upstream, swallow: false };
    open.add(pair);
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on("error", end);
      socket.on("close", end);
    }
    client.pipe(upstream);
    upstream.on("data", (chunk: Buffer) => {
      if (!pair.swallow) client.write(chunk);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("the proxy has no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    swallowAnswers() {
      for (const pair of open) pair.swallow = true;
    },
    cut() {
      for (const pair of open) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
    },
    close: async () => {
      for (const pair of open) pair.client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
