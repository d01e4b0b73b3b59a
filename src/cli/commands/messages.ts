import { randomUUID } from "node:crypto";
import type { Command } from "commander";
import { KeyFileError, readIdentityFile, readPublicIdentity } from "../../identity/index.js";
import {
  AcpError,
  createSigner,
  headersOf,
  importPublicKey,
  keyId,
  messageKind,
  parseMessageText,
  ReplayGuard,
  signMessage,
  validateMessage,
  verifyEnvelope,
} from "../../protocol/index.js";
import { CliError, printJson, printLine, readInput } from "../io.js";

/** Exit 1 with the JSON-RPC error object on stdout (for machines) and its message on stderr. */
function rejected(err: unknown, source: string): never {
  if (err instanceof AcpError) {
    const first = err.data.problems?.[0];
    const where = first ? ` (${first.path || "/"}: ${first.message})` : "";
    throw new CliError(
      `${source}: ${err.message} [${err.code}]${where}`,
      1,
      `${JSON.stringify(err.toJSON(), null, 2)}\n`,
    );
  }
  if (err instanceof KeyFileError) throw new CliError(err.message);
  throw err;
}

export function registerMessages(program: Command): void {
  program
    .command("validate [file]")
    .description(
      "check an ACP message against the protocol (exit 0 valid; else exit 1 and the JSON-RPC error)",
    )
    .option("--envelope", "also require what a relayed envelope needs (signature, message-id, recipient-id)")
    .option("--json", "print the result as JSON")
    .action(async (file: string | undefined, options: { envelope?: boolean; json?: boolean }) => {
      const { text, name } = await readInput(file);
      try {
        const message = validateMessage(parseMessageText(text), { envelope: options.envelope ?? false });
        const headers = headersOf(message);
        if (options.json)
          return printJson({ valid: true, kind: messageKind(message), from: headers?.["agent-id"] ?? null });
        printLine(`${name}: valid ${messageKind(message)}${headers ? ` from ${headers["agent-id"]}` : ""}`);
      } catch (err) {
        rejected(err, name);
      }
    });

  program
    .command("sign [file]")
    .description("sign an ACP message with an agent's key file and print the signed envelope")
    .requiredOption("--key <file>", "the agent's private key file (from acp keygen)")
    .option("--to <agent-id>", "set the recipient-id header (required if the message has none)")
    .option("--compact", "print the canonical one-line JSON instead of indented JSON")
    .action(async (file: string | undefined, options: { key: string; to?: string; compact?: boolean }) => {
      const identity = await readIdentityFile(options.key).catch((err) => rejected(err, options.key));
      const { text, name } = await readInput(file);
      try {
        const message = validateMessage(parseMessageText(text));
        const headers = headersOf(message);
        if (!headers)
          throw new CliError(`${name}: an unsigned gateway error cannot be signed; add error.data.headers`);
        if (headers["agent-id"] !== identity.agentId) {
          throw new CliError(
            `${name}: header agent-id is ${headers["agent-id"]} but ${options.key} belongs to ${identity.agentId}`,
          );
        }
        if (options.to) headers["recipient-id"] = options.to;
        if (!headers["recipient-id"])
          throw new CliError(`${name}: header recipient-id is missing; pass --to <agent-id>`);
        headers["message-id"] ??= randomUUID();
        const signed = signMessage(validateMessage(message, { envelope: false }), createSigner(identity));
        process.stdout.write(
          options.compact ? `${JSON.stringify(signed)}\n` : `${JSON.stringify(signed, null, 2)}\n`,
        );
      } catch (err) {
        rejected(err, name);
      }
    });

  program
    .command("verify [file]")
    .description("verify a signed ACP message (exit 0 valid; else exit 1 naming the reason)")
    .requiredOption(
      "--public-key <jwk-or-file>",
      "the signer's public identity (file or inline JSON); a key file works too",
    )
    .option("--fresh", "also require the timestamp within ±5 minutes of now (replay window)")
    .option("--recipient <agent-id>", "also require the message to be addressed to this agent")
    .option("--json", "print the result as JSON")
    .action(
      async (
        file: string | undefined,
        options: { publicKey: string; fresh?: boolean; recipient?: string; json?: boolean },
      ) => {
        const identity = await readPublicIdentity(options.publicKey).catch((err) =>
          rejected(err, options.publicKey),
        );
        const key = importPublicKey(identity.signing);
        const kid = keyId(identity.agentId, identity.signing);
        const { text, name } = await readInput(file);
        try {
          const verified = verifyEnvelope(parseMessageText(text), {
            resolveKey: (agentId, signedBy) =>
              agentId === identity.agentId && signedBy === kid ? key : undefined,
            ...(options.fresh ? { replay: new ReplayGuard() } : {}),
            ...(options.recipient ? { expectedRecipient: options.recipient } : {}),
          });
          if (options.json)
            return printJson({ valid: true, kid: verified.kid, messageId: verified.headers["message-id"] });
          printLine(
            `${name}: valid signature by ${verified.kid} (message ${verified.headers["message-id"]} to ${verified.headers["recipient-id"]})`,
          );
        } catch (err) {
          rejected(err, name);
        }
      },
    );
}
