import { createServer } from "node:net";

/** A TCP port free on 127.0.0.1 right now (for a server a test must restart on the same port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/**
 * Runs `start` again (3 attempts in all) when it failed because a port it picked with `freePort` was
 * taken before its server bound it: in between, any outgoing connection on the machine (another
 * test's, or one server dialling another) can get that port as its ephemeral source port. `start`
 * must pick fresh ports each time and leave nothing running when it fails.
 */
export async function retryOnPortClash<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (error) {
      if (attempt >= 3 || !String(error).includes("address already in use")) throw error;
    }
  }
}
