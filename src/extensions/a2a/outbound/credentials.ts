/**
 * Credentials for A2A agents whose card declares security (an API key header, an HTTP bearer
 * token): given by the admin at registration, sealed with the gateway's custody key in the bucket
 * `a2a-outbound-credentials` (one entry per agent id, the id bound to it), sent on the card fetch
 * and every call. Only the header names are ever shown (the record's `credentials`); the values
 * are never logged or returned.
 */
import { z } from "zod";
import type { Broker, KvBucket } from "../../../broker/index.js";
import type { SealedSecret, SecretBox } from "../../../gateway/secrets.js";

/** RFC 9110 field names (tokens). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Visible characters, spaces and tabs: no CR, LF or NUL (no header injection). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]+$/;
/** Headers the bridge sets itself. */
const RESERVED = new Set([
  "host",
  "content-type",
  "content-length",
  "accept",
  "a2a-version",
  "transfer-encoding",
]);

export const Credentials = z
  .strictObject({
    /** Sent as they are on the card fetch and every call, e.g. `{ "X-API-Key": "…" }`. */
    headers: z
      .record(z.string(), z.string())
      .superRefine((headers, ctx) => {
        for (const [name, value] of Object.entries(headers)) {
          if (!HEADER_NAME.test(name))
            ctx.addIssue({ code: "custom", path: [name], message: "not a valid HTTP header name" });
          else if (RESERVED.has(name.toLowerCase()))
            ctx.addIssue({ code: "custom", path: [name], message: "set by the bridge itself" });
          else if (!HEADER_VALUE.test(value.trim()))
            ctx.addIssue({
              code: "custom",
              path: [name],
              message: "must be a non-empty value without line breaks",
            });
        }
      })
      .optional(),
    /** Sent as `Authorization: Bearer <token>`. */
    bearer: z
      .string()
      .regex(/^[A-Za-z0-9\-._~+/]+=*$/, "must be a bearer token (RFC 6750 characters, no spaces)")
      .optional(),
  })
  .superRefine((credentials, ctx) => {
    const names = Object.keys(credentials.headers ?? {}).map((n) => n.toLowerCase());
    if (credentials.bearer !== undefined && names.includes("authorization"))
      ctx.addIssue({
        code: "custom",
        path: ["bearer"],
        message: "give bearer or an Authorization header, not both",
      });
    if (credentials.bearer === undefined && names.length === 0)
      ctx.addIssue({ code: "custom", path: [], message: "give headers or bearer" });
  });
export type Credentials = z.infer<typeof Credentials>;

/** The headers the credentials stand for. */
export function credentialHeaders(credentials: Credentials): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(credentials.headers ?? {})) headers[name] = value.trim();
  if (credentials.bearer !== undefined) headers.Authorization = `Bearer ${credentials.bearer}`;
  return headers;
}

const label = (agentId: string) => `acp-a2a-credentials:v1:${agentId}`;

export class CredentialStore {
  private readonly bucket: KvBucket<SealedSecret>;

  constructor(
    broker: Broker,
    private readonly box: SecretBox,
  ) {
    this.bucket = broker.kv<SealedSecret>("a2a-outbound-credentials");
  }

  async save(agentId: string, headers: Record<string, string>): Promise<void> {
    await this.bucket.put(agentId, await this.box.seal(JSON.stringify(headers), label(agentId)));
  }

  /** The agent's headers; none when it was registered without credentials. */
  async load(agentId: string): Promise<Record<string, string>> {
    const entry = await this.bucket.get(agentId);
    if (!entry) return {};
    return JSON.parse(await this.box.open(entry.value, label(agentId))) as Record<string, string>;
  }

  async delete(agentId: string): Promise<void> {
    await this.bucket.delete(agentId);
  }
}

/**
 * The card's security, in A2A 1.0 JSON (a 0.3 card is read as the 1.0 card it stands for). The A2A
 * JS SDK 1.x serves its cards' schemes as `{ scheme: { $case, value } }`: read as `{ [$case]: value }`.
 */
