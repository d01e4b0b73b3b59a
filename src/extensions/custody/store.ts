/**
 * Custodial agent keys: for an agent registered with `custodial: true` the gateway generates the
 * Ed25519 (signing) and X25519 (encryption) keys and keeps the private parts sealed with
 * AES-256-GCM under the key-encryption key (bucket `custody`, one entry per agent, the agent id as
 * additional data so an entry cannot be passed off as another agent's). The private keys are never
 * logged, returned or kept in memory beyond the signature they are opened for.
 */
import type { Broker, KvBucket } from "../../broker/index.js";
import { isBrokerError } from "../../broker/errors.js";
import {
  AcpError,
  type Ed25519PublicJwk,
  generateIdentity,
  PrivateIdentity,
  publicIdentity,
  type X25519PublicJwk,
} from "../../protocol/index.js";
import type { SealedSecret } from "../../gateway/secrets.js";
import { type KekOptions, KeyEncryptionKey } from "./kek.js";
import { SealOpenError, seal, unseal } from "./sealing.js";

export const CUSTODY_BUCKET = "custody";

interface SealedIdentity extends SealedSecret {
  createdAt: string;
}

export interface CustodialKeys {
  signing: Ed25519PublicJwk;
  encryption: X25519PublicJwk;
}

/** The gateway's custody of agent keys; one per gateway, shared by registration and signing. */
export class Custody {
  private readonly sealed: KvBucket<SealedIdentity>;

  private constructor(
    broker: Broker,
    private readonly kek: KeyEncryptionKey,
  ) {
    this.sealed = broker.kv<SealedIdentity>(CUSTODY_BUCKET);
  }

  /** Opens custody; throws CustodyKeyError when keys are stored and the KEK is missing or wrong. */
  static async open(broker: Broker, options: KekOptions): Promise<Custody> {
    return new Custody(broker, await KeyEncryptionKey.open(broker, options));
  }

  /**
   * Generates and seals the keys of a new custodial agent; returns the public halves. Refuses
   * (Conflict) when keys are already held for that id, so a registration never replaces them.
   */
  async create(agentId: string, principalId: string): Promise<CustodialKeys> {
    const identity = generateIdentity(agentId, principalId);
    const sealed = seal(await this.kek.get(), JSON.stringify(identity), additionalData(agentId));
    try {
      await this.sealed.create(agentId, { ...sealed, createdAt: new Date().toISOString() });
    } catch (err) {
      if (isBrokerError(err, "exists")) {
        throw new AcpError("Conflict", `agent ${agentId} is already registered; rotate its key instead`, {
          problems: [{ path: "/agentId", message: "already registered" }],
        });
      }
      throw err;
    }
    const { signing, encryption } = publicIdentity(identity);
    return { signing, encryption: encryption as X25519PublicJwk };
  }

  /** Forgets an agent's keys (a registration that did not complete, a revoked agent). */
  async discard(agentId: string): Promise<void> {
    await this.sealed.delete(agentId);
  }

  /** The agent's private identity, opened for one signature; NotFound when none is held. */
  async identity(agentId: string): Promise<PrivateIdentity> {
    const entry = await this.sealed.get(agentId);
    if (!entry) throw new AcpError("NotFound", `the gateway holds no custodial key for ${agentId}`);
    let plain: string;
    try {
      plain = unseal(await this.kek.get(), entry.value, additionalData(agentId));
    } catch (err) {
      if (!(err instanceof SealOpenError)) throw err;
      throw new AcpError(
        "InternalError",
        `the custodial key of ${agentId} does not open with this gateway's custody key (tampered or another key)`,
      );
    }
    return PrivateIdentity.parse(JSON.parse(plain));
  }
}

function additionalData(agentId: string): string {
  return `acp-custody:v1:${agentId}`;
}
