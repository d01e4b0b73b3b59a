import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { Broker, KvBucket } from "../broker/index.js";
import { isWriteConflict } from "../broker/errors.js";
import { WatchedReads } from "../broker/watched-reads.js";
import { hashSecret } from "./auth.js";
import { AcpError, PrincipalId, problemsOf } from "../protocol/index.js";
import type { PrincipalView } from "../wire/api.js";
import { acceptingDeprecatedNames } from "../wire/deprecated-names.js";

/** What the gateway keeps per human principal (bucket `principals`). The token itself is never stored. */
export interface PrincipalRecord {
  principalId: string;
  tokenHash: string;
  createdAt: string;
  revokedAt?: string;
}

export const PRINCIPALS_BUCKET = "principals";
export const PRINCIPAL_TOKENS_BUCKET = "principal-tokens";

/** POST /api/v1/dashboard/principals: `{principal_id}` (`principalId` read too, for the deprecation period). */
const AddPrincipal = acceptingDeprecatedNames(z.strictObject({ principal_id: PrincipalId }));

/**
 * Token hashes kept resolved in memory (a principal, or none): enough for every principal of a
 * large deployment. Bounded because anyone can present tokens: random ones would otherwise grow
 * the cache of "no such token" answers for ever. The least recently used go first.
 */
export const CACHED_PRINCIPAL_TOKENS = 10_000;

/** Principal ids may hold characters KV keys may not (`alice@example.com`): records are keyed by a hash. */
function keyOf(principalId: string): string {
  return hashSecret(`principal:${principalId}`);
}

/**
 * Principal tokens: `acppr_` + 32 random bytes, like API keys (so one SHA-256 is a sound storage
 * hash). Stored in the broker's KV so every gateway on one NATS accepts them; a second bucket maps
 * the token's hash to its principal, for O(1) sign-in. One live token per principal.
 */
export class PrincipalStore {
  private readonly principals: KvBucket<PrincipalRecord>;
  private readonly tokens: KvBucket<{ principalId: string }>;
  /** Token hash → its principal (null: no such token), kept true by the bucket's watch. */
  private readonly byHash: WatchedReads<string | null>;

  constructor(broker: Broker) {
    this.principals = broker.kv<PrincipalRecord>(PRINCIPALS_BUCKET);
    this.tokens = broker.kv<{ principalId: string }>(PRINCIPAL_TOKENS_BUCKET);
    this.byHash = new WatchedReads(this.tokens, { max: CACHED_PRINCIPAL_TOKENS });
  }

  /** Keeps the sign-in cache true when another gateway revokes a token. */
  async start(): Promise<void> {
    await this.byHash.start();
  }

  /** Stops following other gateways' revocations (see `start`). */
  stop(): void {
    this.byHash.close();
  }

  /** Token hashes resolved in memory now (at most CACHED_PRINCIPAL_TOKENS). */
  get cachedTokens(): number {
    return this.byHash.size;
  }

  /** Issues a token for a new (or previously revoked) principal; the token is shown only this once. */
  async add(input: unknown, now = new Date()): Promise<{ principalId: string; token: string }> {
    const parsed = AddPrincipal.safeParse(input);
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid principal", {
        problems: problemsOf(parsed.error),
      });
    }
    const { principal_id: principalId } = parsed.data;
    const token = `acppr_${randomBytes(32).toString("base64url")}`;
    const record: PrincipalRecord = {
      principalId,
      tokenHash: hashSecret(token),
      createdAt: now.toISOString(),
    };
    const key = keyOf(principalId);
    const existing = await this.principals.get(key);
    if (existing && !existing.value.revokedAt) {
      throw new AcpError("Conflict", `principal ${principalId} already has a token; revoke it first`, {
        problems: [{ path: "/principalId", message: "already has a live token" }],
      });
    }
    try {
      if (existing) await this.principals.update(key, record, existing.revision);
      else await this.principals.create(key, record);
    } catch (err) {
      if (isWriteConflict(err)) {
        throw new AcpError("Conflict", `principal ${principalId} was added concurrently; list to see it`);
      }
      throw err;
    }
    await this.tokens.put(record.tokenHash, { principalId });
    return { principalId, token };
  }

  /** Every principal, revoked ones included, by id. */
  async list(): Promise<PrincipalView[]> {
    const keys = await this.principals.keys();
    const entries = await Promise.all(keys.map((key) => this.principals.get(key)));
    return entries
      .flatMap((entry) => (entry ? [view(entry.value)] : []))
      .sort((a, b) => a.principalId.localeCompare(b.principalId));
  }

  /** The token stops working at once; the record stays, marked revoked. */
  async revoke(principalId: string, now = new Date()): Promise<PrincipalView> {
    const key = keyOf(principalId);
    const entry = await this.principals.get(key);
    if (!entry) {
      throw new AcpError("NotFound", `no principal ${principalId}`, {
        problems: [{ path: "/principalId", message: "not added" }],
      });
    }
    const revoked = { ...entry.value, revokedAt: entry.value.revokedAt ?? now.toISOString() };
    await this.principals.update(key, revoked, entry.revision);
    await this.tokens.delete(entry.value.tokenHash);
    this.byHash.forget(entry.value.tokenHash);
    return view(revoked);
  }

  /** The principal a token signs in as, or undefined for an unknown or revoked token. */
  async authenticate(token: string): Promise<string | undefined> {
    const hash = hashSecret(token);
    const principalId = await this.byHash.read(
      hash,
      async () => (await this.tokens.get(hash))?.value.principalId ?? null,
    );
    if (principalId === null) return undefined;
    // The record decides: a token whose principal was revoked (or re-issued) no longer works.
    const record = (await this.principals.get(keyOf(principalId)))?.value;
    return record && !record.revokedAt && record.tokenHash === hash ? principalId : undefined;
  }
}

function view(record: PrincipalRecord): PrincipalView {
  const { tokenHash: _secret, ...rest } = record;
  return rest;
}
