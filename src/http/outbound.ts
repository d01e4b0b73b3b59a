/**
 * The one policy for every URL someone else supplies that the gateway then calls: A2A push
 * notification URLs (both the 1.0 and the 0.3 shapes), A2A agent cards, their JSON-RPC endpoints
 * and key sets, summary webhooks. Without it, whoever supplies the URL makes the gateway send
 * requests inside its own network (a blind POST to a loopback admin port, the cloud metadata
 * service at 169.254.169.254).
 *
 * - A URL is http(s), without user:password.
 * - Its host name is resolved, and every address it resolves to must be public (addresses.ts):
 *   loopback, private, link-local, shared (CGNAT), benchmarking, unique-local, unspecified,
 *   multicast, reserved and broadcast addresses are refused, and so is an IPv6 address carrying
 *   one of them (mapped, NAT64, 6to4). An operator allows private addresses explicitly
 *   (`allowPrivate: true`: loopback, private, shared, benchmarking and unique-local; or a list of
 *   ranges, which can also name link-local ones).
 * - The connection goes to the address that was checked: the check is the socket's own name
 *   resolution (`lookup`), so a name cannot resolve to a public address for the check and to an
 *   internal one for the connection (DNS rebinding).
 * - A redirect is never followed: the call fails naming where it pointed (so the one who gave
 *   the URL can give that one instead, which is then checked like any other).
 * - An answer is read up to `maxResponseBytes`: past it the connection is closed, not buffered
 *   (one that declares more is refused before its body is read).
 */
import { lookup as dnsLookup } from "node:dns/promises";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { rootCertificates } from "node:tls";
import { isIP, type LookupFunction } from "node:net";
import { Readable, Transform } from "node:stream";
import { type AddressKind, AddressRanges, addressKind, KIND_NAMES } from "./addresses.js";

/** What `allowPrivate: true` allows. Link-local (where clouds serve instance metadata) only by a range. */
const PRIVATE_KINDS: ReadonlySet<AddressKind> = new Set([
  "loopback",
  "private",
  "shared",
  "benchmarking",
  "unique-local",
]);
/** Never a destination, whatever is allowed. */
const NEVER: ReadonlySet<AddressKind> = new Set(["unspecified", "multicast"]);

export interface OutboundPolicyOptions {
  /** Private addresses the gateway may call: `true` (see PRIVATE_KINDS) or ranges (`10.1.0.0/16`). Default none. */
  allowPrivate?: boolean | readonly string[];
  /** Resolves a host name to its addresses (default: the system resolver). For tests. */
  resolve?: (hostname: string) => Promise<readonly string[]>;
}

export interface OutboundRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** Largest answer body read; past it the body's stream fails with OutboundResponseTooLarge. */
  maxResponseBytes?: number;
  /**
   * Certificate authorities (PEM) trusted for this https call besides the system's: a partner
   * organization's CA given by configuration (federation peers). Pass the same array every time:
   * its connections are kept alive per array.
   */
  ca?: readonly string[];
}

/** A URL the policy refuses; `message` names the URL without its query, never the address it resolved to. */
export class OutboundUrlRefused extends Error {
  override readonly name = "OutboundUrlRefused";
  constructor(
    readonly url: string,
    readonly reason: string,
    /** The refused address, for the gateway's own log (not for the caller who supplied the URL). */
    readonly address?: string,
  ) {
    super(`${url}: ${reason}`);
  }
}

export class OutboundResponseTooLarge extends Error {
  override readonly name = "OutboundResponseTooLarge";
  constructor(
    readonly url: string,
    readonly limit: number,
  ) {
    super(`${url}: the answer exceeds ${limit} bytes`);
  }
}

/** A URL as logs and messages show it: no user:password, no query, no fragment (either may hold a secret). */
export function displayUrl(url: string | URL): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return "(not a URL)";
  }
}

export class OutboundPolicy {
  readonly #allowAll: boolean;
  readonly #ranges: AddressRanges;
  readonly #resolve: (hostname: string) => Promise<readonly string[]>;
  readonly #agents = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };
  readonly #caAgents = new Map<readonly string[], HttpsAgent>();

  constructor(options: OutboundPolicyOptions = {}) {
    const allow = options.allowPrivate ?? false;
    this.#allowAll = allow === true;
    this.#ranges = new AddressRanges(Array.isArray(allow) ? allow : []);
    this.#resolve =
      options.resolve ??
      (async (hostname) =>
        (await dnsLookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address));
  }

