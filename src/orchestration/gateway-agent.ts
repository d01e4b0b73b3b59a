/**
 * One of the gateway's own ACP agents (the MCP endpoint's bridge, the collaboration's notary):
 * registered under a name unique to this gateway start when it is first needed, connected in
 * process (in-process-agent.ts: its API key never leaves the gateway), and revoked when the
 * gateway closes. The gateway signs as such an agent when the message is its own doing, not a
 * registered agent's.
 */
import { AcpAgent } from "../client/agent.js";
import type { AcpAgentOptions } from "../client/types.js";
import type { GatewayContext } from "../gateway/context.js";
import { AcpError, generateIdentity, type PrivateIdentity, publicIdentity } from "../protocol/index.js";
import { registrationOf } from "../wire/agents.js";
import { inProcessAgentOptions } from "./in-process-agent.js";

export interface GatewayAgentOptions {
  /** Unique to this gateway start (embed the gateway id): registering it cannot collide. */
  agentId: string;
  principalId: string;
  /** Registered, and announced in its handshakes. */
  capabilities: string[];
  /** The purpose of its handshakes' announce. */
  purpose: string;
  /** The rest of the AcpAgent's options (audit, timeouts); identity and connection are set here. */
  agent?: Omit<AcpAgentOptions, "gateway" | "identity" | "apiKey" | "connection" | "directory" | "announce">;
  /** Handlers to install before it connects (messages queued for it arrive at once). */
  prepare?: (agent: AcpAgent) => void;
}

export class GatewayAgent {
  #agent: Promise<AcpAgent> | undefined;
  #registration: Promise<{ identity: PrivateIdentity; apiKey: string }> | undefined;
  #closed = false;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly options: GatewayAgentOptions,
  ) {}

  get agentId(): string {
    return this.options.agentId;
  }

  /** The connected agent; registered and connected on first use, a failed start retried by the next call. */
  agent(): Promise<AcpAgent> {
    if (this.#closed) return Promise.reject(new AcpError("Cancelled", "the gateway is closing"));
    this.#agent ??= this.#connect().catch((err: unknown) => {
      this.#agent = undefined;
      throw err;
    });
    return this.#agent;
  }

  /** Closes the agent (what it was waiting for is cancelled) and revokes its registration. */
  async close(): Promise<void> {
    this.#closed = true;
    const started = this.#agent;
    this.#agent = undefined;
    const agent = await started?.catch(() => undefined);
    await agent?.close();
    if (this.#registration) await this.ctx.registry.revoke(this.agentId).catch(() => undefined);
  }

  async #connect(): Promise<AcpAgent> {
    this.#registration ??= this.#register().catch((err: unknown) => {
      this.#registration = undefined;
      throw err;
    });
    const { identity, apiKey } = await this.#registration;
    const agent = new AcpAgent({
      state: false,
      ...this.options.agent,
      ...inProcessAgentOptions(this.ctx),
      identity,
      apiKey,
      announce: { capabilities: this.options.capabilities, purpose: this.options.purpose },
    });
    agent.on("error", (err) =>
      this.ctx.logger.debug({ err: err.message, agent: this.agentId }, "gateway agent error"),
    );
    this.options.prepare?.(agent);
    await agent.connect();
    this.ctx.logger.info({ agent: this.agentId }, "gateway agent connected");
    return agent;
  }

  async #register(): Promise<{ identity: PrivateIdentity; apiKey: string }> {
    const identity = generateIdentity(this.agentId, this.options.principalId);
    const { apiKey } = await this.ctx.registry.register({
      ...registrationOf(publicIdentity(identity)),
      capabilities: this.options.capabilities,
    });
    return { identity, apiKey };
  }
}
