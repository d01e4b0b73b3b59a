/**
 * A lean keep-alive JSON POST over node:http, used for both the gateway's HTTP submit path and the
 * plain http+verify baseline so the two pay the same client-side cost. One socket per request in
 * flight (maxSockets = the concurrency), reused for the whole run.
 */
import { Agent, request } from "node:http";

export class HttpPoster {
  private readonly agent: Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(baseUrl: string, concurrency: number) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.agent = new Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  }

  /** Resolves with the status and the response text; rejects on a network error. */
  post(
    path: string,
    body: string,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          agent: this.agent,
          host: this.host,
          port: this.port,
          path,
          method: "POST",
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
            ...headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
          );
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
