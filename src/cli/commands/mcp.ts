import { type Command, InvalidArgumentError, Option } from "commander";
import type { AgentDescriptor, AgentRunEvent, AgentsClient, JsonValue, Transport } from "../../mcp/index.js";
import { CliError, parseJsonInput, printJson, printLine, readInput } from "../io.js";
import { wholeNumber } from "../option-parsers.js";

// The MCP SDK is loaded only when an mcp command runs, so it does not slow down every `acp` start.
const loadMcp = () => import("../../mcp/index.js");

interface CallOptions {
  list?: boolean;
  input?: string;
  inputFile?: string;
  url?: string;
  apiKey?: string;
  timeout: number;
  json?: boolean;
}

interface ServeOptions {
  demo?: boolean;
  pageSize?: number;
  quiet?: boolean;
  coordinationRoot?: string;
  gateway?: string;
  apiKey?: string;
  keyFile?: string;
  layers?: number[];
  pingInterval?: number;
}

export function registerMcp(program: Command): void {
  const mcp = program
    .command("mcp")
    .description(
      "the MCP `agents` capability: serve agents to MCP clients, list and run agents of MCP servers",
    );

  mcp
    .command("call")
    .description("list or run the agents of an MCP server, printing streamed deltas as they arrive")
    .argument("[agent]", "name of the agent to run")
    .argument("[server-command...]", "after --: the command that starts a stdio MCP server")
    .option("--list", "list the server's agents")
    .option("--input <json>", "the agent's input, as JSON")
    .option("--input-file <file>", "read the agent's input (JSON) from a file, - for stdin")
    .option("--url <url>", "an MCP server over Streamable HTTP (instead of -- COMMAND)")
    .addOption(new Option("--api-key <key>", "API key sent as X-API-Key with --url").env("ACP_API_KEY"))
    .option("--timeout <ms>", "give up after this long without any delta or result", wholeNumber(1), 60_000)
    .option("--json", "machine output: one JSON object per line ({delta}… then {output}), or the list")
    .addHelpText(
      "after",
      "\nExamples:\n  acp mcp call --list -- acp mcp serve --demo\n" +
        "  acp mcp call count --input '{\"to\":5}' -- acp mcp serve --demo\n" +
        "  acp mcp call --url http://127.0.0.1:8080/mcp --api-key KEY --list",
    )
    .action(async function (
      this: Command,
      agent: string | undefined,
      serverCommand: string[],
      options: CallOptions,
    ) {
      await runCall(rootArgs(this), agent, serverCommand, options);
    });

  mcp
    .command("serve")
    .description("serve agents over stdio, for desktop MCP clients (and `acp mcp call -- …`)")
    .option("--demo", "serve the built-in example agents: echo, count, summarize-text")
    .option("--page-size <n>", "agents per agents/list page", wholeNumber(1))
    .option(
      "--coordination-root <dir>",
      "serve the coordination sessions under DIR as coordination:// resources",
    )
    .option("--gateway <url>", "serve a gateway's MCP endpoint: its agents, your tasks, its resources")
    .addOption(new Option("--api-key <key>", "the agent's API key, with --gateway").env("ACP_API_KEY"))
    .option("--key-file <file>", "with --gateway: the agent's key file, to sign what the task tools change")
    .option("--layers <list>", "skill layers declared on signed messages (default 0,1)", parseLayers)
    .addOption(
      new Option("--ping-interval <ms>", "keep the gateway session alive with a ping this often")
        .argParser(wholeNumber(1))
        .default(60_000)
        .hideHelp(),
    )
    .option("--quiet", "do not log runs on stderr")
    .addHelpText(
      "after",
      "\nExamples:\n  acp mcp serve --demo\n  acp mcp serve --coordination-root .claude/agents/context\n" +
        "  acp mcp serve --gateway https://gw.example.org --api-key KEY --key-file agent.json",
    )
    .action(async (options: ServeOptions) => {
      await runServe(options);
    });
}

