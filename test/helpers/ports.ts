import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** Below this, ports belong to well-known services. */
const FLOOR = 10_000;

/**
 * The lowest port of the kernel's ephemeral range: source ports of outgoing connections, and what
 * `listen(0)` binds, come from it and up (Linux's default is 32768).
 */
export function ephemeralPortFloor(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > FLOOR + 1_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Does `port` bind on 127.0.0.1 right now? */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port free on 127.0.0.1 right now (for a server a test must restart on the same port, or
 * whose port must be known before it starts). It is picked at random below the ephemeral range, so
 * no outgoing connection on the machine (another test's, a server dialling another) can take it as
 * its source port before the test's server binds it; only another pick of the same port can.
 */
export async function freePort(): Promise<number> {
  const ceiling = ephemeralPortFloor();
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = FLOOR + Math.floor(Math.random() * (ceiling - FLOOR));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port on 127.0.0.1 between ${FLOOR} and ${ceiling} after 100 tries`);
}

/**
 * Runs `start` again (3 attempts in all) when it failed because a port it picked with `freePort` was
 * taken before its server bound it (another test's pick of the same port, rarely). `start`
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
