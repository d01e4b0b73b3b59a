import type { KeyObject } from "node:crypto";
import type { Broker, KvBucket, Unsubscribe } from "../broker/index.js";
import {
  AcpError,
  type Ed25519PublicJwk,
  importPublicKey,
  keyId,
  type X25519PublicJwk,
} from "../protocol/index.js";
import { hashSecret, newApiKey } from "./auth.js";
import { RegisterAgentRequest } from "../wire/api.js";

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
}

export interface ResolvedAgent {
  record: AgentRecord;
  kid: string;
  key: KeyObject;
}

/**
 * The agent registry over the broker's KV (so every gateway on one NATS shares it). Lookups on the
 * hot path are served from memory; a KV watch keeps the cache true when another gateway registers,
 * rotates or revokes.
 */
export class Registry {
  private readonly agents: KvBucket<AgentRecord>;
  private readonly apiKeys: KvBucket<{ agentId: string }>;
  private readonly byId = new Map<string, ResolvedAgent | null>();
  private readonly byKeyHash = new Map<string, string | null>();
  private unwatch: Unsubscribe[] = [];

  constructor(broker: Broker) {
    this.agents = broker.kv<AgentRecord>("agents");
    this.apiKeys = broker.kv<{ agentId: string }>("apikeys");
  }

  async start(): Promise<void> {
    this.unwatch.push(await this.agents.watch((change) => this.byId.delete(change.key)));
    this.unwatch.push(await this.apiKeys.watch((change) => this.byKeyHash.delete(change.key)));
  }

  stop(): void {
    for (const unwatch of this.unwatch.splice(0)) unwatch();
  }

  /** Registers an agent; returns its API key, shown only this once. */
  async register(input: unknown, now = new Date()): Promise<{ agentId: string; apiKey: string }> {
    const parsed = RegisterAgentRequest.safeParse(input);
    if (!parsed.success) {
      throw new AcpError("InvalidParams", "invalid agent registration", {
        problems: parsed.error.issues.map((i) => ({ path: `/${i.path.join("/")}`, message: i.message })),
      });
    }
    const request = parsed.data;
    const apiKey = newApiKey();
    const record: AgentRecord = {
      agentId: request.agentId,
      principalId: request.principalId,
      signing: {
        kty: "OKP",
        crv: "Ed25519",
        x: request.signing.x,
        kid: keyId(request.agentId, request.signing),
      },
      ...(request.encryption
        ? {
            encryption: {
              kty: "OKP",
              crv: "X25519",
              x: request.encryption.x,
              kid: keyId(request.agentId, request.encryption),
            },
          }
        : {}),
      capabilities: request.capabilities,
      protocolVersions: request.protocolVersions,
      apiKeyHash: hashSecret(apiKey),
      createdAt: now.toISOString(),
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
    } catch (err) {
      if ((err as { code?: string }).code === "exists") {
        throw new AcpError(
          "Conflict",
          `agent ${record.agentId} is already registered; rotate its key instead`,
          {
            problems: [{ path: "/agentId", message: "already registered" }],
          },
        );
      }
      throw err;
    }
    await this.apiKeys.put(record.apiKeyHash, { agentId: record.agentId });
    return { agentId: record.agentId, apiKey };
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
    this.byId.delete(agentId);
    this.byKeyHash.delete(entry.value.apiKeyHash);
    return { agentId, apiKey };
  }

  /** Revokes the agent: its key stops working, messages to it are refused. The record stays for audit. */
  async revoke(agentId: string, now = new Date()): Promise<{ agentId: string; revokedAt: string }> {
    const entry = await this.agents.get(agentId);
    if (!entry) throw notFound(agentId);
    const revokedAt = entry.value.revokedAt ?? now.toISOString();
    await this.agents.update(agentId, { ...entry.value, revokedAt }, entry.revision);
    await this.apiKeys.delete(entry.value.apiKeyHash);
    this.byId.delete(agentId);
    this.byKeyHash.delete(entry.value.apiKeyHash);
    return { agentId, revokedAt };
  }

  /** The agent an API key acts as, or undefined for an unknown or revoked key. */
  authenticate(apiKey: string): Promise<ResolvedAgent | undefined> {
    return this.authenticateHash(hashSecret(apiKey));
  }

  /** As `authenticate`, for a caller that already hashed the key (one hash per request). */
  async authenticateHash(hash: string): Promise<ResolvedAgent | undefined> {
    let agentId = this.byKeyHash.get(hash);
    if (agentId === undefined) {
      agentId = (await this.apiKeys.get(hash))?.value.agentId ?? null;
      this.byKeyHash.set(hash, agentId);
    }
    if (agentId === null) return undefined;
    const agent = await this.resolve(agentId);
    return agent && agent.record.apiKeyHash === hash ? agent : undefined;
  }

  /** A live (not revoked) agent with its imported signing key, cached. */
  async resolve(agentId: string): Promise<ResolvedAgent | undefined> {
    const cached = this.byId.get(agentId);
    if (cached !== undefined) return cached ?? undefined;
    const entry = await this.agents.get(agentId).catch(() => null);
    const record = entry?.value;
    const resolved =
      record && !record.revokedAt
        ? { record, kid: keyId(record.agentId, record.signing), key: importPublicKey(record.signing) }
        : null;
    this.byId.set(agentId, resolved);
    return resolved ?? undefined;
  }

  /** Every record, revoked ones included (for listings). */
  async list(): Promise<AgentRecord[]> {
    const ids = await this.agents.keys();
    const entries = await Promise.all(ids.map((id) => this.agents.get(id)));
    return entries.flatMap((entry) => (entry ? [entry.value] : []));
  }

  async get(agentId: string): Promise<AgentRecord | undefined> {
    return (await this.agents.get(agentId))?.value;
  }
}

function notFound(agentId: string): AcpError {
  return new AcpError("NotFound", `no registered agent ${agentId}`, {
    problems: [{ path: "/agentId", message: "not registered" }],
  });
}
