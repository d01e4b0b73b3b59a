import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { requestGatewayJson } from "../../client/request.js";
import {
  A2A_REMOTE_AGENTS_PATH as OUTBOUND_PATH,
  type OutboundAgentRecord,
} from "../../wire/a2a-outbound.js";
import { CliError, printJson, printLine } from "../io.js";
import { adminTokenOf, failed, type GatewayFlags, gatewayOf, withGatewayOptions } from "./agent.js";

const collect = (value: string, previous: string[]) => [...previous, value];

/** A public JWK, or a JWKS (`{"keys": [...]}`), from a file: the keys a signed card must verify with. */
async function readCardKeys(file: string): Promise<Record<string, unknown>[]> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new CliError(`${file}: not a readable JSON file (${(err as Error).message})`);
  }
  const keys = (value as { keys?: unknown })?.keys ?? [value];
  if (!Array.isArray(keys) || keys.length === 0)
    throw new CliError(`${file}: field keys: must list at least one JWK`);
  for (const [i, key] of keys.entries()) {
    if (typeof key !== "object" || key === null || typeof (key as { kty?: unknown }).kty !== "string") {
      throw new CliError(
        `${file}: field ${Array.isArray((value as { keys?: unknown }).keys) ? `keys.${i}.` : ""}kty: a JWK needs kty`,
      );
    }
    if ("d" in key) throw new CliError(`${file}: field d: this is a private key; give the public key only`);
  }
  return keys as Record<string, unknown>[];
}

/** `acp agent add-a2a <url>` and `acp agent remove-a2a <agent-id>` (admin): external A2A agents as ACP agent ids. */
export function registerA2ACommands(agent: Command): void {
  withGatewayOptions(
    agent
      .command("add-a2a <url>")
      .description(
        "make an external A2A agent addressable as an ACP agent: the gateway fetches and checks its agent card (a signed card must verify) and answers for it through its bridge",
      ),
    ["admin-token"],
  )
    .option("--id <agent-id>", "the ACP agent id (default: a2a-<card name>)")
    .option("--principal <id>", "the principal it acts for (default: a2a:<host of the card>)")
    .option("--card-key <file>", "public JWK or JWKS the card must be signed with (repeatable)", collect, [])
    .action((url: string, flags: GatewayFlags & { id?: string; principal?: string; cardKey: string[] }) =>
      run(flags, async () => {
        const cardKeys = (await Promise.all(flags.cardKey.map(readCardKeys))).flat();
        const gateway = gatewayOf(flags);
        const record = (await requestGatewayJson(gateway, "POST", OUTBOUND_PATH, {
          headers: { authorization: `Bearer ${adminTokenOf(flags)}` },
          body: {
            url,
            ...(flags.id ? { agentId: flags.id } : {}),
            ...(flags.principal ? { principalId: flags.principal } : {}),
            ...(cardKeys.length > 0 ? { cardKeys } : {}),
          },
        })) as OutboundAgentRecord;
        if (flags.json) return printJson(record);
        const signature = record.signature.signed
          ? `signed card verified (key ${record.signature.kid ?? "?"}, ${record.signature.keySource})`
          : "unsigned card";
        printLine(
          `registered A2A agent "${record.name}" as ${record.agentId} (principal ${record.principalId})`,
        );
        printLine(`  card      ${record.cardUrl} (${signature})`);
        printLine(`  endpoint  ${record.endpoint} (${record.streaming ? "streaming" : "SendMessage"})`);
        printLine(`  skills    ${record.skills.join(", ") || "-"}`);
      }),
    );

  withGatewayOptions(
    agent
      .command("remove-a2a <agent-id>")
      .description("stop answering for an A2A agent and revoke its agent id"),
    ["admin-token"],
  ).action((agentId: string, flags: GatewayFlags) =>
    run(flags, async () => {
      const removed = await requestGatewayJson(
        gatewayOf(flags),
        "DELETE",
        `${OUTBOUND_PATH}/${encodeURIComponent(agentId)}`,
        {
          headers: { authorization: `Bearer ${adminTokenOf(flags)}` },
        },
      );
      if (flags.json) return printJson(removed);
      printLine(`removed A2A agent ${agentId}`);
    }),
  );
}

async function run(flags: GatewayFlags, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    failed(err, flags.json);
  }
}
