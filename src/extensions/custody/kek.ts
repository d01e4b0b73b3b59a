/**
 * The key-encryption key (KEK) under which the gateway keeps custodial agents' private keys:
 * 32 bytes from `ACP_CUSTODY_KEY` (or the gateway option), else from `<data>/custody.key` (mode
 * 0600), generated there at the first custodial registration. A check value (HMAC of a fixed
 * label, bucket `config`, key `custody-kek`) is stored with the first key, so a gateway started
 * with a missing or different KEK refuses to start instead of failing later or overwriting keys.
 * Every gateway on one NATS shares the stored keys, so they must all be given the same KEK.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Broker, KvBucket } from "../../broker/index.js";
import { isBrokerError } from "../../broker/errors.js";

export const CUSTODY_KEY_ENV = "ACP_CUSTODY_KEY";
export const CUSTODY_KEY_FILE = "custody.key";
const CHECK_KEY = "custody-kek";
const CHECK_LABEL = "acp custody key-encryption key check v1";
/** What the KEK seals (sealing.ts), for messages. */
const SEALED_KINDS = "(custodial agent keys, the A2A bridge key, A2A credentials)";

interface KekCheck {
  custodyKekCheck: string;
  createdAt: string;
}

/** Refused at start-up: the stored sealed keys cannot be read with the KEK given (or none). */
export class CustodyKeyError extends Error {
  override readonly name = "CustodyKeyError";
}

/** Parses a configured KEK: 32 bytes as base64, base64url or 64 hex digits. */
export function parseKek(text: string, source: string): Buffer {
  const trimmed = text.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)
      ? Buffer.from(trimmed.replace(/\+/g, "-").replace(/\//g, "_").replace(/=$/, ""), "base64url")
      : undefined;
  if (bytes?.length !== 32) {
    throw new CustodyKeyError(
      `${source}: the custody key must be 32 bytes as base64, base64url or 64 hex digits ` +
        "(e.g. `openssl rand -base64 32`)",
    );
  }
  return bytes;
}

function checkOf(kek: Buffer): string {
  return createHmac("sha256", kek).update(CHECK_LABEL).digest("hex");
}

export interface KekOptions {
  /** The gateway's data directory: `custody.key` lives there when no key is configured. */
  data: string;
  /** A configured KEK (else `ACP_CUSTODY_KEY`, else the data-dir file). */
  key?: string;
}

/**
 * Finds the KEK and, when keys are already stored, proves it is theirs. `get()` yields the KEK,
 * generating the data-dir file (and storing the check value) the first time a key is stored.
 */
export class KeyEncryptionKey {
  private kek: Buffer | undefined;
  private readonly config: KvBucket<KekCheck>;

  private constructor(
    broker: Broker,
    private readonly file: string,
    private readonly configured: { text: string; source: string } | undefined,
  ) {
    this.config = broker.kv<KekCheck>("config");
  }

  static async open(broker: Broker, options: KekOptions): Promise<KeyEncryptionKey> {
    const env = process.env[CUSTODY_KEY_ENV];
    const configured =
      options.key !== undefined
        ? { text: options.key, source: "the custody key option" }
        : env !== undefined && env !== ""
          ? { text: env, source: CUSTODY_KEY_ENV }
          : undefined;
    // A malformed configured key stops start-up even before any key is stored.
    if (configured) parseKek(configured.text, configured.source);
    const kek = new KeyEncryptionKey(broker, join(options.data, CUSTODY_KEY_FILE), configured);
    await kek.verifyStored();
    return kek;
  }

  /** The KEK for encrypting or decrypting a custodial key; created on first use when none is set. */
  async get(): Promise<Buffer> {
    if (this.kek) return this.kek;
    const kek = this.configured
      ? parseKek(this.configured.text, this.configured.source)
      : ((await this.readFile()) ?? (await this.createFile()));
    const check: KekCheck = { custodyKekCheck: checkOf(kek), createdAt: new Date().toISOString() };
    try {
      await this.config.create(CHECK_KEY, check);
    } catch (err) {
      if (!isBrokerError(err, "exists")) throw err;
      // Another gateway stored the first key: this KEK must be the one it used.
      this.assertMatches(kek, (await this.config.get(CHECK_KEY))?.value, "");
    }
    this.kek = kek;
    return kek;
  }

  /** At start-up: with keys stored, the KEK must be there and be theirs. */
  private async verifyStored(): Promise<void> {
    const stored = (await this.config.get(CHECK_KEY))?.value;
    if (!stored) return;
    const kek = this.configured
      ? parseKek(this.configured.text, this.configured.source)
      : await this.readFile();
    if (!kek) {
      throw new CustodyKeyError(
        `keys sealed by this gateway ${SEALED_KINDS} are stored (since ${stored.createdAt}) ` +
          "but their key-encryption key is missing: " +
          `set ${CUSTODY_KEY_ENV} to it, or restore ${this.file} (with NATS every gateway needs the same key). ` +
          "Nothing was changed.",
      );
    }
    this.assertMatches(kek, stored, this.configured?.source ?? this.file);
    this.kek = kek;
  }

  private assertMatches(kek: Buffer, stored: KekCheck | undefined, source: string): void {
    if (!stored) return;
    const expected = Buffer.from(stored.custodyKekCheck, "hex");
    const actual = Buffer.from(checkOf(kek), "hex");
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) {
      throw new CustodyKeyError(
        `the custody key${source ? ` from ${source}` : ""} is not the one the stored sealed keys ${SEALED_KINDS} ` +
          `were encrypted with (since ${stored.createdAt}): give the original ${CUSTODY_KEY_ENV} or ${this.file}. ` +
          "Nothing was changed.",
      );
    }
  }

  private async readFile(): Promise<Buffer | undefined> {
    let text: string;
    try {
      text = await readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new CustodyKeyError(`cannot read the custody key ${this.file}: ${(err as Error).message}`);
    }
    return parseKek(text, this.file);
  }

  private async createFile(): Promise<Buffer> {
    const kek = randomBytes(32);
    await mkdir(dirname(this.file), { recursive: true });
    try {
      // `wx`: never replace a key file another process wrote meanwhile.
      await writeFile(this.file, `${kek.toString("base64url")}\n`, { mode: 0o600, flag: "wx" });
      await chmod(this.file, 0o600); // the umask may have narrowed the mode, never widened it
      return kek;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return (await this.readFile()) as Buffer;
      throw err;
    }
  }
}
