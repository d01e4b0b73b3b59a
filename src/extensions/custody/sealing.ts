/**
 * AES-256-GCM sealing under the key-encryption key, for every secret the gateway keeps at rest:
 * custodial agent keys (store.ts) and, through the SecretKeeper the composition root hands out,
 * other extensions' secrets (the A2A bridge key, credentials for external A2A agents).
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { Broker } from "../../broker/index.js";
import type { SealedSecret, SecretBox, SecretKeeper } from "../../gateway/secrets.js";
import { type KekOptions, KeyEncryptionKey } from "./kek.js";

/** A sealed value did not open: another key-encryption key, or altered. */
export class SealOpenError extends Error {
  override readonly name = "SealOpenError";
}

export function seal(kek: Buffer, plain: string, label: string): SealedSecret {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", kek, iv);
  cipher.setAAD(Buffer.from(label, "utf8"));
  const ciphertext = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
  return {
    v: 1,
    alg: "A256GCM",
    iv: iv.toString("base64url"),
    tag: cipher.getAuthTag().toString("base64url"),
    ciphertext: ciphertext.toString("base64url"),
  };
}

export function unseal(kek: Buffer, sealed: SealedSecret, label: string): string {
  try {
    const decipher = createDecipheriv("aes-256-gcm", kek, Buffer.from(sealed.iv, "base64url"));
    decipher.setAAD(Buffer.from(label, "utf8"));
    decipher.setAuthTag(Buffer.from(sealed.tag, "base64url"));
    return Buffer.concat([
      decipher.update(Buffer.from(sealed.ciphertext, "base64url")),
      decipher.final(),
    ]).toString("utf8");
  } catch {
    throw new SealOpenError(
      `${label} does not open with this gateway's custody key (another key, or altered)`,
    );
  }
}

/** The keeper of a gateway's key-encryption key (one KEK per broker it is opened for). */
export function secretKeeper(options: KekOptions): SecretKeeper {
  const opened = new WeakMap<Broker, Promise<SecretBox>>();
  return {
    open(broker) {
      let box = opened.get(broker);
      if (!box) {
        box = KeyEncryptionKey.open(broker, options).then((kek) => ({
          seal: async (plain, label) => seal(await kek.get(), plain, label),
          open: async (sealed, label) => unseal(await kek.get(), sealed, label),
        }));
        opened.set(broker, box);
      }
      return box;
    },
  };
}
