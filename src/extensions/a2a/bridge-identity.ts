import { generateKeyPairSync } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import {
  canonicalize,
  type Ed25519PublicJwk,
  importPrivateKey,
  keyId,
  type Signer,
} from "../../protocol/index.js";

/**
 * The gateway-held Ed25519 key that signs for the A2A bridge. One key per gateway data directory
 * (`<dir>/bridge-key.json`, mode 0600, created on first use, never overwritten): it is registered as
 * the signing key of every agent id the bridge answers for, so each of them signs with
 * `kid = <agent-id>#<thumbprint of this key>`.
 */
export interface BridgeIdentity {
  /** The public half, as registered in the agent registry. */
  readonly signing: Ed25519PublicJwk;
  /** A signer acting as `agentId` with the bridge key. */
  signerFor(agentId: string): Signer;
}

const KeyFile = z.object({
  kty: z.literal("OKP"),
  crv: z.literal("Ed25519"),
  x: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
  d: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
});

const FILE = "bridge-key.json";

export async function loadBridgeIdentity(dir: string): Promise<BridgeIdentity> {
  const file = join(dir, FILE);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const generated = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" });
  try {
    await writeFile(file, `${JSON.stringify(generated)}\n`, { mode: 0o600, flag: "wx" });
    await chmod(file, 0o600);
  } catch (err) {
    // Already there (a restart, or another process created it first): use the stored key.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  let stored: unknown;
  try {
    stored = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: cannot read the A2A bridge key (${(err as Error).message})`);
  }
  const parsed = KeyFile.safeParse(stored);
  if (!parsed.success)
    throw new Error(`${file}: not an Ed25519 private JWK (field ${parsed.error.issues[0]?.path.join(".")})`);
  const jwk = parsed.data;
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
