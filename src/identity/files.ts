import { chmod, readFile, writeFile } from "node:fs/promises";
import type { z } from "zod";
import { PrivateIdentity, PublicIdentity, publicIdentity } from "../protocol/index.js";

/**
 * Key files. A private identity file holds both private JWKs and is written with mode 0600 (and
 * refused if it already exists, so keygen never overwrites a key). Public identities are plain JSON
 * that may be shared freely.
 */
export class KeyFileError extends Error {
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
    this.name = "KeyFileError";
  }
}

/**
 * Writes a private identity as a key file, mode 0600. Never overwrites: an existing file is a
 * KeyFileError, so a key cannot be lost by a repeated `acp keygen`.
 */
export async function writeIdentityFile(file: string, identity: PrivateIdentity): Promise<void> {
  try {
    await writeFile(file, `${JSON.stringify(identity, null, 2)}\n`, { mode: 0o600, flag: "wx" });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new KeyFileError(
      file,
      code === "EEXIST" ? "already exists; refusing to overwrite a key" : `cannot write (${code})`,
    );
  }
  await chmod(file, 0o600);
}

async function readJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new KeyFileError(file, `cannot read (${(err as NodeJS.ErrnoException).code})`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new KeyFileError(file, `not valid JSON (${(err as Error).message})`);
  }
}

/** "field signing.d: is missing", naming the first wrong field of a key file. */
function fieldProblem(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid";
  const missing = issue.code === "invalid_type" && issue.message.endsWith("received undefined");
  return `field ${issue.path.join(".") || "(root)"}: ${missing ? "is missing" : issue.message}`;
}

/** Reads a private key file (`acp keygen`); a KeyFileError names the file and the bad field. */
export async function readIdentityFile(file: string): Promise<PrivateIdentity> {
  const parsed = PrivateIdentity.safeParse(await readJson(file));
  if (!parsed.success) throw new KeyFileError(file, fieldProblem(parsed.error));
  return parsed.data;
}

/**
 * Reads a public identity from a file, or from inline JSON. A private key file is accepted too and
 * reduced to its public part, so `--public-key` can point at either.
 */
export async function readPublicIdentity(fileOrJson: string): Promise<PublicIdentity> {
  const trimmed = fileOrJson.trim();
  const source = trimmed.startsWith("{") ? "<inline JSON>" : fileOrJson;
  let value: unknown;
  if (source === "<inline JSON>") {
    try {
      value = JSON.parse(trimmed);
    } catch (err) {
      throw new KeyFileError(source, `not valid JSON (${(err as Error).message})`);
    }
  } else {
    value = await readJson(fileOrJson);
  }
  const signing = (value as { signing?: unknown } | null)?.signing;
  if (typeof signing === "object" && signing !== null && "d" in signing) {
    const asPrivate = PrivateIdentity.safeParse(value);
    if (!asPrivate.success) throw new KeyFileError(source, fieldProblem(asPrivate.error));
    return publicIdentity(asPrivate.data);
  }
  const asPublic = PublicIdentity.safeParse(value);
  if (!asPublic.success) throw new KeyFileError(source, fieldProblem(asPublic.error));
  return asPublic.data;
}
