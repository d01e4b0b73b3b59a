/**
 * The federation listener: its own HTTPS port (default 8448), apart from the agents' API, serving
 * only what peers use (`/.well-known/acp` and `/federation/v1/*`). TLS is required; plain HTTP
 * only on a loopback address in test mode (`insecureLoopback`).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { createListener, type Router, sendError, stopListening } from "../../http/server.js";
import { AcpError } from "../../protocol/index.js";

export interface ListenOptions {
  host: string;
  port: number;
  tls?: { cert: string; key: string };
  insecureLoopback: boolean;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

export interface FederationListener {
  /** `https://host:port` as bound. */
  url: string;
  close(): Promise<void>;
}

export async function listen(
  options: ListenOptions,
  router: Router,
  logger: Logger,
): Promise<FederationListener> {
  if (!options.tls && !(options.insecureLoopback && LOOPBACK.test(options.host))) {
    throw new Error(
      "federation requires TLS: give the federation listener a certificate (--federation-tls-cert/--federation-tls-key, or --tls-cert/--tls-key)",
    );
  }
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    try {
      await router.dispatch(req, res);
    } catch (err) {
      if (!(err instanceof AcpError))
        logger.error(
          { err: (err as Error).message, path: req.url?.split("?")[0] },
          "federation request failed",
        );
      if (!res.headersSent) sendError(res, err);
      else res.destroy();
    }
  };
  const server = createListener(options.tls, (req, res) => void handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  const url = `${options.tls ? "https" : "http"}://${host}:${port}`;
  logger.info({ url }, "federation listening");
  return {
    url,
    close: () => {
      const closed = stopListening(server);
      server.closeAllConnections();
      return closed;
    },
  };
}
