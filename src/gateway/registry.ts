import type { KeyObject } from "node:crypto";
import { isBrokerError } from "../broker/errors.js";
import type { Broker, KvBucket, Unsubscribe } from "../broker/index.js";
import { WatchedReads } from "../broker/watched-reads.js";
import {
  AcpError,
  type Ed25519PublicJwk,
  importPublicKey,
  keyId,
  type PrivateIdentity,
  problemsOf,
  verifyHandover,
  type X25519PublicJwk,
} from "../protocol/index.js";
import { type RegisterAgentFields, RegisterAgentRequest } from "../wire/agents.js";
import type { KeyHistoryEntry } from "../wire/api.js";
import { ProtocolVersions } from "../wire/versions.js";
import { hashSecret, newApiKey } from "./auth.js";
import type { RemoteAgents } from "./remote.js";

/** Earlier signing keys an agent's record keeps (the directory publishes them). */
const MAX_KEY_HISTORY = 64;

/** What the gateway stores per agent (bucket `agents`). The API key itself is never stored. */
export interface AgentRecord {
  agentId: string;
  principalId: string;
  signing: Ed25519PublicJwk;
  encryption?: X25519PublicJwk;
  capabilities: string[];
  protocolVersions: string[];
  apiKeyHash: string;
  createdAt: string;
  rotatedAt?: string;
  revokedAt?: string;
  /** The gateway generated this agent's keys and holds them: it signs on the agent's behalf. */
  custodial?: true;
  /** Signing keys it had before its current one, oldest first (POST /api/v1/agents/:id/keys). */
  keyHistory?: KeyHistoryEntry[];
}

/** Holds custodial agents' keys (src/extensions/custody); the registry only asks it for new ones. */
export interface Custodian {
  /** Generates and stores the keys of a new custodial agent; returns the public halves. */
  create(
    agentId: string,
    principalId: string,
  ): Promise<{ signing: Ed25519PublicJwk; encryption: X25519PublicJwk }>;
  discard(agentId: string): Promise<void>;
  /** The agent's private identity, opened for one signature the gateway makes on its behalf. */
  identity(agentId: string): Promise<PrivateIdentity>;
}

export type AgentChangeListener = (agentId: string, record: AgentRecord | null) => void;

export interface ResolvedAgent {
  record: AgentRecord;
  kid: string;
  key: KeyObject;
}

/** Agents (and API keys) a gateway keeps resolved in memory; the least recently used go first. */
const CACHED_AGENTS = 100_000;
/** The one entry of the listing cache: every agent's record. */
const EVERY_AGENT = "*";

/**
 * The agent registry over the broker's KV (so every gateway on one NATS shares it). Lookups on the
 * hot path are served from memory (`WatchedReads`): a KV watch keeps the cache true when another
 * gateway registers, rotates or revokes, a lookup that such a change overtook is not kept, and a
 * failed read is not cached.
 */
export class Registry {
  private readonly agents: KvBucket<AgentRecord>;
  private readonly apiKeys: KvBucket<{ agentId: string }>;
  /** Resolved agents (null: none or revoked) and API key hashes' agents, kept current by watches. */
  private readonly byId: WatchedReads<ResolvedAgent | null>;
  private readonly byKeyHash: WatchedReads<string | null>;
  /**
   * Every agent's record, for `list` (each dashboard request, the agent directory): read again after
   * any change to the bucket, instead of one KV read per agent on every call.
   */
  private readonly listed: WatchedReads<AgentRecord[]>;
  /** Set by the composition root when the gateway offers custodial keys. */
  custodian: Custodian | undefined;
  /** Agents of other gateways: set by the federation extension when the gateway federates. */
  remote: RemoteAgents | undefined;
  private readonly changeListeners = new Set<AgentChangeListener>();
  private unwatch: Unsubscribe | undefined;

