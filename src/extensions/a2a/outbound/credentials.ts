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
