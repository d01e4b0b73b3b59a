/**
 * `acp gateway`'s federation flags (docs/federation.md) read into the gateway's `federation` options.
 */
import { FederationDomain } from "../../protocol/address.js";
import { CliError } from "../io.js";
import { wholeNumber } from "../option-parsers.js";
import type { GatewayCliOptions } from "./gateway.js";

/** A whole-number flag given as text (its default too), by the CLI's one rule; undefined when absent. */
export function positiveInt(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  try {
    return wholeNumber()(value);
  } catch (err) {
    throw new CliError(`${flag} ${(err as Error).message}, got ${JSON.stringify(value)}`);
  }
}

/** The federation options (docs/federation.md) when `--federation-domain` is given; TLS is required. */
export function federationFrom(options: GatewayCliOptions): { federation?: FederationCliOptions } {
  if (options.federationDomain === undefined) return {};
  if (!FederationDomain.safeParse(options.federationDomain).success) {
    throw new CliError(
      `--federation-domain: ${JSON.stringify(options.federationDomain)} is not a lowercase DNS name such as b.example`,
    );
  }
  const cert = options.federationTlsCert ?? options.tlsCert;
  const key = options.federationTlsKey ?? options.tlsKey;
  if (!cert || !key) {
    throw new CliError(
      "federation requires TLS: give --federation-tls-cert and --federation-tls-key (or --tls-cert and --tls-key)",
    );
  }
  return {
    federation: {
      domain: options.federationDomain,
      listen: {
        host: options.federationHost ?? "127.0.0.1",
        port: positiveInt(options.federationPort, "--federation-port") ?? 8448,
      },
      tls: { cert, key },
      ...(options.federationCa.length > 0 && { ca: options.federationCa }),
      ...(options.federationOpen && { open: true }),
      ...(options.federationResolve.length > 0 && { resolve: resolveFrom(options.federationResolve) }),
      ...(options.federationPublicUrl && { publicUrl: options.federationPublicUrl }),
      peerQueue: {
        ...optional(
          "messages",
          positiveInt(options.federationPeerQueueMessages, "--federation-peer-queue-messages"),
        ),
        ...optional("bytes", positiveInt(options.federationPeerQueueBytes, "--federation-peer-queue-bytes")),
      },
      peerInbound: {
        ...optional(
          "messages",
          positiveInt(options.federationPeerInboundMessages, "--federation-peer-inbound-messages"),
        ),
        ...optional(
          "bytes",
          positiveInt(options.federationPeerInboundBytes, "--federation-peer-inbound-bytes"),
        ),
      },
    },
  };
}

/** `--federation-resolve DOMAIN=URL` flags as a map; the URLs are checked when the gateway starts. */
function resolveFrom(flags: string[]): Record<string, string> {
  const resolve: Record<string, string> = {};
  for (const flag of flags) {
    const at = flag.indexOf("=");
    const domain = flag.slice(0, at);
    if (at < 1 || !FederationDomain.safeParse(domain).success) {
      throw new CliError(
        `--federation-resolve: ${JSON.stringify(flag)} is not DOMAIN=URL (e.g. b.example=https://gw.b.example:8448)`,
      );
    }
    resolve[domain] = flag.slice(at + 1);
  }
  return resolve;
}

/** `{ [key]: value }`, or nothing when the value is absent. */
function optional<K extends string>(key: K, value: number | undefined): { [P in K]?: number } {
  return value === undefined ? {} : ({ [key]: value } as { [P in K]?: number });
}

interface FederationCliOptions {
  domain: string;
  listen: { host: string; port: number };
  tls: { cert: string; key: string };
  ca?: string[];
  open?: true;
  resolve?: Record<string, string>;
  publicUrl?: string;
  peerQueue: { messages?: number; bytes?: number };
  peerInbound: { messages?: number; bytes?: number };
}