  constructor(
    broker: Broker,
    /** The protocol versions this gateway speaks: registration and the relay check against it. */
    readonly versions: ProtocolVersions = ProtocolVersions.of(),
  ) {
    this.agents = broker.kv<AgentRecord>("agents");
    this.apiKeys = broker.kv<{ agentId: string }>("apikeys");
    this.byId = new WatchedReads(this.agents, { max: CACHED_AGENTS });
    this.byKeyHash = new WatchedReads(this.apiKeys, { max: CACHED_AGENTS });
    this.listed = new WatchedReads(this.agents, { max: 1, entryOf: () => EVERY_AGENT });
  }

  /**
   * Watches the agent records (the read caches stay true, and another gateway's rotation or
   * revocation reaches this one's listeners); awaited before the gateway serves.
   */
  async start(): Promise<void> {
    await this.byId.start();
    await this.byKeyHash.start();
    await this.listed.start();
    // Another gateway's rotation or revocation reaches this one's listeners through the watch.
    this.unwatch = await this.agents.watch((change) => this.changed(change.key, change.value));
  }

  /** Stops following changes and drops the read caches. */
  stop(): void {
    this.byId.close();
    this.byKeyHash.close();
    this.listed.close();
    this.unwatch?.();
    this.changeListeners.clear();
  }

  /**
   * Calls `listener` with an agent's record (null once deleted) each time it changes: a new API
   * key, a revocation, here (before the change is answered) or at another gateway sharing the
   * registry. A change may be told twice. Returns the unsubscribe function.
   */
  onChange(listener: AgentChangeListener): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  private changed(agentId: string, record: AgentRecord | null): void {
    for (const listener of this.changeListeners) {
      try {
        listener(agentId, record);
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  /**
   * Registers an agent (the body of POST /api/v1/agents: snake_case, the deprecated camelCase
   * accepted); returns its API key, shown only this once (and never a private key).
   */
  async register(
    input: unknown,
    now = new Date(),
  ): Promise<{ agentId: string; apiKey: string; custodial?: true }> {
    const parsed = RegisterAgentRequest.safeParse(input);
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid agent registration", {
        problems: problemsOf(parsed.error),
      });
    }
    const request = parsed.data;
    const protocolVersions = this.declaredVersions(request.protocol_versions, now);
    if (request.custodial && !this.custodian) {
      throw new AcpError("InvalidParams", "this gateway does not hold custodial keys (custody is off)", {
        problems: [{ path: "/custodial", message: "not offered by this gateway" }],
      });
    }
    const keys = request.custodial
      ? await (this.custodian as Custodian).create(request.agent_id, request.principal_id)
      : { signing: request.signing as Ed25519PublicJwk, encryption: request.encryption };
    try {
      return await this.store({ ...request, protocol_versions: protocolVersions }, keys, now);
    } catch (err) {
      // A refused registration leaves no key behind (the custodian refuses to replace existing ones).
      if (request.custodial) await this.custodian?.discard(request.agent_id);
      throw err;
    }
  }

  /** The versions an agent registers with: each one this gateway still speaks, else -32015. */
  private declaredVersions(declared: string[] | undefined, now: Date): string[] {
    if (declared === undefined) return [this.versions.newest];
    const speakable = this.versions.usable(declared, now.getTime());
    const problems = declared.flatMap((version, index) => {
      if (speakable.includes(version)) return [];
      const status = this.versions.statusAt(version, now.getTime());
      const message =
        status === "unknown"
          ? `${version} is not a protocol version this gateway speaks`
          : `${version} is retired`;
      return [{ path: `/protocol_versions/${index}`, message }];
    });
    if (problems.length === 0) return declared;
    const supported = this.versions.spoken(now.getTime());
    throw new AcpError(
      "NoCommonVersion",
      `${problems.map((p) => p.message).join("; ")} (it speaks ${supported.join(", ")})`,
      { problems, supported },
    );
  }

