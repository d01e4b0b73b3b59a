import type { Command } from "commander";
import type { NatsConnectionOptions } from "../../broker/index.js";
import { readFileSync } from "node:fs";
import { checkOrigin, checkPublicUrl } from "../../gateway/address.js";
import { AddressRanges } from "../../http/addresses.js";
import { CliError, printLine } from "../io.js";
import { federationFrom, positiveInt } from "./gateway-federation.js";

export interface GatewayCliOptions {
  data?: string;
  nats?: string;
  natsUser?: string;
  natsPass?: string;
  natsPassFile?: string;
  natsToken?: string;
  natsTokenFile?: string;
  natsCreds?: string;
  natsTls?: boolean;
  natsReplicas?: string;
  port: string;
  host: string;
  tlsCert?: string;
  tlsKey?: string;
  insecure?: boolean;
  allowPrivateUrls?: string | boolean;
  publicUrl?: string;
  allowOrigin: string[];
  maxEnvelope?: string;
  rateLimit?: string;
  maxUnauthenticatedSockets?: string;
  quotaRecipientMessages?: string;
  quotaRecipientBytes?: string;
  quotaSenderBytes?: string;
  quotaHandshakeBytes?: string;
  storageFloor?: string;
  audit: boolean;
  summaryWebhook: string[];
  a2aWellKnown?: string;
  federationDomain?: string;
  federationHost?: string;
  federationPort?: string;
  federationTlsCert?: string;
  federationTlsKey?: string;
  federationCa: string[];
  federationOpen?: boolean;
  federationPublicUrl?: string;
  federationPeerQueueMessages?: string;
  federationPeerQueueBytes?: string;
  federationPeerInboundMessages?: string;
  federationPeerInboundBytes?: string;
  federationResolve: string[];
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** The quota flags given (0 turns one off); the gateway fills in the defaults. */
function quotasFrom(options: GatewayCliOptions): Record<string, number> {
  const flags = {
    recipientPendingMessages: [options.quotaRecipientMessages, "--quota-recipient-messages"],
    recipientPendingBytes: [options.quotaRecipientBytes, "--quota-recipient-bytes"],
    senderStoredBytes: [options.quotaSenderBytes, "--quota-sender-bytes"],
    handshakeBytes: [options.quotaHandshakeBytes, "--quota-handshake-bytes"],
    storageFloorBytes: [options.storageFloor, "--storage-floor"],
  } as const;
  const quotas: Record<string, number> = {};
  for (const [name, [value, flag]] of Object.entries(flags)) {
    const parsed = positiveInt(value, flag);
    if (parsed !== undefined) quotas[name] = parsed;
  }
  return quotas;
}

/**
 * A NATS secret from its flag, its file flag or its environment variable, in that order. The flag
 * puts it in the process list (`ps`) for every local user to read: the file or the variable do not.
 */
function natsSecret(
  flag: string | undefined,
  file: string | undefined,
  env: string,
  name: string,
): string | undefined {
  if (flag !== undefined && file !== undefined)
    throw new CliError(`give --${name} or --${name}-file, not both`);
  if (file === undefined) return flag ?? (process.env[env] || undefined);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new CliError(`--${name}-file: cannot read ${file} (${why})`);
  }
  const secret = text.replace(/\r?\n$/, "");
  if (secret === "") throw new CliError(`--${name}-file: ${file} is empty`);
  return secret;
}

export function natsOptionsFrom(options: GatewayCliOptions): NatsConnectionOptions | undefined {
  if (!options.nats) return undefined;
  const replicas = positiveInt(options.natsReplicas, "--nats-replicas");
  const pass = natsSecret(options.natsPass, options.natsPassFile, "ACP_NATS_PASS", "nats-pass");
  const token = natsSecret(options.natsToken, options.natsTokenFile, "ACP_NATS_TOKEN", "nats-token");
  return {
    servers: options.nats.split(","),
    ...(options.natsUser ? { user: options.natsUser } : {}),
    ...(pass ? { pass } : {}),
    ...(token ? { token } : {}),
    ...(options.natsCreds ? { credsFile: options.natsCreds } : {}),
    ...(options.natsTls ? { tls: true } : {}),
    ...(replicas ? { replicas } : {}),
    name: "acp-gateway",
  };
}

/**
 * `--allow-private-urls` (or ACP_ALLOW_PRIVATE_URLS): alone, `true`, `1` or `all` allow every
 * private address; else a comma-separated list of ranges.
 */
export function allowPrivateUrlsFrom(value: string | boolean | undefined): boolean | string[] {
  if (value === undefined || value === false) return false;
  if (value === true || ["", "true", "1", "all"].includes(value.trim().toLowerCase())) return true;
  const ranges = value.split(",").map((range) => range.trim());
  try {
    new AddressRanges(ranges);
  } catch (err) {
    throw new CliError(`--allow-private-urls: ${(err as Error).message}`);
  }
  return ranges;
}