  /** Parses `url` and checks what can be checked without the network; throws OutboundUrlRefused. */
  parse(url: string | URL): URL {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new OutboundUrlRefused(String(url).slice(0, 200), "not an absolute URL");
    }
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:")
      throw new OutboundUrlRefused(displayUrl(parsed), `${parsed.protocol} is not http(s)`);
    if (parsed.username !== "" || parsed.password !== "")
      throw new OutboundUrlRefused(displayUrl(parsed), "a URL must not carry a user name or password");
    const literal = literalOf(parsed);
    if (literal !== undefined) this.#vet(parsed, literal);
    return parsed;
  }

  /** Parses `url`, resolves its host and checks every address, as a call would: for refusing a URL when it is given. */
  async check(url: string | URL): Promise<URL> {
    const parsed = this.parse(url);
    if (literalOf(parsed) === undefined) await this.#addressesOf(parsed);
    return parsed;
  }

  /** A fetch that keeps to the policy (see the file's comment); the answer's body streams. */
  async fetch(url: string | URL, request: OutboundRequest = {}): Promise<Response> {
    const target = this.parse(url);
    const method = request.method ?? "GET";
    const answer = await this.#send(target, method, request);
    const status = answer.statusCode ?? 0;
    if (status >= 300 && status < 400 && answer.headers.location !== undefined) {
      answer.destroy();
      const { location: to } = answer.headers;
      const location = URL.canParse(to, target.href)
        ? displayUrl(new URL(to, target))
        : "something that is not a URL";
      throw new OutboundUrlRefused(
        displayUrl(target),
        `answered ${status}, a redirect to ${location}, which the gateway does not follow`,
      );
    }
    return responseOf(answer, method, target, request.maxResponseBytes);
  }

  /** Ends the kept-alive connections (the gateway is closing). */
  close(): void {
    this.#agents.http.destroy();
    this.#agents.https.destroy();
    for (const agent of this.#caAgents.values()) agent.destroy();
    this.#caAgents.clear();
  }

  #send(url: URL, method: string, request: OutboundRequest): Promise<IncomingMessage> {
    const https = url.protocol === "https:";
    const send = https ? httpsRequest : httpRequest;
    const { body, signal } = request;
    const headers = request.headers ?? {};
    return new Promise((resolve, reject) => {
      const req = send(url, {
        method,
        headers:
          body === undefined ? headers : { ...headers, "content-length": String(Buffer.byteLength(body)) },
        agent: https ? this.#httpsAgent(request.ca) : this.#agents.http,
        ...(literalOf(url) === undefined && { lookup: this.#lookupFor(url) }),
        ...(signal && { signal }),
      });
      req.once("response", resolve);
      req.once("error", (err) => reject(signal?.aborted ? signal.reason : err));
      req.end(body);
    });
  }

  /** The kept-alive agent for https calls trusting `ca` too (one per CA list given). */
  #httpsAgent(ca: readonly string[] | undefined): HttpsAgent {
    if (ca === undefined) return this.#agents.https;
    let agent = this.#caAgents.get(ca);
    if (!agent) {
      // Node's TLS uses `ca` instead of its bundled roots: give both, so adding one trusts more, never less.
      agent = new HttpsAgent({ keepAlive: true, ca: [...rootCertificates, ...ca] });
      this.#caAgents.set(ca, agent);
    }
    return agent;
  }

  /** The socket's name resolution: only addresses the policy allows, or the connection fails. */
  #lookupFor(url: URL): LookupFunction {
    return (_hostname, options, callback) => {
      this.#addressesOf(url).then(
        (all) => {
          const family = options.family === 4 || options.family === 6 ? options.family : undefined;
          const addresses = family ? all.filter((a) => isIP(a) === family) : all;
          const first = addresses[0];
          if (first === undefined) {
            const none = Object.assign(new Error(`${url.hostname} has no IPv${family} address`), {
              code: "ENOTFOUND",
            });
            callback(none, "", 4);
          } else if (options.all) {
            callback(
              null,
              addresses.map((address) => ({ address, family: isIP(address) })),
            );
          } else callback(null, first, isIP(first));
        },
        (err: NodeJS.ErrnoException) => callback(err, "", 4),
      );
    };
  }

  async #addressesOf(url: URL): Promise<readonly string[]> {
    const addresses = await this.#resolve(url.hostname);
    for (const address of addresses) this.#vet(url, address);
    return addresses;
  }

  #vet(url: URL, address: string): void {
    const kind = addressKind(address);
    if (kind === "public" || (!NEVER.has(kind) && this.#allowed(kind, address))) return;
    const named = literalOf(url) === undefined ? `resolves to ${KIND_NAMES[kind]}` : `is ${KIND_NAMES[kind]}`;
    const remedy = NEVER.has(kind) ? "" : " (an operator allows private addresses with --allow-private-urls)";
    throw new OutboundUrlRefused(
      displayUrl(url),
      `${named}, which the gateway does not call${remedy}`,
      address,
    );
  }

  #allowed(kind: AddressKind, address: string): boolean {
    return (this.#allowAll && PRIVATE_KINDS.has(kind)) || this.#ranges.has(address);
  }
}

/** The host of `url` if it is an IP literal (`[::1]` → `::1`), else undefined. */
function literalOf(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  return isIP(host) === 0 ? undefined : host;
}

/**
 * A web Response over the answer, its body cut off (the connection closed) past `limit` bytes; an
 * answer that declares more than `limit` bytes is refused at once.
 */
function responseOf(answer: IncomingMessage, method: string, url: URL, limit: number | undefined): Response {
  const headers = new Headers();
  for (let i = 0; i + 1 < answer.rawHeaders.length; i += 2)
    headers.append(answer.rawHeaders[i] as string, answer.rawHeaders[i + 1] as string);
  const status = answer.statusCode ?? 0;
  const init = { status, statusText: answer.statusMessage ?? "", headers };
  if (method === "HEAD" || [101, 204, 205, 304].includes(status)) {
    answer.destroy();
    return new Response(null, init);
  }
  if (limit === undefined) return new Response(Readable.toWeb(answer) as ReadableStream<Uint8Array>, init);
  const declared = Number(answer.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    answer.destroy();
    throw new OutboundResponseTooLarge(displayUrl(url), limit);
  }
  let received = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      if (received <= limit) return done(null, chunk);
      answer.destroy();
      done(new OutboundResponseTooLarge(displayUrl(url), limit));
    },
  });
  answer.once("error", (err) => counted.destroy(err));
  return new Response(Readable.toWeb(answer.pipe(counted)) as ReadableStream<Uint8Array>, init);
}
