import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import pino, { type Logger } from "pino";
import { brokerToAcp } from "../broker/errors.js";
import { openBroker } from "../broker/open.js";
import { OutboundPolicy } from "../http/outbound.js";
import { createListener, Router, requestUrl, sendError, stopListening } from "../http/server.js";
import { describeNarrowed, ensurePrivateDir, type ModeNarrowed } from "../jsonl/private-files.js";
import { AcpError } from "../protocol/index.js";
import { PHOENIX_SOCKET_PATH, WS_PATH } from "../wire/api.js";
import { ProtocolVersions } from "../wire/versions.js";
import { GatewayAddress } from "./address.js";
import { configuredAdminToken, resolveAdminToken } from "./auth.js";
import type { GatewayContext } from "./context.js";
import { Credentials } from "./credentials.js";
import type { Gateway, GatewayOptions } from "./gateway-options.js";
import { HandshakeGate } from "./handshake-gate.js";
import { GatewayHealth } from "./health.js";
import { DEFAULT_SHUTDOWN_GRACE_MS, InFlightRequests } from "./in-flight.js";
import { Metrics } from "./metrics.js";
import { OpenedByKey } from "./opened-by-key.js";
import { PhoenixChannels } from "./phoenix.js";
import { PresenceTracker } from "./presence.js";
import { PrincipalStore } from "./principals.js";
import { brokerQuotasOf, resolveGatewayQuotas } from "./quotas.js";
import { FailedCredentialLimiter, RateLimiter } from "./rate-limit.js";
import { Registry } from "./registry.js";
import { Relay } from "./relay.js";
import { RelayAudit } from "./relay-audit.js";
import { agentRoutes } from "./routes/agents.js";
import { handshakeRoutes } from "./routes/handshakes.js";
import { messageRoutes } from "./routes/messages.js";
import { StorageFloor } from "./storage-floor.js";
import { DEFAULT_MAX_SUBMITS_IN_PROGRESS } from "./submit-intake.js";
import { WsHub } from "./ws.js";

/**
 * The data directory holds message bodies, audit logs and keys: 0700 whatever the umask (everything
 * the gateway writes in it is 0600 too). One an earlier version left open to others is narrowed.
 */
function preparePrivateDataDir(data: string, logger: Logger): void {
  let narrowed: ModeNarrowed | undefined;
  try {
    narrowed = ensurePrivateDir(data);
  } catch (err) {
    throw new Error(`cannot prepare the data directory ${data}: ${(err as Error).message}`);
  }
  if (narrowed) logger.warn({ path: narrowed.path, mode: narrowed.was }, describeNarrowed(narrowed));
}

/** The most deliveries the gateway hands one agent at a time (a socket's window is 1 to this). */
const AGENT_MAX_IN_FLIGHT = 256;

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/**
 * Starts the gateway core on the broker `options` choose (embedded SQLite in `options.data` by
 * default, or NATS JetStream), with the `extensions` given mounted in order. Resolves once it
 * listens. Refuses to start, before opening anything, on plain HTTP bound to a non-loopback host
 * without `insecure`, on a weak admin token, and on a protocol version table that breaks the
 * compatibility policy. The standard set of extensions: `startDefaultGateway` in `acp-kit/server`.
 */