async function runCall(
  rawArgs: string[],
  agentArg: string | undefined,
  serverArgs: string[],
  options: CallOptions,
): Promise<void> {
  // Commander fills [agent] from operands after `--` too; only what precedes `--` is ours.
  const dashDash = rawArgs.indexOf("--");
  const command = dashDash === -1 ? [] : rawArgs.slice(dashDash + 1);
  const operands = [...(agentArg === undefined ? [] : [agentArg]), ...serverArgs];
  const ownOperands = operands.slice(0, operands.length - command.length);
  if (ownOperands.length > 1) throw new CliError(`expected one agent name, got: ${ownOperands.join(" ")}`);
  const agent = ownOperands[0];
  if (options.list && agent !== undefined)
    throw new CliError("give either --list or an agent to run, not both");
  if (!options.list && agent === undefined) throw new CliError("name an agent to run, or pass --list");
  if (options.url !== undefined && command.length > 0)
    throw new CliError("give either --url or -- COMMAND, not both");
  if (options.url === undefined && command.length === 0) {
    throw new CliError("which MCP server? pass --url URL, or -- COMMAND [ARGS…] to start one over stdio");
  }
  if (options.input !== undefined && options.inputFile !== undefined) {
    throw new CliError("give either --input or --input-file, not both");
  }
  const input = agent === undefined ? undefined : await readAgentInput(options);

  const client = await connect(options, command);
  try {
    if (!client.hasAgentsCapability) {
      const declared = Object.keys(client.serverCapabilities).join(", ") || "none";
      throw new CliError(`the MCP server does not declare the agents capability (it declares: ${declared})`);
    }
    if (agent === undefined) await printAgents(await client.listAgents(), options.json === true);
    else await runAndPrint(client, agent, input, options);
  } finally {
    await client.close();
  }
}

async function readAgentInput(options: CallOptions): Promise<JsonValue | undefined> {
  if (options.input !== undefined) return parseJsonInput(options.input, "--input") as JsonValue;
  if (options.inputFile !== undefined) {
    const { text, name } = await readInput(options.inputFile);
    return parseJsonInput(text, `--input-file ${name}`) as JsonValue;
  }
  return undefined;
}

async function connect(options: CallOptions, command: string[]): Promise<AgentsClient> {
  const { AgentsClient, stdioClientTransport, streamableHttpClientTransport } = await loadMcp();
  let transport: Transport;
  let target: string;
  if (options.url !== undefined) {
    try {
      transport = streamableHttpClientTransport(options.url, {
        ...(options.apiKey !== undefined && { apiKey: options.apiKey }),
      });
    } catch {
      throw new CliError(`--url: ${JSON.stringify(options.url)} is not a valid URL`);
    }
    target = options.url;
  } else {
    const [program = "", ...args] = command;
    const env = Object.fromEntries(
      Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined),
    );
    transport = stdioClientTransport({ command: program, args, env, stderr: "inherit" });
    target = command.join(" ");
  }
  try {
    return await AgentsClient.connect(transport);
  } catch (err) {
    throw new CliError(`cannot connect to the MCP server (${target}): ${(err as Error).message}`);
  }
}

async function printAgents(agents: AgentDescriptor[], json: boolean): Promise<void> {
  if (json) return printJson({ agents });
  const width = Math.max(4, ...agents.map((agent) => agent.name.length));
  for (const agent of agents) {
    printLine(`${agent.name.padEnd(width)}  ${agent.description ?? ""}`.trimEnd());
    printLine(
      `${" ".repeat(width)}  input ${describeSchema(agent.inputSchema)} → output ${describeSchema(agent.outputSchema)}`,
    );
  }
  printLine(`${agents.length} agent${agents.length === 1 ? "" : "s"}`);
}