  private async store(
    request: RegisterAgentFields & { protocol_versions: string[] },
    keys: { signing: Ed25519PublicJwk; encryption?: X25519PublicJwk | undefined },
    now: Date,
  ): Promise<{ agentId: string; apiKey: string; custodial?: true }> {
    const apiKey = newApiKey();
    const record: AgentRecord = {
      agentId: request.agent_id,
      principalId: request.principal_id,
      signing: {
        kty: "OKP",
        crv: "Ed25519",
        x: keys.signing.x,
        kid: keyId(request.agent_id, keys.signing),
      },
      ...(keys.encryption
        ? {
            encryption: {
              kty: "OKP",
              crv: "X25519",
              x: keys.encryption.x,
              kid: keyId(request.agent_id, keys.encryption),
            },
          }
        : {}),
      capabilities: request.capabilities,
      protocolVersions: request.protocol_versions,
      apiKeyHash: hashSecret(apiKey),
      createdAt: now.toISOString(),
      ...(request.custodial ? { custodial: true as const } : {}),
    };
    try {
      importPublicKey(record.signing);
    } catch {
      throw new AcpError("InvalidParams", "the signing key is not a valid Ed25519 public key", {
        problems: [{ path: "/signing/x", message: "not a valid Ed25519 public key" }],
      });
    }
    try {
      await this.agents.create(record.agentId, record);
      this.listed.forget(EVERY_AGENT);
    } catch (err) {
      if (isBrokerError(err, "exists")) {
        throw new AcpError(
          "Conflict",
          `agent ${record.agentId} is already registered; rotate its key instead`,
          {
            problems: [{ path: "/agent_id", message: "already registered" }],
          },
        );
      }
      throw err;
    }
    await this.apiKeys.put(record.apiKeyHash, { agentId: record.agentId });
    return { agentId: record.agentId, apiKey, ...(record.custodial ? { custodial: true as const } : {}) };
  }

  /** Issues a new API key and invalidates the old one. */
  async rotate(agentId: string, now = new Date()): Promise<{ agentId: string; apiKey: string }> {
    const entry = await this.agents.get(agentId);
    if (!entry || entry.value.revokedAt) throw notFound(agentId);
    const apiKey = newApiKey();
    const record = { ...entry.value, apiKeyHash: hashSecret(apiKey), rotatedAt: now.toISOString() };
    await this.agents.update(agentId, record, entry.revision);
    await this.apiKeys.put(record.apiKeyHash, { agentId });
    await this.apiKeys.delete(entry.value.apiKeyHash);
    this.forget(agentId);
    this.byKeyHash.forget(entry.value.apiKeyHash);
    this.changed(agentId, record);
    return { agentId, apiKey };
  }

  /**
   * Replaces a live agent's signing key with `signing`, which its current key vouched for
   * (`handover`, checked here); the current key joins the key history, so what it signed still
   * verifies against the history (docs/federation.md, "Identity lifecycle").
   */
  async rotateSigningKey(
    agentId: string,
    signing: Ed25519PublicJwk,
    handover: string,
    now = new Date(),
  ): Promise<AgentRecord> {
    const entry = await this.agents.get(agentId);
    if (!entry || entry.value.revokedAt) throw notFound(agentId);
    const current = entry.value;
    if (current.custodial) {
      throw new AcpError(
        "Forbidden",
        `${agentId}'s keys are held by the gateway (custodial): not rotated here`,
      );
    }
    const next = { kty: "OKP" as const, crv: "Ed25519" as const, x: signing.x };
    if (next.x === current.signing.x) {
      throw new AcpError("InvalidParams", "the new signing key is the current one", {
        problems: [{ path: "/signing/x", message: "must differ from the current key" }],
      });
    }
    verifyHandover(agentId, current.signing, next, handover);
    const history = current.keyHistory ?? [];
    const record: AgentRecord = {
      ...current,
      signing: next,
      keyHistory: [
        ...history,
        {
          kid: keyId(agentId, current.signing),
          x: current.signing.x,
          from: history.at(-1)?.until ?? current.createdAt,
          until: now.toISOString(),
          successor: keyId(agentId, next),
          handover,
        },
      ].slice(-MAX_KEY_HISTORY),
    };
    await this.agents.update(agentId, record, entry.revision);
    this.forget(agentId);
    this.changed(agentId, record);
    return record;
  }

