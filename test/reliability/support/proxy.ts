/**
 * A TCP load balancer on 127.0.0.1, standing in for HAProxy/nginx in front of several gateways
 * (docs/deploy.md): each new connection goes to the next upstream in turn, skipping one that
 * refuses the connection. When a gateway dies, its clients' connections drop; they reconnect to
 * the balancer and land on a gateway that is alive.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface FailoverProxy {
  readonly url: string;
  /** Open client connections per upstream index. */
  activeConnections(): number[];
  close(): Promise<void>;
}

export async function startFailoverProxy(upstreamPorts: number[]): Promise<FailoverProxy> {
  let turn = 0;
  const active = upstreamPorts.map(() => new Set<Socket>());

  const dial = (index: number): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const upstream = connect(upstreamPorts[index] as number, "127.0.0.1");
      upstream.once("connect", () => resolve(upstream));
      upstream.once("error", reject);
    });

  const server: Server = createServer((client) => {
    client.pause();
    client.on("error", () => client.destroy());
    const first = turn++ % upstreamPorts.length;
    void (async () => {
      for (let i = 0; i < upstreamPorts.length; i++) {
        const index = (first + i) % upstreamPorts.length;
        let upstream: Socket;
        try {
          upstream = await dial(index);
        } catch {
          continue; // that gateway is down: try the next one
        }
        if (client.destroyed) {
          upstream.destroy();
          return;
        }
        const sockets = active[index] as Set<Socket>;
        sockets.add(client);
        upstream.on("error", () => upstream.destroy());
        const end = () => {
          sockets.delete(client);
          client.destroy();
          upstream.destroy();
        };
        upstream.once("close", end);
        client.once("close", end);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
        return;
      }
      client.destroy(); // no gateway is up
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("proxy has no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    activeConnections: () => active.map((sockets) => sockets.size),
    close: async () => {
      for (const sockets of active) for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
