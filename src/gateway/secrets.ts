/**
 * Secrets the gateway keeps at rest (custodial agent keys, the A2A bridge key, credentials for
 * external agents) are sealed with AES-256-GCM under one key-encryption key. The custody extension
 * owns that key (`ACP_CUSTODY_KEY`, else `<data>/custody.key`); the composition root hands the
 * keeper to every extension that stores secrets, so there is one key and one way to seal.
 */
import { z } from "zod";
import type { Broker } from "../broker/index.js";

/** A sealed value as stored (base64url fields); parse stored files with this schema. */
export const SealedSecretSchema = z.object({
  v: z.literal(1),
  alg: z.literal("A256GCM"),
  iv: z.string(),
  tag: z.string(),
  ciphertext: z.string(),
});
export type SealedSecret = z.infer<typeof SealedSecretSchema>;

export interface SecretBox {
  /** Seals `plain`; `label` is bound to it (additional data), so a sealed value cannot pose as another. */
  seal(plain: string, label: string): Promise<SealedSecret>;
  /** Opens a sealed value; throws (naming `label`) when the key is another or the value was altered. */
  open(sealed: SealedSecret, label: string): Promise<string>;
}

export interface SecretKeeper {
  /**
   * The box for this broker's gateway. Refuses (throws) when secrets are stored and the configured
   * key is missing or not theirs. The key itself is created only when the first secret is sealed.
   */
  open(broker: Broker): Promise<SecretBox>;
}