function publicUrlFrom(value: string | undefined): { publicUrl?: string } {
  if (value === undefined || value === "") return {};
  try {
    return { publicUrl: checkPublicUrl(value) };
  } catch (err) {
    throw new CliError(`--public-url: ${(err as Error).message}`);
  }
}

function allowedOriginsFrom(values: string[]): string[] {
  try {
    return values.map(checkOrigin);
  } catch (err) {
    throw new CliError(`--allow-origin: ${(err as Error).message}`);
  }
}

export function registerGateway(program: Command): void {
  program
    .command("gateway")
    .description(
      "run the ACP gateway: REST + WebSocket relay of signed messages (embedded SQLite by default, or NATS)",
    )
    .option("--data <dir>", "data directory: the embedded broker's database, and the audit logs", "./.acp")
    .option(
      "--nats <urls>",
      "use NATS JetStream instead (comma-separated server URLs, e.g. nats://127.0.0.1:4222)",
    )
    .option("--nats-user <user>")
    .option(
      "--nats-pass <pass>",
      "NATS password (shown in the process list: prefer --nats-pass-file or ACP_NATS_PASS)",
    )
    .option("--nats-pass-file <file>", "read the NATS password from this file")
    .option(
      "--nats-token <token>",
      "NATS token (shown in the process list: prefer --nats-token-file or ACP_NATS_TOKEN)",
    )
    .option("--nats-token-file <file>", "read the NATS token from this file")
    .option("--nats-creds <file>", "NATS credentials file")
    .option("--nats-tls", "require TLS to NATS")
    .option("--nats-replicas <n>", "JetStream stream/KV replicas (3 on a 3-node cluster)")
    .option("--port <port>", "port to listen on", "8080")
    .option("--host <host>", "address to bind", "127.0.0.1")
    .option("--tls-cert <file>", "TLS certificate (PEM)")
    .option("--tls-key <file>", "TLS private key (PEM)")
    .option("--insecure", "allow plain HTTP on a non-loopback address")
    .option(
      "--public-url <url>",
      "the gateway's URL as clients see it (behind a proxy), for the URLs it gives out (A2A agent cards); also ACP_PUBLIC_URL",
    )
    .option(
      "--allow-origin <origin>",
      "a browser origin, besides the gateway's own, allowed to call /mcp (repeatable)",
      collect,
      [],
    )
    .option(
      "--allow-private-urls [ranges]",
      "let URLs others supply (A2A push notifications, A2A agent cards, webhooks) reach private addresses: all loopback, private, CGNAT and unique-local ones, or only these comma-separated ranges (e.g. 127.0.0.1,10.1.0.0/16); also ACP_ALLOW_PRIVATE_URLS",
    )
    .option("--max-envelope <bytes>", "largest accepted envelope", "1048576")
    .option("--rate-limit <perSecond>", "messages per second per agent", "2000")
    .option(
      "--max-unauthenticated-sockets <n>",
      "WebSocket connections still authenticating, gateway-wide; more get 503 (default 1024)",
    )
    .option(
      "--quota-recipient-messages <n>",
      "messages waiting for one recipient, at most (default 100000; 0: no limit)",
    )
    .option(
      "--quota-recipient-bytes <bytes>",
      "bytes waiting for one recipient, at most (default 1073741824; 0: no limit)",
    )
    .option(
      "--quota-sender-bytes <bytes>",
      "bytes one sender may have stored within retention (default 10737418240; 0: no limit)",
    )
    .option(
      "--quota-handshake-bytes <bytes>",
      "largest announce/capabilities from an agent without a completed handshake (default 65536; 0: no limit)",
    )
    .option(
      "--storage-floor <bytes>",
      "free storage below which new messages are refused (default 536870912; 0: none)",
    )
    .option(
      "--a2a-well-known <agent-id>",
      "also serve this A2A-published agent's card at /.well-known/agent-card.json, where A2A clients given only the gateway's address look",
    )
    .option(
      "--federation-domain <domain>",
      "federate with other organizations' gateways under this domain (off without it; docs/federation.md)",
    )
    .option("--federation-host <host>", "address the federation listener binds", "127.0.0.1")
    .option("--federation-port <port>", "port of the federation listener", "8448")
    .option("--federation-tls-cert <file>", "the federation listener's TLS certificate (default --tls-cert)")
    .option("--federation-tls-key <file>", "its TLS private key (default --tls-key)")
    .option("--federation-ca <file>", "trust this CA for peers' certificates too (repeatable)", collect, [])
    .option(
      "--federation-peer-queue-messages <n>",
      "messages one peer's outbound queue may hold here (default 100000)",
    )
    .option(
      "--federation-peer-queue-bytes <bytes>",
      "bytes one peer's outbound queue may hold here (default 1 GiB)",
    )
    .option(
      "--federation-peer-inbound-messages <n>",
      "messages one peer's agents may have waiting here (default 100000)",
    )
    .option(
      "--federation-peer-inbound-bytes <bytes>",
      "bytes one peer's agents may have waiting here (default 1 GiB)",
    )
    .option(
      "--federation-open",
      "admit any domain whose /.well-known/acp verifies (default: peers an admin added)",
    )
    .option(
      "--federation-resolve <domain=url>",
      "where DOMAIN's gateway is (its /.well-known/acp), for a peer added without --url and a first contact under --federation-open (repeatable; default https://DOMAIN)",
      collect,
      [],
    )
    .option(
      "--federation-public-url <url>",
      "the federation listener's URL as peers reach it (behind a proxy)",
    )
    .option("--no-audit", "do not keep the relay audit log")
    .option(
      "--summary-webhook <url>",
      "post every relayed message's summary to a Slack- or Discord-compatible incoming webhook (repeatable; a slack: or discord: prefix picks the format)",
      collect,
      [],
    )
    .action(async (options: GatewayCliOptions) => {
      if (Boolean(options.tlsCert) !== Boolean(options.tlsKey))
        throw new CliError("--tls-cert and --tls-key go together");
      if (options.a2aWellKnown !== undefined) {
        const { AgentId } = await import("../../protocol/index.js");
        if (!AgentId.safeParse(options.a2aWellKnown).success)
          throw new CliError(
            `--a2a-well-known: ${JSON.stringify(options.a2aWellKnown)} is not a valid agent id`,
          );
      }
      const nats = natsOptionsFrom(options);
      const rate = positiveInt(options.rateLimit, "--rate-limit") ?? 2000;
      // Loaded on use: the gateway pulls in both brokers, MCP and the dashboard, which no other
      // command needs at start-up.
      const { parseWebhookTarget, startDefaultGateway } = await import("../../server.js");
      const webhooks = options.summaryWebhook.map((spec) => {
        try {
          return parseWebhookTarget(spec);
        } catch (err) {
          throw new CliError(`--summary-webhook: ${(err as Error).message}`);
        }
      });
      const gateway = await startDefaultGateway({
        host: options.host,
        port: positiveInt(options.port, "--port") ?? 8080,
        // With NATS the data directory still holds this gateway's own files (its audit logs).
        data: options.data ?? "./.acp",
        ...(nats ? { nats } : {}),
        ...(options.tlsCert && options.tlsKey ? { tls: { cert: options.tlsCert, key: options.tlsKey } } : {}),
        insecure: options.insecure ?? false,
        allowPrivateUrls: allowPrivateUrlsFrom(
          options.allowPrivateUrls ?? process.env.ACP_ALLOW_PRIVATE_URLS,
        ),
        ...publicUrlFrom(options.publicUrl ?? process.env.ACP_PUBLIC_URL),
        ...(options.allowOrigin.length > 0 && { allowedOrigins: allowedOriginsFrom(options.allowOrigin) }),
        limits: {
          maxEnvelopeBytes: positiveInt(options.maxEnvelope, "--max-envelope") ?? 1048576,
          ratePerSecond: rate,
          burst: rate * 2,
          maxUnauthenticatedSockets: positiveInt(
            options.maxUnauthenticatedSockets,
            "--max-unauthenticated-sockets",
          ),
        },
        quotas: quotasFrom(options),
        audit: options.audit,
        summaryWebhooks: options.summaryWebhook,
        ...(options.a2aWellKnown !== undefined && { a2aWellKnownAgent: options.a2aWellKnown }),
        ...federationFrom(options),
      }).catch((err: Error) => {
        throw new CliError(err.message);
      });
      printLine(`ACP gateway on ${gateway.url} (${gateway.broker.kind} broker, data in ${options.data})`);
      if (options.federationDomain) {
        printLine(`federating as ${options.federationDomain} (peers: acp federation add DOMAIN --url URL)`);
      }
      printLine(
        `dashboard: ${gateway.url}/ (sign in with a principal token from \`acp principal add\`, or the admin token)`,
      );
      if (webhooks.length > 0) {
        printLine(`summaries posted to ${webhooks.map((w) => w.label).join(", ")}`);
      }
      if (gateway.adminTokenCreated) {
        printLine(`admin token (shown once; register agents with it): ${gateway.adminToken}`);
      }
      await new Promise<void>((resolve) => {
        const stop = () => {
          printLine("shutting down…");
          void gateway.close().then(resolve);
        };
        process.once("SIGTERM", stop);
        process.once("SIGINT", stop);
      });
    });
}