const CardSecurity = z.looseObject({
  securitySchemes: z
    .record(
      z.string(),
      z.preprocess(
        (scheme) => {
          const oneOf = (scheme as { scheme?: { $case?: unknown; value?: unknown } } | null)?.scheme;
          return typeof oneOf?.$case === "string" ? { [oneOf.$case]: oneOf.value } : scheme;
        },
        z.looseObject({
          apiKeySecurityScheme: z
            .looseObject({ location: z.string().optional(), name: z.string() })
            .optional(),
          httpAuthSecurityScheme: z.looseObject({ scheme: z.string() }).optional(),
          oauth2SecurityScheme: z.unknown().optional(),
          openIdConnectSecurityScheme: z.unknown().optional(),
          mtlsSecurityScheme: z.unknown().optional(),
        }),
      ),
    )
    .optional(),
  securityRequirements: z
    .array(z.looseObject({ schemes: z.record(z.string(), z.unknown()).optional() }))
    .optional(),
});
type Scheme = NonNullable<z.infer<typeof CardSecurity>["securitySchemes"]>[string];

/** What one scheme needs, and whether the headers given (lower-cased names) carry it. */
function need(name: string, scheme: Scheme | undefined, given: Set<string>): { what: string; met: boolean } {
  const apiKey = scheme?.apiKeySecurityScheme;
  if (apiKey) {
    const location = (apiKey.location ?? "header").toLowerCase();
    if (location === "header")
      return { what: `the header ${apiKey.name} (${name})`, met: given.has(apiKey.name.toLowerCase()) };
    if (location === "cookie")
      return { what: `the cookie ${apiKey.name} (${name})`, met: given.has("cookie") };
    return { what: `the query parameter ${apiKey.name} (${name}), which the bridge cannot send`, met: false };
  }
  const http = scheme?.httpAuthSecurityScheme;
  if (http) return { what: `Authorization: ${http.scheme} (${name})`, met: given.has("authorization") };
  if (scheme?.oauth2SecurityScheme !== undefined || scheme?.openIdConnectSecurityScheme !== undefined)
    return { what: `an OAuth 2.0 / OpenID Connect bearer token (${name})`, met: given.has("authorization") };
  if (scheme?.mtlsSecurityScheme !== undefined)
    return { what: `mutual TLS (${name}), which the bridge does not offer`, met: false };
  // A scheme the card does not define (or this bridge does not know): nothing to say about it.
  return { what: name, met: true };
}

/**
 * A warning when the card's security requirements ask for credentials that the headers given do
 * not carry (none of its alternatives is met): the agent will answer HTTP 401 to every call.
 * Undefined when one alternative is met, or the card requires nothing.
 */
export function missingCredentials(card: unknown, givenHeaders: string[]): string | undefined {
  const parsed = CardSecurity.safeParse(card);
  if (!parsed.success) return undefined;
  const { securitySchemes = {}, securityRequirements = [] } = parsed.data;
  if (securityRequirements.length === 0) return undefined;
  const given = new Set(givenHeaders.map((header) => header.toLowerCase()));
  const alternatives = securityRequirements.map((requirement) =>
    Object.keys(requirement.schemes ?? {}).map((name) => need(name, securitySchemes[name], given)),
  );
  if (alternatives.some((needs) => needs.every((n) => n.met))) return undefined;
  const asked = alternatives.map((needs) => needs.map((n) => n.what).join(" and ")).join(", or ");
  const sent =
    givenHeaders.length > 0
      ? `the credentials given (${givenHeaders.join(", ")}) do not carry it`
      : "no credentials were given";
  return (
    `the agent card asks for ${asked}, and ${sent}: the agent will likely refuse every call (HTTP 401) ` +
    "until it is registered again with them (--header-env, --bearer-env or --header; credentials in the body)"
  );
}