export async function startGateway(options: GatewayOptions = {}): Promise<Gateway> {
  const host = options.host ?? "127.0.0.1";
  if (!LOOPBACK.test(host) && !options.tls && !options.insecure) {
    throw new Error(
      `refusing to serve plain HTTP on non-loopback address ${host}: give --tls-cert/--tls-key, or --insecure`,
    );
  }
  const adminToken = configuredAdminToken(options.adminToken);
  const logger =
    options.logger ??
    pino(
      {
        level: process.env.ACP_LOG_LEVEL ?? "info",
        redact: ["req.headers.authorization", "req.headers['x-api-key']", "req.headers['api-key']"],
      },
      pino.destination(2),
    );
  // Before anything is opened: a malformed range stops start-up with nothing to clean up.
  const outbound = new OutboundPolicy({ allowPrivate: options.allowPrivateUrls ?? false });
  const address = new GatewayAddress({
    host,
    tls: options.tls !== undefined,
    ...(options.publicUrl !== undefined && { publicUrl: options.publicUrl }),
    ...(options.allowedOrigins !== undefined && { allowedOrigins: options.allowedOrigins }),
  });
  const data = options.data ?? "./.acp";
  // A table that breaks the compatibility policy is refused before anything is opened.
  const versions = ProtocolVersions.of(options.protocolVersions);
  preparePrivateDataDir(data, logger);
  const extensions = options.extensions ?? [];
  const names = new Set<string>();
  for (const { name } of extensions) {
    if (names.has(name)) throw new TypeError(`two gateway extensions are named ${JSON.stringify(name)}`);
    names.add(name);
  }
  const quotas = resolveGatewayQuotas(options.quotas);
  const common = {
    ...(options.delivery ? { delivery: options.delivery } : {}),
    ...(options.retentionMs ? { retentionMs: options.retentionMs } : {}),
    quotas: brokerQuotasOf(quotas),
    // What the broker recovers from or does by itself (on NATS, a stream's max_age lowered after start).
    onWarning: (message: string) => logger.warn(message),
    onNotice: (message: string) => logger.info(message),
  };
  const broker = await openBroker(options.nats ? { nats: options.nats, ...common } : { data, ...common });
  const gatewayId = randomUUID();
  const admin = await resolveAdminToken(broker, adminToken);
  // Never promise more than the broker can store (NATS: the server's max_payload less header room).
  const maxEnvelopeBytes = Math.min(options.limits?.maxEnvelopeBytes ?? 1024 * 1024, broker.maxEnvelopeBytes);
  const heartbeatMs = options.heartbeatMs ?? 15_000;

  const metrics = new Metrics();
  const registry = new Registry(broker, versions);
  const gate = new HandshakeGate(broker);
  const principals = new PrincipalStore(broker);
  await Promise.all([registry.start(), gate.start(), principals.start()]);
  const presence = new PresenceTracker(broker, heartbeatMs);
  const storage = new StorageFloor(broker, quotas.storageFloorBytes, metrics, logger);
  await storage.start();
  const health = new GatewayHealth(broker, storage);
  const audit =
    options.audit === false
      ? undefined
      : new RelayAudit(
          join(data, "relay-audit"),
          (err, sender) => {
            metrics.count("acp_audit_errors_total");
            health.auditFailed(sender, err);
            logger.error({ err: (err as Error).message }, "relay audit append failed");
          },
          (sender) => health.auditAppended(sender),
        );
  const limiter = new RateLimiter(options.limits?.ratePerSecond ?? 2000, options.limits?.burst ?? 4000);
  const relay = new Relay(
    { broker, registry, gate, limiter, metrics, audit },
    {
      maxEnvelopeBytes,
      skewMs: options.skewMs ?? 5 * 60_000,
      brokerKind: broker.kind,
      handshakeBytes: quotas.handshakeBytes > 0 ? quotas.handshakeBytes : Number.POSITIVE_INFINITY,
      storage,
    },
  );
  const credentials = new Credentials(
    admin.hash,
    registry,
    principals,
    new FailedCredentialLimiter(options.limits?.failedCredentials),
    metrics,
  );
  const openedByKey = new OpenedByKey(registry);
  const ctx: GatewayContext = {
    broker,
    registry,
    relay,
    presence,
    metrics,
    logger,
    credentials,
    openedByKey,
    principals,
    maxEnvelopeBytes,
    startedAt: new Date(),
    gatewayId,
    outbound,
    address,
  };
  const hub = new WsHub(
    { broker, credentials, openedByKey, versions, relay, presence, metrics, logger },
    {
      heartbeatMs,
      maxInFlight: AGENT_MAX_IN_FLIGHT,
      maxEnvelopeBytes,
      authTimeoutMs: 10_000,
      gatewayId,
      maxSubmitsInProgress: options.maxSubmitsInProgress ?? DEFAULT_MAX_SUBMITS_IN_PROGRESS,
      socketBufferBytes: options.limits?.socketBufferBytes,
      outboundBufferBytes: options.limits?.outboundBufferBytes,
      maxUnauthenticatedSockets: options.limits?.maxUnauthenticatedSockets,
      maxSocketsPerAgent: options.limits?.maxSocketsPerAgent,
    },
  );

  const phoenix = new PhoenixChannels(
    hub,
    { credentials, metrics },
    {
      maxEnvelopeBytes,
      maxInFlight: AGENT_MAX_IN_FLIGHT,
    },
  );

  const inFlight = new InFlightRequests();
  const router = new Router();
  agentRoutes(router, ctx);
  handshakeRoutes(router, ctx, gate);
  messageRoutes(router, ctx);
  router.add("GET", "/healthz", (_req, res) => health.respond(res));
  router.add("GET", "/metrics", (_req, res) => {
    metrics.gauge("acp_ws_connections", hub.connectionCount);
    metrics.gauge("acp_http_requests_in_progress", inFlight.size);
    metrics.gauge("acp_phoenix_connections", phoenix.connectionCount);
    metrics.gauge("acp_ws_outbound_buffered_bytes", hub.outbound.bytes);
    metrics.gauge("acp_ws_unauthenticated", hub.unauthenticated.count);
    metrics.gauge("acp_auth_cache_entries", principals.cachedTokens, { cache: "principal-tokens" });
    metrics.gauge("acp_process_resident_memory_bytes", process.memoryUsage().rss);
    const text = metrics.render();
    res.writeHead(200, {
      "content-type": "text/plain; version=0.0.4; charset=utf-8",
      "content-length": Buffer.byteLength(text),
    });
    res.end(text);
  });
  const mounted = extensions.map((extension) => extension.mount(ctx, router));

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const done = inFlight.begin(req);
    const started = performance.now();
    try {
      // Inside the try: a malformed target or percent-escape is a 400, not an unhandled rejection.
      await router.dispatch(req, res);
    } catch (err) {
      if (!(err instanceof AcpError))
        logger.error({ err: (err as Error).message, path: req.url?.split("?")[0] }, "request failed");
      if (!res.headersSent) sendError(res, brokerToAcp(err));
      else res.destroy();
    } finally {
      metrics.observe("acp_http_request_duration_ms", performance.now() - started, {
        method: req.method ?? "",
      });
      done();
    }
  };

  const server = createListener(options.tls, (req, res) => void handle(req, res));
  server.on("upgrade", (req, socket, head) => {
    let path: string | undefined;
    try {
      path = requestUrl(req).pathname;
    } catch {
      // A malformed target: drop the connection (a throw here would end the process).
    }
    if (path === WS_PATH) hub.handleUpgrade(req, socket, head);
    else if (path === PHOENIX_SOCKET_PATH) phoenix.handleUpgrade(req, socket, head);
    else if (path === undefined || !mounted.some((e) => e.upgrade?.(req, socket, head, path)))
      socket.destroy();
  });
  /** What `close` releases after the server stopped, also on a failed start-up. */
  const release = async () => {
    phoenix.close();
    await hub.close();
    await relay.close();
    for (const extension of mounted) await extension.close?.();
    registry.stop();
    presence.close();
    gate.stop();
    principals.stop();
    storage.stop();
    await audit?.close();
    await broker.close();
    outbound.close();
  };
  try {
    for (const extension of mounted) await extension.start?.();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 8080, host, () => resolve());
    });
  } catch (err) {
    await release().catch(() => undefined);
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  address.bound(port);
  const scheme = options.tls ? "https" : "http";
  const shownHost = host.includes(":") ? `[${host}]` : host;
  const url = `${scheme}://${shownHost}:${port}`;
  logger.info({ url, broker: broker.kind }, "gateway listening");
  if (!LOOPBACK.test(host) && !options.tls) {
    logger.warn(
      { url },
      "serving plain HTTP on a non-loopback address (--insecure): API keys, tokens and messages cross the network unencrypted; put TLS in front or give --tls-cert/--tls-key",
    );
  }
  if (address.publicUrl === undefined) {
    logger.warn(
      { url },
      "listening on every address without a public URL: the URLs the gateway gives out (A2A agent cards) follow each request's Host and are not cached; give --public-url",
    );
  }

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      // Stop accepting, let in-flight requests finish, then close agents' sockets and flush the store.
      void stopListening(server);
      server.closeIdleConnections();
      for (const extension of mounted) extension.beforeDrain?.();
      const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
      const cut = await inFlight.drain(graceMs);
      if (cut.length > 0)
        logger.warn(
          { requests: cut.slice(0, 20), count: cut.length, graceMs },
          "closing with requests still in progress; they are cut off",
        );
      await release();
      server.closeAllConnections();
      logger.info("gateway stopped");
    })();
    return closing;
  };

  return {
    url,
    wsUrl: `${scheme === "https" ? "wss" : "ws"}://${shownHost}:${port}${WS_PATH}`,
    adminToken: admin.token,
    adminTokenCreated: admin.created,
    broker,
    context: ctx,
    close,
  };
}
