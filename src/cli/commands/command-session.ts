import { existsSync } from "node:fs";
import { AcpAgent, GatewayClient } from "../../client/index.js";
import { readIdentityFile } from "../../identity/index.js";
import {
  type ApprovalRecord,
  AuditLogCommandSink,
  defaultConfig,
  HttpApprovalStore,
  loadConfig,
  type OrchestrationConfig,
  Orchestrator,
} from "../../orchestration/index.js";
import { AcpError } from "../../protocol/index.js";
import { CliError, printLine } from "../io.js";
import { apiKeyOf, type GatewayFlags, gatewayOf, keyFileOf, stateOf } from "../shared.js";
import { CommandCacheFile } from "./command-cache.js";

/** Progress for people, on stderr (stdout carries the result). */
export const progress = (text: string) => process.stderr.write(`${text}\n`);

export interface CommonFlags extends GatewayFlags {
  config?: string;
}

async function configOf(file: string | undefined): Promise<OrchestrationConfig> {
  if (file !== undefined) return loadConfig(file);
  return existsSync("acp.yaml") ? loadConfig("acp.yaml") : defaultConfig();
}

export interface CommandSession {
  orch: Orchestrator;
  /** Aborts on Ctrl-C. */
  signal: AbortSignal;
  onApproval: (approval: ApprovalRecord) => void;
  /** Waits for background work, keeps the response cache, closes the audit log and the agent. */
  close(): Promise<void>;
}

/** An orchestrator acting as the key file's agent, with the given targets registered as remote agents. */
export async function openSession(flags: CommonFlags, targets: string[]): Promise<CommandSession> {
  const config = await configOf(flags.config);
  const gateway = gatewayOf(flags);
  const apiKey = apiKeyOf(flags);
  const identity = await readIdentityFile(keyFileOf(flags));
  const registry = new GatewayClient({ gateway, apiKey });
  // The permissions the gateway's admin granted each target: its registry capabilities.
  const granted = new Map<string, string[]>();
  for (const id of new Set(targets)) {
    try {
      granted.set(id, (await registry.getAgent(id)).capabilities);
    } catch (err) {
      if (err instanceof AcpError && err.kind === "NotFound")
        throw new CliError(`no agent ${id} is registered at ${gateway}`);
      throw err;
    }
  }
  // Only handshakes and replies: the rest of this agent's inbox stays queued for its real consumer.
  const agent = new AcpAgent({ gateway, identity, apiKey, consume: "replies", ...stateOf(flags) });
  agent.on("error", (err) => progress(`warning: ${err.message}`));
  await agent.connect();
  const audit = await AuditLogCommandSink.open({
    agent: `${identity.agentId}-commands`,
    principal: identity.principalId,
  });
  const cacheFile = await CommandCacheFile.open(identity.agentId, config);
  const orch = new Orchestrator({
    id: identity.agentId,
    principal: identity.principalId,
    config,
    cache: cacheFile.cache,
    audit,
    approvals: new HttpApprovalStore({ gateway, credential: apiKey }),
    onError: (err) => progress(`warning: ${err.message}`),
  });
  for (const [id, permissions] of granted) orch.addAgent({ id, remote: agent, permissions });
  const controller = new AbortController();
  const interrupt = () => controller.abort(new Error("interrupted (Ctrl-C)"));
  process.once("SIGINT", interrupt);
  return {
    orch,
    signal: controller.signal,
    // On stdout (the command's own output) unless that is reserved for --json: a wait of up to
    // approval_timeout must be visible wherever the output goes.
    onApproval: (approval: ApprovalRecord) => {
      const minutes = Math.round(config.security.approval_timeout / 60_000);
      const text = `waiting for approval ${approval.id} (${approval.reason}), up to ${minutes} min; approve with: acp approvals approve ${approval.id}`;
      if (flags.json) progress(text);
      else printLine(text);
    },
    close: async () => {
      process.off("SIGINT", interrupt);
      await orch.drain();
      await cacheFile.save();
      await audit.close();
      await agent.close();
    },
  };
}
