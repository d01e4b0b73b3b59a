import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { requestGatewayJson } from "../../client/request.js";
import {
  A2A_REMOTE_AGENTS_PATH as OUTBOUND_PATH,
  type OutboundAgentAnswer,
} from "../../wire/a2a-outbound.js";
import { restRecord } from "../../wire/deprecated-names.js";
import { CliError, printJson, printLine } from "../io.js";
import { adminTokenOf, type GatewayFlags, gatewayOf, guarded, withGatewayOptions } from "../shared.js";

const collect = (value: string, previous: string[]) => [...previous, value];

type AddFlags = GatewayFlags & {
  id?: string;
  principal?: string;
  cardKey: string[];
  header: string[];
  headerEnv: string[];
  bearerEnv?: string;
  endpointOrigin?: string;
};

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

/**
 * `--header "Name: value"`, `--header-env "Name: VAR"` (both repeatable) and `--bearer-env VAR` as
 * the registration's credentials. The `-env` forms read the value from the environment, so it is
 * not in the process list. Errors never repeat a value: it may be a secret.
 */
export function credentialsOf(
  flags: { header?: string[]; headerEnv?: string[]; bearerEnv?: string | undefined },
  env: NodeJS.ProcessEnv = process.env,
): { headers?: Record<string, string>; bearer?: string } | undefined {
  const given: Record<string, string> = {};
  const add = (flag: "--header" | "--header-env", i: number, text: string) => {
    const colon = text.indexOf(":");
    const name = colon === -1 ? "" : text.slice(0, colon).trim();
    const after = colon === -1 ? "" : text.slice(colon + 1).trim();
    if (name === "" || after === "") {
      const example = flag === "--header" ? '"X-API-Key: …"' : '"X-API-Key: BILLING_KEY"';
      const shape = flag === "--header" ? '"Name: value"' : '"Name: VARIABLE"';
      throw new CliError(`${flag} (the ${ordinal(i + 1)}): expected ${shape}, e.g. ${flag} ${example}`);
    }
    if (name in given) throw new CliError(`${flag} ${name}: given twice`);
    given[name] = flag === "--header" ? after : fromEnv(`${flag} ${name}`, after, env);
  };
  const headers = flags.header ?? [];
  const headerEnvs = flags.headerEnv ?? [];
  for (const [i, header] of headers.entries()) add("--header", i, header);
  for (const [i, header] of headerEnvs.entries()) add("--header-env", i, header);
  const bearer =
    flags.bearerEnv === undefined
      ? undefined
      : fromEnv(`--bearer-env ${flags.bearerEnv}`, flags.bearerEnv, env);
  const named = headers.length + headerEnvs.length > 0;
  if (!named && bearer === undefined) return undefined;
  return { ...(named && { headers: given }), ...(bearer !== undefined && { bearer }) };
}

function fromEnv(flag: string, variable: string, env: NodeJS.ProcessEnv): string {
  const value = env[variable]?.trim();
  if (value === undefined || value === "")
    throw new CliError(`${flag}: the environment variable ${variable} is not set (or empty)`);
  return value;
}

const ordinal = (n: number) => `${n}${n === 1 ? "st" : n === 2 ? "nd" : n === 3 ? "rd" : "th"}`;

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
    .option(
      "--header <name: value>",
      "a header the A2A agent requires (e.g. its API key), sent on the card fetch and every call; sealed at the gateway (repeatable)",
      collect,
      [],
    )
    .option(
      "--header-env <name: var>",
      "like --header, with the value read from this environment variable (kept out of the process list; repeatable)",
      collect,
      [],
    )
    .option("--bearer-env <var>", "send the token in this environment variable as Authorization: Bearer")
    .option(
      "--endpoint-origin <origin>",
      "accept a card whose JSON-RPC endpoint is on this other origin (e.g. https://api.example.com): the credentials and callers' text go there",
    )
    .action((url: string, flags: AddFlags) =>
      guarded(flags, async () => {
        const credentials = credentialsOf(flags);
        const cardKeys = (await Promise.all(flags.cardKey.map(readCardKeys))).flat();
        const gateway = gatewayOf(flags);
        const record = (await requestGatewayJson(gateway, "POST", OUTBOUND_PATH, {
          headers: { authorization: `Bearer ${adminTokenOf(flags)}` },
          body: {
            url,
            ...(flags.id ? { agent_id: flags.id } : {}),
            ...(flags.principal ? { principal_id: flags.principal } : {}),
            ...(cardKeys.length > 0 ? { card_keys: cardKeys } : {}),
            ...(credentials ? { credentials } : {}),
            ...(flags.endpointOrigin ? { endpoint_origin: flags.endpointOrigin } : {}),
          },
        }).then(restRecord)) as OutboundAgentAnswer;
        if (flags.json) return printJson(record); // warnings included
        const signature = record.signature.signed
          ? `signed card verified (key ${record.signature.kid ?? "?"}, ${record.signature.key_source})`
          : "unsigned card";
        printLine(
          `registered A2A agent "${record.name}" as ${record.agent_id} (principal ${record.principal_id})`,
        );
        printLine(`  card      ${record.card_url} (${signature})`);
        printLine(`  endpoint  ${record.endpoint} (${record.streaming ? "streaming" : "SendMessage"})`);
        printLine(`  skills    ${record.skills.join(", ") || "-"}`);
        if (record.credentials)
          printLine(`  sends     ${record.credentials.join(", ")} (sealed at the gateway)`);
        for (const warning of record.warnings ?? []) process.stderr.write(`warning: ${warning}\n`);
      }),
    );

  withGatewayOptions(
    agent
      .command("remove-a2a <agent-id>")
      .description("stop answering for an A2A agent and revoke its agent id"),
    ["admin-token"],
  ).action((agentId: string, flags: GatewayFlags) =>
    guarded(flags, async () => {
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
