import type { Command } from "commander";
import { KeyFileError, writeIdentityFile } from "../../identity/index.js";
import { AgentId, generateIdentity, PrincipalId, publicIdentity } from "../../protocol/index.js";
import { CliError, printJson, printLine } from "../io.js";

export function registerKeys(program: Command): void {
  program
    .command("keygen")
    .description("create an agent's Ed25519 signing and X25519 encryption keys; prints the public identity")
    .requiredOption("--agent-id <id>", "the agent's id (A-Z a-z 0-9 _ -)")
    .requiredOption("--principal-id <id>", "the human principal the agent acts for")
    .requiredOption("--out <file>", "private key file to create (mode 0600; never overwritten)")
    .option("--json", "print the public identity as JSON only")
    .action(async (options: { agentId: string; principalId: string; out: string; json?: boolean }) => {
      for (const [flag, schema, value] of [
        ["--agent-id", AgentId, options.agentId],
        ["--principal-id", PrincipalId, options.principalId],
      ] as const) {
        const parsed = schema.safeParse(value);
        if (!parsed.success) {
          throw new CliError(`invalid ${flag} ${JSON.stringify(value)}: ${parsed.error.issues[0]?.message}`);
        }
      }
      const identity = generateIdentity(options.agentId, options.principalId);
      try {
        await writeIdentityFile(options.out, identity);
      } catch (err) {
        if (err instanceof KeyFileError) throw new CliError(err.message);
        throw err;
      }
      const pub = publicIdentity(identity);
      if (options.json) return printJson(pub);
      printLine(
        `wrote private keys for ${identity.agentId} (principal ${identity.principalId}) to ${options.out} (mode 0600)`,
      );
      printLine(`signing key id: ${pub.signing.kid}`);
      printLine("public identity (share this; register it at a gateway):");
      printJson(pub);
    });
}