async function runAndPrint(
  client: AgentsClient,
  agent: string,
  input: JsonValue | undefined,
  options: CallOptions,
): Promise<void> {
  const { AgentsRpcError } = await loadMcp();
  const json = options.json === true;
  const interrupt = new AbortController();
  const onSigint = () => interrupt.abort(new CliError(`interrupted: agents/run "${agent}" cancelled`, 130));
  process.once("SIGINT", onSigint);
  try {
    const output = await client.runAgent(agent, input, {
      signal: interrupt.signal,
      timeoutMs: options.timeout,
      onDelta: (delta) => {
        if (json) process.stdout.write(`${JSON.stringify({ delta })}\n`);
        else process.stderr.write(`delta ${JSON.stringify(delta)}\n`);
      },
    });
    if (json) process.stdout.write(`${JSON.stringify({ output })}\n`);
    else printJson(output);
  } catch (err) {
    if (err instanceof AgentsRpcError) {
      const stdout = json
        ? `${JSON.stringify({ error: { code: err.code, message: err.message, data: err.data } })}\n`
        : undefined;
      throw new CliError(`agents/run "${agent}" failed (${err.code}): ${err.message}`, 1, stdout);
    }
    throw err;
  } finally {
    process.off("SIGINT", onSigint);
  }
}

/** `{text: string, n?: integer}`: a one-line reading of a JSON Schema for the list. */
function describeSchema(schema: Record<string, unknown>): string {
  const properties = schema.properties;
  if (schema.type === "object" && typeof properties === "object" && properties !== null) {
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const fields = Object.entries(properties as Record<string, Record<string, unknown>>).map(
      ([name, property]) => `${name}${required.has(name) ? "" : "?"}: ${describeType(property)}`,
    );
    return `{${fields.join(", ")}}`;
  }
  return describeType(schema);
}

function describeType(schema: Record<string, unknown>): string {
  if (schema.type === "array" && typeof schema.items === "object" && schema.items !== null) {
    return `${describeType(schema.items as Record<string, unknown>)}[]`;
  }
  return typeof schema.type === "string" ? schema.type : "any";
}

async function runServe(options: ServeOptions): Promise<void> {
  const log = (line: string) => {
    if (!options.quiet) process.stderr.write(`acp mcp serve: ${line}\n`);
  };
  if (options.gateway !== undefined) return runGatewayProxy(options, log);
  if (options.keyFile !== undefined)
    throw new CliError("--key-file signs for a gateway's task tools: use it with --gateway URL");
  if (!options.demo && options.coordinationRoot === undefined) {
    throw new CliError(
      "nothing to serve: pass --demo (the example agents), --coordination-root DIR (coordination sessions) or --gateway URL (a gateway's agents and tasks)",
    );
  }
  const { AgentRegistry, addAgentTools, createAgentsMcpServer } = await loadMcp();
  const { createDemoAgents } = await import("../../mcp/demo.js");
  const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
  const pageSize = options.pageSize === undefined ? {} : { pageSize: options.pageSize };
  const agents = options.demo ? createDemoAgents(pageSize) : new AgentRegistry(pageSize);
  const onRunEvent = (event: AgentRunEvent) => log(describeRunEvent(event));
  const server = createAgentsMcpServer({
    name: options.demo ? "acp-kit-demo" : "acp-kit",
    version: "0.1.0",
    agents,
    onRunEvent,
  });
  // Hosts that show a model only tools reach the agents through list_agents and ask_agent.
  if (options.demo) addAgentTools(server, agents, { onRunEvent });
  if (options.coordinationRoot !== undefined) {
    const { addCoordinationResources } = await import("../../mcp/coordination.js");
    const { ResourceSubscriptions } = await import("../../mcp/subscriptions.js");
    addCoordinationResources(server, new ResourceSubscriptions(server), { root: options.coordinationRoot });
  }
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = resolve;
  });
  await server.connect(new StdioServerTransport());
  const served = [
    ...(options.demo ? [`${agents.size} demo agents`] : []),
    ...(options.coordinationRoot !== undefined
      ? [`the coordination sessions under ${options.coordinationRoot}`]
      : []),
  ];
  log(`serving ${served.join(" and ")} over stdio`);
  // The client closing our stdin ends the session; so do the usual signals.
  const stop = () => void server.close();
  process.stdin.once("end", stop);
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  await closed;
}

