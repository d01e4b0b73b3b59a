import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { SealedSecretSchema, type SecretBox } from "../../../gateway/secrets.js";
import {
  canonicalize,
  type Ed25519PublicJwk,
  generatePrivateJwk,
  importPrivateKey,
  keyId,
  type Signer,
} from "../../../protocol/index.js";

/**
 * The gateway-held Ed25519 key that signs for the A2A bridge. One key per gateway data directory
 * (`<dir>/bridge-key.json`, mode 0600, sealed with the gateway's key-encryption key, created on
 * first use, never overwritten): it is registered as
 * the signing key of every agent id the bridge answers for, so each of them signs with
 * `kid = <agent-id>#<thumbprint of this key>`.
 */
export interface BridgeSigningKey {
  /** The public half, as registered in the agent registry. */
  readonly signing: Ed25519PublicJwk;
  /** A signer acting as `agentId` with the bridge key. */
  signerFor(agentId: string): Signer;
}

const PlainKey = z.object({
  kty: z.literal("OKP"),
  crv: z.literal("Ed25519"),
  x: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
  d: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
});
type PlainKey = z.infer<typeof PlainKey>;

const SealedKeyFile = z.object({
  acpBridgeKey: z.literal(1),
  sealed: SealedSecretSchema,
});

const FILE = "bridge-key.json";
/** Bound to the sealed key: a value sealed for something else does not open as the bridge key. */
const LABEL = "acp-a2a-bridge-key:v1";

export interface LoadedBridgeSigningKey {
  identity: BridgeSigningKey;
  /** The file held the key in the clear (before keys were sealed) and now holds it sealed. */
  migrated: boolean;
}

/**
 * The bridge key of `dir`, sealed at rest with the gateway's key-encryption key. A key file in the
 * clear (written before bridge keys were sealed) is sealed in place. With `create`, a missing key
 * is generated; without, a missing key is `undefined` (nothing is created, and no KEK either).
 */
export async function loadBridgeSigningKey(
  dir: string,
  box: SecretBox,
  options: { create: boolean },
): Promise<LoadedBridgeSigningKey | undefined> {
  const file = join(dir, FILE);
  let text = await readFile(file, "utf8").catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw new Error(`${file}: cannot read the A2A bridge key (${err.message})`);
  });
  if (text === undefined) {
    if (!options.create) return undefined;
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const generated = generatePrivateJwk("ed25519");
    const sealed = await box.seal(JSON.stringify(generated), LABEL);
    try {
      await writeFile(file, `${JSON.stringify({ acpBridgeKey: 1, sealed })}\n`, { mode: 0o600, flag: "wx" });
      await chmod(file, 0o600);
    } catch (err) {
      // Another process created it first: use the stored key.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    text = await readFile(file, "utf8");
  }
  let stored: unknown;
  try {
    stored = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file}: the A2A bridge key file is not JSON (${(err as Error).message})`);
  }
  const plain = PlainKey.safeParse(stored);
  if (plain.success) {
    // Written before bridge keys were sealed: seal it in place (write aside, then rename over).
    const sealed = await box.seal(JSON.stringify(plain.data), LABEL);
    const aside = `${file}.sealing`;
    await writeFile(aside, `${JSON.stringify({ acpBridgeKey: 1, sealed })}\n`, { mode: 0o600 });
    await chmod(aside, 0o600);
    await rename(aside, file);
    return { identity: identityOf(plain.data), migrated: true };
  }
  const parsed = SealedKeyFile.safeParse(stored);
  if (!parsed.success) {
    throw new Error(
      `${file}: not a sealed A2A bridge key (field ${parsed.error.issues[0]?.path.join(".") || "(root)"}: ${parsed.error.issues[0]?.message})`,
    );
  }
  let opened: string;
  try {
    opened = await box.open(parsed.data.sealed, LABEL);
  } catch (err) {
    throw new Error(
      `${file}: the A2A bridge key does not open with this gateway's custody key (${CUSTODY_HINT}); ` +
        `start the gateway with the key it was sealed with (${(err as Error).message})`,
    );
  }
  const key = PlainKey.safeParse(JSON.parse(opened));
  if (!key.success) throw new Error(`${file}: the sealed A2A bridge key is not an Ed25519 private JWK`);
  return { identity: identityOf(key.data), migrated: false };
}

const CUSTODY_HINT = "ACP_CUSTODY_KEY, or custody.key in the data directory";

function identityOf(jwk: PlainKey): BridgeSigningKey {
  const privateKey = importPrivateKey(jwk);
  const signing: Ed25519PublicJwk = { kty: "OKP", crv: "Ed25519", x: jwk.x };
  const signers = new Map<string, Signer>();
  return {
    signing,
    signerFor(agentId) {
      let signer = signers.get(agentId);
      if (!signer) {
        const kid = keyId(agentId, signing);
        signer = {
          agentId,
          kid,
          privateKey,
          protectedB64: Buffer.from(canonicalize({ alg: "EdDSA", kid })).toString("base64url"),
        };
        signers.set(agentId, signer);
      }
      return signer;
    },
  };
}
