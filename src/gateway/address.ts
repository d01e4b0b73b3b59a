/**
 * How the gateway is addressed, known from its own configuration and never from a request: the URL
 * it gives out (A2A cards), the Host names that are its own, and the browser origins allowed to
 * call it. A request's Host header is the caller's word, so it decides nothing here: a DNS
 * rebinding attack arrives with the attacker's host name in it, and a URL built from it can be
 * poisoned in a shared cache.
 *
 * - `publicUrl`: the configured public URL (`--public-url`, for a gateway behind a proxy), else the
 *   address it listens on; bound to a wildcard address (0.0.0.0, ::) without a public URL there is
 *   none, and a caller that must build a URL uses the request's Host without letting it be cached.
 * - Own hosts: bound to loopback, `localhost`, `127.0.0.1` and `[::1]` at its port; bound to one
 *   address, that address at its port; the public URL's host. `checksHost` is true when bound to
 *   loopback, where a browser on the same machine is the one a DNS rebinding attack uses: there a
 *   Host that is not its own is refused. On other binds clients may use names the gateway cannot
 *   know, so Host is not checked; Origin always is.
 * - Own origins: each own host with the gateway's scheme; plus the origins the operator allows.
 */
import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import { AcpError } from "../protocol/index.js";

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;
const WILDCARD = new Set(["0.0.0.0", "::", ""]);

export interface AddressOptions {
  host: string;
  tls: boolean;
  /** The gateway's URL as its clients see it (a proxy in front); default: the address it listens on. */
  publicUrl?: string;
  /** Browser origins, besides the gateway's own, allowed to call its browser-reachable endpoints (`/mcp`). */
  allowedOrigins?: readonly string[];
}

/** `https://acp.example.com/` → `https://acp.example.com` (a path prefix kept); throws naming the option. */
export function checkPublicUrl(value: string): string {
  const url = URL.canParse(value) ? new URL(value) : undefined;
  if (
    !url ||
    (url.protocol !== "https:" && url.protocol !== "http:") ||
    url.search ||
    url.hash ||
    url.username
  )
    throw new TypeError(`public URL ${JSON.stringify(value)} must be an http(s) URL without query or user`);
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

/** `https://app.example.com` exactly (no path); throws naming the value. */
export function checkOrigin(value: string): string {
  const url = URL.canParse(value) ? new URL(value) : undefined;
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || url.pathname !== "/" || url.search)
    throw new TypeError(`allowed origin ${JSON.stringify(value)} must be an origin: http(s)://host[:port]`);
  return url.origin;
}

export class GatewayAddress {
  readonly #host: string;
  readonly #scheme: "http" | "https";
  readonly #configured: string | undefined;
  readonly #allowedOrigins: Set<string>;
  #port: number | undefined;
  #ownHosts = new Set<string>();
  #ownOrigins = new Set<string>();

  constructor(options: AddressOptions) {
    this.#host = options.host.replace(/^\[|\]$/g, "").toLowerCase();
    this.#scheme = options.tls ? "https" : "http";
    this.#configured = options.publicUrl === undefined ? undefined : checkPublicUrl(options.publicUrl);
    this.#allowedOrigins = new Set((options.allowedOrigins ?? []).map(checkOrigin));
  }

  /** Called once the gateway listens (the port may have been 0). */
  bound(port: number): void {
    this.#port = port;
    const hosts = LOOPBACK.test(this.#host)
      ? ["localhost", "127.0.0.1", "[::1]", shown(this.#host)]
      : WILDCARD.has(this.#host)
        ? []
        : [shown(this.#host)];
    const defaultPort = port === (this.#scheme === "https" ? 443 : 80);
    // A Host header leaves out the scheme's default port.
    this.#ownHosts = new Set(
      hosts.flatMap((host) => (defaultPort ? [host, `${host}:${port}`] : [`${host}:${port}`])),
    );
    if (this.#configured) this.#ownHosts.add(new URL(this.#configured).host);
    this.#ownOrigins = new Set(
      [...this.#ownHosts].map((host) => new URL(`${this.#scheme}://${host}`).origin),
    );
    if (this.#configured) this.#ownOrigins.add(new URL(this.#configured).origin);
  }

  /** The URL the gateway gives out; undefined when bound to a wildcard address without a public URL. */
  get publicUrl(): string | undefined {
    if (this.#configured) return this.#configured;
    if (this.#port === undefined || WILDCARD.has(this.#host)) return undefined;
    return `${this.#scheme}://${shown(this.#host)}:${this.#port}`;
  }

  /** Bound to loopback: a Host that is not the gateway's own is refused on browser-reachable endpoints. */
  get checksHost(): boolean {
    return LOOPBACK.test(this.#host);
  }

  isOwnHost(host: string | undefined): boolean {
    return host !== undefined && this.#ownHosts.has(host.toLowerCase());
  }

  isAllowedOrigin(origin: string): boolean {
    if (!URL.canParse(origin)) return false;
    const normalised = new URL(origin).origin;
    return this.#ownOrigins.has(normalised) || this.#allowedOrigins.has(normalised);
  }
}

/**
 * For an endpoint a browser can reach (MCP's Streamable HTTP requires it, against DNS rebinding):
 * a request whose Origin is not allowed, or (bound to loopback) whose Host is not the gateway's
 * own, is refused with 403 -32011 naming the header, before any credential is looked at. A request
 * without Origin (any non-browser client) passes the Origin check.
 */
export function refuseForeignBrowser(address: GatewayAddress, req: IncomingMessage): void {
  const { origin, host } = req.headers;
  if (address.checksHost && !address.isOwnHost(host)) {
    throw new AcpError(
      "Forbidden",
      `Host ${JSON.stringify(host ?? "")} is not this gateway's (a DNS rebinding attempt?); use its own address`,
      { problems: [{ path: "/headers/host", message: "not one of the gateway's host names" }] },
    );
  }
  if (origin !== undefined && !address.isAllowedOrigin(origin)) {
    throw new AcpError(
      "Forbidden",
      `Origin ${JSON.stringify(origin)} is not allowed to call this endpoint (the operator allows browser origins with --allow-origin)`,
      { problems: [{ path: "/headers/origin", message: "not an allowed origin" }] },
    );
  }
}

function shown(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host;
}