/** Passes a desktop client's stdio session through to the gateway's MCP endpoint (signing with --key-file). */
async function runGatewayProxy(options: ServeOptions, log: (line: string) => void): Promise<void> {
  if (options.demo || options.coordinationRoot !== undefined) {
    throw new CliError("--gateway serves what the gateway offers: leave out --demo and --coordination-root");
  }
  if (!options.apiKey)
    throw new CliError("--gateway needs the agent's API key: --api-key KEY or ACP_API_KEY");
  const { gatewayMcpUrl, proxyToGateway } = await import("../../mcp/proxy.js");
  let url: URL;
  try {
    url = gatewayMcpUrl(options.gateway as string);
  } catch {
    throw new CliError(`--gateway: ${JSON.stringify(options.gateway)} is not a URL`);
  }
  const identity = options.keyFile === undefined ? undefined : await readKeyFile(options.keyFile);
  const health = await fetch(new URL("/healthz", url)).catch((err: Error) => err);
  if (health instanceof Error) {
    throw new CliError(
      `cannot reach the gateway at ${url.origin} (${(health.cause as Error | undefined)?.message ?? health.message})`,
    );
  }
  if (health.status === 503) {
    // Degraded (e.g. its disk is full): serve anyway, runs may fail until it recovers; say why.
    const report = (await health.json().catch(() => ({}))) as { detail?: Record<string, string> };
    const causes = Object.values(report.detail ?? {}).join("; ");
    log(`warning: the gateway at ${url.origin} reports itself degraded${causes ? ` (${causes})` : ""}`);
  }
  const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
  const proxy = await proxyToGateway(new StdioServerTransport(), {
    gateway: url.href,
    apiKey: options.apiKey,
    ...(identity !== undefined && { identity }),
    ...(options.layers !== undefined && { layers: options.layers }),
    ...(options.pingInterval !== undefined && { pingIntervalMs: options.pingInterval }),
    log,
  });
  log(`serving ${url.href} over stdio${identity ? `, signing task changes as ${identity.agentId}` : ""}`);
  // The desktop client closing our stdin ends the session; so do the usual signals.
  const stop = (why: string) => () => {
    log(`${why}: closing the gateway session and exiting`);
    void proxy.close();
  };
  process.stdin.once("end", stop("the MCP client closed stdin"));
  process.once("SIGTERM", stop("SIGTERM"));
  process.once("SIGINT", stop("SIGINT"));
  await proxy.closed;
}

async function readKeyFile(file: string) {
  const { readIdentityFile } = await import("../../identity/index.js");
  try {
    return await readIdentityFile(file);
  } catch (err) {
    throw new CliError(`--key-file: ${(err as Error).message}`);
  }
}

function parseLayers(value: string): number[] {
  const layers = value.split(",").map((part) => Number(part.trim()));
  if (layers.length === 0 || layers.some((layer) => !Number.isInteger(layer) || layer < 0)) {
    throw new InvalidArgumentError(`expected comma-separated non-negative integers, got "${value}"`);
  }
  return layers;
}

function describeRunEvent(event: AgentRunEvent): string {
  switch (event.type) {
    case "started":
      return `run ${event.agent} started${event.streaming ? " (streaming)" : ""}`;
    case "completed":
      return `run ${event.agent} completed after ${event.deltas} deltas`;
    case "failed":
      return `run ${event.agent} failed: ${event.error}`;
    case "cancelled":
      return `run ${event.agent} cancelled after ${event.deltas} deltas`;
  }
}

/** The argv the program parsed (commander keeps it, untyped, on the root command). */
function rootArgs(command: Command): string[] {
  let root = command;
  while (root.parent !== null) root = root.parent;
  return (root as Command & { rawArgs?: string[] }).rawArgs ?? process.argv;
}
