import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import { type AddressInfo, connect as connectTcp, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as connectTls } from "node:tls";
import { afterEach, describe, expect, it } from "vitest";
import { createListener, stopListening } from "../../src/http/server.js";
import { tlsCertificate } from "../helpers/tls.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** A TLS listener answering every request with 200, and the next TCP connection it accepts. */
async function tlsListener(): Promise<{ server: Server; port: number; accepted: Promise<Socket> }> {
  const dir = mkdtempSync(join(tmpdir(), "acp-listener-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const server = createListener(tlsCertificate(dir), (_req, res) => res.end("ok"));
  const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => server.closeAllConnections());
  return { server, port: (server.address() as AddressInfo).port, accepted };
}

describe("stopListening", () => {
  it("cuts a connection whose TLS handshake completes after the stop, though its client keeps polling", async () => {
    const { server, port, accepted } = await tlsListener();
    const tcp = connectTcp(port, "127.0.0.1");
    await accepted;
    // Accepted, but not yet the HTTP server's: the stop comes while the handshake has not begun.
    const stopped = stopListening(server);
    server.closeAllConnections();

    // The client finishes its handshake and then asks again and again on the kept-alive connection,
    // as a peer's status poll does; 30 answers would mean the connection outlived the stop.
    const answers = await new Promise<number>((resolve) => {
      let count = 0;
      const tls = connectTls({ socket: tcp, rejectUnauthorized: false });
      const ask = () => tls.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      tls.on("secureConnect", ask);
      tls.on("data", (chunk: Buffer) => {
        count += chunk.toString("latin1").split("HTTP/1.1 200").length - 1;
        if (count >= 30) {
          tls.destroy();
          resolve(count);
        } else setTimeout(ask, 20);
      });
      tls.on("error", () => undefined);
      tls.on("close", () => resolve(count));
    });
    expect(answers).toBe(0);
    await stopped;
    expect(server.listening).toBe(false);
  });
});
