import type { Command } from "commander";
import { SignedAgreement, verifyAgreement } from "../../collab/agreement.js";
import { KeyFileError, readPublicIdentity } from "../../identity/index.js";
import type { PublicIdentity } from "../../protocol/index.js";
import { CliError, parseJsonInput, printJson, printLine, readInput } from "../io.js";
import { collect } from "./negotiate.js";

export function registerAgreement(program: Command): void {
  const agreement = program.command("agreement").description("negotiated agreements, signed by both parties");
  agreement
    .command("verify [file]")
    .description(
      "check an agreement offline: both parties' Ed25519 signatures over exactly these terms (exit 1 if not)",
    )
    .option(
      "--key <file>",
      "a party's public identity (or key file) its listed key must match (repeatable; default: trust the listed keys)",
      collect,
      [],
    )
    .option("--json", "machine-readable output")
    .action(async (file: string | undefined, flags: { key: string[]; json?: boolean }) => {
      const input = await readInput(file);
      const document = parseJsonInput(input.text, input.name);
      let keys: PublicIdentity[];
      try {
        keys = await Promise.all(flags.key.map((k) => readPublicIdentity(k)));
      } catch (err) {
        if (err instanceof KeyFileError) throw new CliError(err.message);
        throw err;
      }
      const check = verifyAgreement(document, keys);
      if (flags.json) printJson(check);
      if (!check.valid) {
        const lines = check.problems.map((p) => `  ${p.path || "/"}: ${p.message}`).join("\n");
        throw new CliError(flags.json ? "" : `${input.name}: the agreement does NOT verify:\n${lines}`);
      }
      if (flags.json) return;
      const d = SignedAgreement.parse(document).document;
      printLine(`${input.name}: valid agreement of negotiation ${d.sessionId}`);
      printLine(
        `  signed by ${d.parties.map((p) => `${p.agentId} (principal ${p.principalId})`).join(" and ")}`,
      );
      printLine(`  terms     ${JSON.stringify(d.terms)}`);
      if (keys.length === 0)
        printLine("  (keys as listed in the file; pass --key to pin them to known public identities)");
    });
}
