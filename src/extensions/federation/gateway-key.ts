/**
 * The gateway's federation signing key (Ed25519): what peers pin, and what signs every request
 * this gateway sends them, its `/.well-known/acp` and its directory records. Generated at the first
 * start in `<data>/federation/gateway-key.json` (directory 0700, file 0600, never overwritten).
 * Its key id is `<domain>#<RFC 7638 thumbprint>`; the same detached JWS as agents' messages
 * (docs/protocol.md, section 6) signs the JCS form of a value without its `signature` member.
 */
import { type KeyObject, verify as edVerify, sign as edSign } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { ensurePrivateDir, ensurePrivateFile } from "../../jsonl/private-files.js";
import {
  AcpError,
  canonicalize,
  decodeProtectedHeader,
  Ed25519PrivateJwk,
  generatePrivateJwk,
  importPrivateKey,
  importPublicKey,
  jwkThumbprint,
  signingInput,
} from "../../protocol/index.js";
import type { GatewayKey } from "../../wire/federation.js";

export const GATEWAY_KEY_FILE = join("federation", "gateway-key.json");

const KeyFile = z.object({ signing: Ed25519PrivateJwk, createdAt: z.string() });

export class GatewaySigner {
  readonly publicKey: GatewayKey;
  private readonly protectedB64: string;

  private constructor(
    readonly kid: string,
    x: string,
    private readonly privateKey: KeyObject,
  ) {
    this.publicKey = { kty: "OKP", crv: "Ed25519", x, kid };
    this.protectedB64 = Buffer.from(canonicalize({ alg: "EdDSA", kid })).toString("base64url");
  }

  /** Loads the key of `<data>/federation/gateway-key.json`, generating it the first time. */
  static async open(dataDir: string, domain: string): Promise<GatewaySigner> {
    const file = join(dataDir, GATEWAY_KEY_FILE);
    ensurePrivateDir(join(dataDir, "federation"));
    let text: string | undefined;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    let signing: z.infer<typeof Ed25519PrivateJwk>;
    if (text === undefined) {
      const jwk = generatePrivateJwk("ed25519");
      signing = { kty: "OKP", crv: "Ed25519", x: jwk.x, d: jwk.d };
      const body = `${JSON.stringify({ signing, createdAt: new Date().toISOString() }, null, 2)}\n`;
      await writeFile(file, body, { mode: 0o600, flag: "wx" });
    } else {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new Error(`${file}: not JSON; move it aside to generate a new federation key`);
      }
      const checked = KeyFile.safeParse(parsed);
      if (!checked.success) {
        const issue = checked.error.issues[0];
        throw new Error(`${file}: field ${issue?.path.join(".") || "(root)"}: ${issue?.message}`);
      }
      signing = checked.data.signing;
    }
    ensurePrivateFile(file, false);
    const kid = `${domain}#${jwkThumbprint(signing)}`;
    return new GatewaySigner(kid, signing.x, importPrivateKey(signing));
  }

  /** The detached JWS of `value` (without its `signature` member). */
  signatureOf(value: object): string {
    const sig = edSign(null, signingInput(this.protectedB64, value), this.privateKey);
    return `${this.protectedB64}..${sig.toString("base64url")}`;
  }

  /** `value` with its `signature` member set. */
  sign<T extends object>(value: T): T & { signature: string } {
    return { ...value, signature: this.signatureOf(value) };
  }
}

/** The key id a detached JWS names, or undefined when it is not one. */
export function signingKid(signature: unknown): string | undefined {
  if (typeof signature !== "string") return undefined;
  const separator = signature.indexOf("..");
  if (separator <= 0) return undefined;
  try {
    return decodeProtectedHeader(signature.slice(0, separator)).kid;
  } catch {
    return undefined;
  }
}

const importedKeys = new Map<string, KeyObject>();

function keyObjectOf(key: GatewayKey): KeyObject {
  let imported = importedKeys.get(key.x);
  if (!imported) {
    imported = importPublicKey(key);
    if (importedKeys.size > 1024) importedKeys.clear();
    importedKeys.set(key.x, imported);
  }
  return imported;
}

/**
 * Checks that `signature` signs `value` (its `signature` member left out) with one of `keys`;
 * returns that key. Throws SignatureInvalid naming what is wrong, UnknownKey for a key not among them.
 */
export function verifyGatewaySignature(
  value: object,
  signature: unknown,
  keys: readonly GatewayKey[],
): GatewayKey {
  const kid = signingKid(signature);
  if (kid === undefined) throw new AcpError("SignatureInvalid", "not a detached JWS signed with EdDSA");
  const key = keys.find((k) => k.kid === kid);
  if (!key) throw new AcpError("UnknownKey", `key ${kid} is not a pinned key of this peer`, { kid });
  const [protectedB64, encoded] = (signature as string).split("..") as [string, string];
  const sig = Buffer.from(encoded, "base64url");
  if (sig.length !== 64 || !edVerify(null, signingInput(protectedB64, value), keyObjectOf(key), sig)) {
    throw new AcpError("SignatureInvalid", `the signature by ${kid} does not verify`);
  }
  return key;
}

/** The key id a gateway key has for `domain`: what pinning compares. */
export function gatewayKid(domain: string, key: { kty: string; crv: string; x: string }): string {
  return `${domain}#${jwkThumbprint(key)}`;
}