  /** Replaces a live agent's capabilities (the registry's side of a change made by an extension that owns the agent). */
  async setCapabilities(agentId: string, capabilities: string[]): Promise<void> {
    const entry = await this.agents.get(agentId);
    if (!entry || entry.value.revokedAt) throw notFound(agentId);
    await this.agents.update(agentId, { ...entry.value, capabilities }, entry.revision);
    this.forget(agentId);
  }

  /** Revokes the agent: its key stops working, messages to it are refused. The record stays for audit. */
  async revoke(agentId: string, now = new Date()): Promise<{ agentId: string; revokedAt: string }> {
    const entry = await this.agents.get(agentId);
    if (!entry) throw notFound(agentId);
    const revokedAt = entry.value.revokedAt ?? now.toISOString();
    const record = { ...entry.value, revokedAt };
    await this.agents.update(agentId, record, entry.revision);
    await this.apiKeys.delete(entry.value.apiKeyHash);
    // Nobody may sign for a revoked agent again: the key the gateway held for it is destroyed.
    if (entry.value.custodial) await this.custodian?.discard(agentId);
    this.forget(agentId);
    this.byKeyHash.forget(entry.value.apiKeyHash);
    this.changed(agentId, record);
    return { agentId, revokedAt };
  }

  /** The agent an API key acts as, or undefined for an unknown or revoked key. */
  authenticate(apiKey: string): Promise<ResolvedAgent | undefined> {
    return this.authenticateHash(hashSecret(apiKey));
  }

  /** As `authenticate`, for a caller that already hashed the key (one hash per request). */
  async authenticateHash(hash: string): Promise<ResolvedAgent | undefined> {
    const agentId = await this.byKeyHash.read(
      hash,
      async () => (await this.apiKeys.get(hash))?.value.agentId ?? null,
    );
    if (agentId === null) return undefined;
    const agent = await this.resolve(agentId);
    return agent && agent.record.apiKeyHash === hash ? agent : undefined;
  }

  /** A live (not revoked) agent with its imported signing key, cached. */
  async resolve(agentId: string): Promise<ResolvedAgent | undefined> {
    try {
      const resolved = await this.byId.read(agentId, async () => {
        const record = (await this.agents.get(agentId))?.value;
        return record && !record.revokedAt
          ? { record, kid: keyId(record.agentId, record.signing), key: importPublicKey(record.signing) }
          : null;
      });
      return resolved ?? undefined;
    } catch {
      // The store failed: unknown for this call, and nothing cached (the next call asks again).
      return undefined;
    }
  }

  /** Every record, revoked ones included (for listings). */
  /** Every registered agent's record (revoked ones included). */
  async list(): Promise<AgentRecord[]> {
    const records = await this.listed.read(EVERY_AGENT, async () => {
      const ids = await this.agents.keys();
      const entries = await Promise.all(ids.map((id) => this.agents.get(id)));
      return entries.flatMap((entry) => (entry ? [entry.value] : []));
    });
    return [...records];
  }

  /** What this gateway cached of `agentId` after its own write (another gateway's reaches the watch). */
  private forget(agentId: string): void {
    this.byId.forget(agentId);
    this.listed.forget(EVERY_AGENT);
  }

  /** The agent's record as stored now (not the cache), or undefined for an unknown agent. */
  async get(agentId: string): Promise<AgentRecord | undefined> {
    return (await this.agents.get(agentId))?.value;
  }
}

function notFound(agentId: string): AcpError {
  return new AcpError("NotFound", `no registered agent ${agentId}`, {
    problems: [{ path: "/agentId", message: "not registered" }],
  });
}
