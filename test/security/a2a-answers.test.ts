/**
 * An external A2A agent cannot fill the gateway's memory with its answer. The outbound bridge reads
 * an answer (plain JSON or an event stream) only up to 8 MiB and then closes the connection: it
 * never holds the rest. Replayed with an A2A agent that answers a 512 MiB body (one that would take
 * the gateway past a gigabyte if read whole): the caller gets a clear error, and the agent's server
 * sees its connection closed long before it finished writing.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import type { AcpError } from "../../src/protocol/index.js";
import { until } from "../helpers/until.js";
import { useOutboundBed } from "../extensions/a2a/outbound/testbed.js";

const ANSWER_LIMIT = 8 * 1024 * 1024;
const HUGE = 512 * 1024 * 1024;

interface Flood {
  origin: string;
  /** Bytes the server handed to its socket for the JSON-RPC answer. */
  written(): number;
  /** The answer's connection closed before the server wrote all of it. */
  cutOff(): boolean;
  calls(): number;
  close(): Promise<void>;
}

/** An A2A agent whose card is honest and whose every JSON-RPC answer is HUGE bytes long. */
async function floodingAgent(stream: boolean): Promise<Flood> {
  let written = 0;
  let cutOff = false;
  let calls = 0;
  const chunk = Buffer.alloc(256 * 1024, "x");
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    if (req.method === "GET") {
      const origin = `http://${req.headers.host}`;
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          name: "Flood",
          supportedInterfaces: [{ url: `${origin}/rpc`, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
          capabilities: { streaming: stream },
          skills: [{ id: "flood", name: "Flood" }],
        }),
      );
      return;
    }
    calls++;
    res.writeHead(200, { "content-type": stream ? "text/event-stream" : "application/json" });
    res.on("close", () => {
      if (!res.writableFinished) cutOff = true;
    });
    // A JSON string (or one event's data) that never ends within any limit.
    res.write(
      stream
        ? 'data: {"jsonrpc":"2.0","id":"1","result":{"message":{"text":"'
        : '{"jsonrpc":"2.0","id":"1","result":"',
    );
    const pump = () => {
      while (!res.destroyed && written < HUGE) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
      if (!res.destroyed) res.end('"}');
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    written: () => written,
    cutOff: () => cutOff,
    calls: () => calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("A2A answers are read up to their limit, never whole", () => {
  const bed = useOutboundBed();

  for (const stream of [false, true]) {
    it(`${stream ? "an event stream" : "a JSON answer"} of 512 MiB is refused, and its connection cut at the limit`, async () => {
      const flood = await floodingAgent(stream);
      bed.cleanup(() => flood.close());
      const added = await bed.addA2A({ url: flood.origin, agentId: "flood" });
      expect(added.status).toBe(201);
      const alice = await bed.caller();

      const err = (await alice.request("flood", { text: "hi" }).catch((e: unknown) => e)) as AcpError;
      expect(err.message).toContain(`exceeds ${ANSWER_LIMIT} bytes`);
      expect(err.data).toMatchObject({ a2a: { failure: "bad-response" } });
      await until(() => flood.cutOff(), Boolean, "the agent's server sees its connection closed");
      // Written before the close: the limit plus what socket buffers held, nowhere near the answer.
      expect(flood.written()).toBeLessThan(HUGE / 8);
      expect(flood.calls()).toBe(1);

      // The gateway carries on.
      expect((await fetch(`${bed.gw.url}/healthz`)).status).toBe(200);
    });
  }
});
