/**
 * Calls to other gateways: their `/.well-known/acp`, and signed requests to their federation
 * endpoint. Every URL goes through the outbound URL policy (`ctx.outbound`): its addresses are
 * checked when it is called, redirects are not followed, answers are read up to a limit. TLS is
 * required (with the system CAs and those configured), except `http` to a loopback address when the
 * gateway runs in test mode (`insecureLoopback`).
 */
import { createHash } from "node:crypto";
import type { z } from "zod";
import { type OutboundPolicy, OutboundUrlRefused } from "../../http/outbound.js";
import { AcpError, type ErrorObject } from "../../protocol/index.js";
import { FederationDocument, type GatewayKey, PeerHeader, WELL_KNOWN_PATH } from "../../wire/federation.js";
import { type GatewaySigner, gatewayKid, verifyGatewaySignature } from "./gateway-key.js";

/** Largest answer read from a peer: a document, a directory record, a batch's results. */
const MAX_ANSWER_BYTES = 1024 * 1024;
const LOOPBACK_HOST = /^(127\.\d+\.\d+\.\d+|\[::1\]|localhost)$/;

/** A call to a peer that did not get an answer, or got a refusal of the whole request. */
export class PeerCallError extends Error {
  override readonly name = "PeerCallError";
  constructor(
    message: string,
    /** The HTTP status of a refusal; undefined when the peer was not reached. */
    readonly status?: number,
    readonly error?: ErrorObject,
  ) {
    super(message);
  }
}

export interface PeerClientOptions {
  signer: GatewaySigner;
  /** This gateway's domain: the origin of its requests. */
  domain: string;
  outbound: OutboundPolicy;
  /** CAs trusted besides the system's (the same array on every call: connections are kept per array). */
  ca: readonly string[] | undefined;
  insecureLoopback: boolean;
  timeoutMs: number;
}

/** The body of the signature of a request between gateways (docs/federation.md, "Transport"). */
export function requestSignatureInput(
  method: string,
  path: string,
  origin: string,
  destination: string,
  date: string,
  body: string,
): Record<string, string> {
  const digest = createHash("sha256").update(body).digest("base64url");
  return { method, path, origin, destination, date, digest };
}

export class PeerClient {
  constructor(private readonly options: PeerClientOptions) {}

  /**
   * Refuses a URL this gateway will not call a peer at: plain http outside test mode, or an
   * address the outbound URL policy refuses. `pointer` names the field it came from, if any.
   */
  checkUrl(url: string, what: string, pointer?: string): URL {
    const refuse = (why: string) =>
      new AcpError("InvalidParams", `${what} ${why}`, {
        ...(pointer !== undefined && { problems: [{ path: pointer, message: why }] }),
      });
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw refuse("is not a URL");
    }
    const loopbackTest = this.options.insecureLoopback && LOOPBACK_HOST.test(parsed.hostname);
    if (parsed.protocol !== "https:" && !(parsed.protocol === "http:" && loopbackTest)) {
      throw refuse(`must be https (federation requires TLS): ${parsed.origin}`);
    }
    try {
      this.options.outbound.parse(parsed);
    } catch (err) {
      if (err instanceof OutboundUrlRefused)
        throw refuse(`is refused by the outbound URL policy: ${err.reason}`);
      throw err;
    }
    return parsed;
  }

  /**
   * The `/.well-known/acp` at `base`: it must name `domain`, be signed by one of its own keys, and
   * give each key the id `<domain>#<thumbprint>` (never taken on the document's word).
   */
  async document(base: string, domain: string): Promise<FederationDocument> {
    const url = new URL(WELL_KNOWN_PATH, this.checkUrl(base, "the peer's URL"));
    const doc = await this.fetchJson(url, { method: "GET" }, FederationDocument);
    if (doc.domain !== domain) {
      throw new PeerCallError(
        `${url.origin}${WELL_KNOWN_PATH} is the document of ${doc.domain}, not of ${domain}`,
      );
    }
    for (const key of doc.keys) {
      if (key.kid !== gatewayKid(domain, key)) {
        throw new PeerCallError(`${domain}'s key ${key.kid} does not have the id its thumbprint gives`);
      }
    }
    try {
      verifyGatewaySignature(doc, doc.signature, doc.keys);
    } catch (err) {
      throw new PeerCallError(
        `${domain}'s /.well-known/acp is not signed by its keys: ${(err as Error).message}`,
      );
    }
    this.checkUrl(doc.endpoint, `${domain}'s federation endpoint`);
    return doc;
  }

  /** A signed request to a peer's federation endpoint (`body`: JSON text); the answer parsed with `schema`. */
  async call<T>(
    endpoint: string,
    destination: string,
    method: "GET" | "POST",
    path: string,
    body: string | undefined,
    schema: z.ZodType<T>,
  ): Promise<T> {
    const base = this.checkUrl(endpoint, `${destination}'s federation endpoint`);
    const url = new URL(`${base.pathname.replace(/\/$/, "")}${path}`, base);
    const text = body ?? "";
    const date = new Date().toISOString();
    const signed = requestSignatureInput(method, url.pathname, this.options.domain, destination, date, text);
    const headers: Record<string, string> = {
      [PeerHeader.Origin]: this.options.domain,
      [PeerHeader.Destination]: destination,
      [PeerHeader.Date]: date,
      [PeerHeader.Signature]: this.options.signer.signatureOf(signed),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    };
    return this.fetchJson(url, { method, headers, ...(body === undefined ? {} : { body: text }) }, schema);
  }

  private async fetchJson<T>(
    url: URL,
    init: { method: string; headers?: Record<string, string>; body?: string },
    schema: z.ZodType<T>,
  ): Promise<T> {
    let answer: Response;
    let text: string;
    try {
      answer = await this.options.outbound.fetch(url, {
        ...init,
        maxResponseBytes: MAX_ANSWER_BYTES,
        signal: AbortSignal.timeout(this.options.timeoutMs),
        ...(this.options.ca && { ca: this.options.ca }),
      });
      text = await answer.text();
    } catch (err) {
      throw new PeerCallError(`${url.origin} unreachable: ${(err as Error).message}`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new PeerCallError(
        `${url.origin}${url.pathname} answered ${answer.status} with no JSON`,
        answer.status,
      );
    }
    if (!answer.ok) {
      const error = (json as { error?: ErrorObject } | null)?.error;
      throw new PeerCallError(
        `${url.origin}${url.pathname} answered ${answer.status}: ${error?.message ?? "no reason given"}`,
        answer.status,
        error,
      );
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new PeerCallError(
        `${url.origin}${url.pathname} answered something else than expected: ${issue?.path.join(".") || "(root)"} ${issue?.message}`,
        answer.status,
      );
    }
    return parsed.data;
  }
}

/** Keys as pinned: the document's keys, ids checked. */
export function pinnableKeys(doc: FederationDocument): GatewayKey[] {
  return doc.keys.map((k) => ({ kty: "OKP", crv: "Ed25519", x: k.x, kid: k.kid }));
}
