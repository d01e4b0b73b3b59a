/**
 * The gateway-held ACP identities that A2A calls are signed with. An A2A client cannot sign ACP
 * messages, so the gateway signs for it: one bridge agent per calling client (the API key's agent,
 * or the admin), whose principal names that client (`a2a-client:agent:<agent id>`,
 * `a2a-client:admin`: A2ACaller). A target that does not
 * know that principal treats it as an unknown principal (trust calibration, docs/a2a.md).
 *
 * With a data directory, each bridge identity and its API key live in
 * `<data>/a2a-bridge/<agent-id>.json` (mode 0600, sealed with the gateway's key-encryption key like
 * every secret it keeps at rest; a file in the clear is sealed in place) and its completed handshakes
 * in `<data>/a2a-bridge/state/`, so a restarted gateway reuses them: the handshake happens once.
 * Without one they live in memory and the agents are revoked when the gateway closes.
 */
import { createHash, randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { z } from "zod";
import { AcpAgent } from "../../../client/agent.js";
import type { InboundContext, InboundMessage } from "../../../client/types.js";
import type { GatewayContext } from "../../../gateway/context.js";
import { SealedSecretSchema, type SecretBox, type SecretKeeper } from "../../../gateway/secrets.js";
import { inProcessAgentOptions } from "../../../orchestration/in-process-agent.js";
import { generateIdentity, PrivateIdentity, publicIdentity } from "../../../protocol/index.js";
import { registrationOf } from "../../../wire/agents.js";

export const BRIDGE_CAPABILITY = "a2a-bridge";
export const CLIENT_PRINCIPAL_PREFIX = "a2a-client:";

export interface CallerAgentOptions {
  /** Where identities and handshakes persist; omitted: memory only (revoked on close). */
  dataDir?: string;
  /** Seals the identities kept under `dataDir` (required with it). */
  secrets?: SecretKeeper;
  /** Audit log root of the bridge agents (`<root>/<agent-id>/`); omitted: none. */
  auditRoot?: string;
  /** Longest a bridged request may wait for its answer (an offline target's included). */
  requestTimeoutMs: number;
  /** Every notification a bridge agent receives (e.g. progress from a target). */
  onNotification?: (body: Record<string, unknown>, context: InboundContext) => void;
  /** Every response a bridge agent receives, with the caller it signs for (answers nobody awaits any more included). */
  onResponse?: (message: InboundMessage, caller: string) => void;
}

const StoredBridge = z.object({ identity: PrivateIdentity, apiKey: z.string().min(1) });
type StoredBridge = z.infer<typeof StoredBridge>;
const SealedBridgeFile = z.object({ acpBridgeAgent: z.literal(1), sealed: SealedSecretSchema });

export class CallerAgents {
  readonly #agents = new Map<string, Promise<AcpAgent>>();
  readonly #registered = new Set<string>();
  #install: Promise<string> | undefined;
  #closed = false;

  #box: Promise<SecretBox> | undefined;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly options: CallerAgentOptions,
  ) {
    if (options.dataDir !== undefined && options.secrets === undefined) {
      throw new Error("A2A bridge identities kept in a data directory need a secret keeper to seal them");
    }
  }

  /** The connected bridge agent that signs for `caller`; registered, connected once, then reused. */
  agentFor(caller: string): Promise<AcpAgent> {
    if (this.#closed) return Promise.reject(new Error("the gateway is closing"));
    let agent = this.#agents.get(caller);
    if (!agent) {
      agent = this.#connect(caller).catch((err: unknown) => {
        this.#agents.delete(caller); // the next call retries
        throw err;
      });
      this.#agents.set(caller, agent);
    }
    return agent;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const started = [...this.#agents.values()];
    this.#agents.clear();
    for (const agent of await Promise.allSettled(started)) {
      if (agent.status === "fulfilled") await agent.value.close();
    }
    // Memory-only identities cannot be used again: revoke them.
    if (this.options.dataDir === undefined) {
      for (const id of this.#registered) await this.ctx.registry.revoke(id).catch(() => undefined);
    }
  }

  async #connect(caller: string): Promise<AcpAgent> {
    const { identity, apiKey } = await this.#identityFor(caller);
    const { dataDir, auditRoot } = this.options;
    const agent = new AcpAgent({
      // In process: messages go to the relay and come from the broker, look-ups go to the registry.
      ...inProcessAgentOptions(this.ctx),
      identity,
      apiKey,
      announce: {
        capabilities: [BRIDGE_CAPABILITY],
        purpose: `Carry A2A calls of ${caller} to ACP agents of gateway ${this.ctx.gatewayId}`,
      },
      audit: auditRoot === undefined ? false : { root: auditRoot },
      state: dataDir === undefined ? false : { root: join(dataDir, "a2a-bridge", "state") },
      requestTimeoutMs: this.options.requestTimeoutMs,
    });
    agent.on("error", (err) => this.ctx.logger.debug({ err: err.message }, "A2A bridge agent error"));
    const onNotification = this.options.onNotification;
    if (onNotification) agent.onNotification(onNotification);
    const onResponse = this.options.onResponse;
    // Before connect: answers queued while the gateway was down arrive as soon as it is connected.
    if (onResponse)
      agent.on("message", (message) => {
        if (message.kind === "response" || message.kind === "error") onResponse(message, caller);
      });
    await agent.connect();
    this.ctx.logger.info({ agent: identity.agentId, caller }, "A2A bridge agent connected");
    return agent;
  }

  async #identityFor(caller: string): Promise<StoredBridge> {
    const install = await this.#installId();
    const digest = createHash("sha256").update(caller).digest("hex").slice(0, 16);
    const agentId = `a2a-${install}-${digest}`;
    const file = this.options.dataDir && join(this.options.dataDir, "a2a-bridge", `${agentId}.json`);
    if (file) {
      const stored = await this.#readStored(file);
      // Still the registered key (the broker's registry may have been reset while the file stayed).
      const registered = stored && (await this.ctx.registry.resolve(agentId));
      if (stored && registered?.record.signing.x === stored.identity.signing.x) return stored;
      if (stored && (await this.ctx.registry.get(agentId))) {
        throw new Error(
          `A2A bridge identity ${agentId} in ${file} does not match the registry (revoked or replaced): ` +
            `remove ${join(this.options.dataDir ?? "", "a2a-bridge")} to start new bridge identities`,
        );
      }
    }
    const identity = generateIdentity(agentId, `${CLIENT_PRINCIPAL_PREFIX}${caller}`);
    const { apiKey } = await this.ctx.registry.register({
      ...registrationOf(publicIdentity(identity)),
      capabilities: [BRIDGE_CAPABILITY],
      protocol_versions: ["1.0.0"],
    });
    this.#registered.add(agentId);
    if (file) await this.#writeSealed(file, { identity, apiKey });
    return { identity, apiKey };
  }

  #secretBox(): Promise<SecretBox> {
    const secrets = this.options.secrets;
    if (!secrets) return Promise.reject(new Error("no secret keeper for A2A bridge identities"));
    this.#box ??= secrets.open(this.ctx.broker);
    return this.#box;
  }

  /** Written aside, then renamed over: a crash leaves the old file or the new one, never half of one. */
  async #writeSealed(file: string, stored: StoredBridge): Promise<void> {
    const sealed = await (await this.#secretBox()).seal(
      JSON.stringify(stored),
      labelOf(stored.identity.agentId),
    );
    const aside = `${file}.sealing`;
    await writeFile(aside, `${JSON.stringify({ acpBridgeAgent: 1, sealed })}\n`, { mode: 0o600 });
    await chmod(aside, 0o600);
    await rename(aside, file);
  }

  /** The stored identity, opened; one kept in the clear (before they were sealed) is sealed in place. */
  async #readStored(file: string): Promise<StoredBridge | undefined> {
    const text = await readFile(file, "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw new Error(`${file}: cannot read the A2A bridge identity (${err.message})`);
    });
    if (text === undefined) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new Error(`${file}: the A2A bridge identity is not JSON (${(err as Error).message})`);
    }
    const plain = StoredBridge.safeParse(json);
    if (plain.success) {
      await this.#writeSealed(file, plain.data);
      return plain.data;
    }
    const sealed = SealedBridgeFile.safeParse(json);
    if (!sealed.success) {
      const issue = sealed.error.issues[0];
      throw new Error(
        `${file}: not a sealed A2A bridge identity (field ${issue?.path.join(".") || "(root)"}: ${issue?.message})`,
      );
    }
    const agentId = basename(file, ".json");
    let opened: string;
    try {
      opened = await (await this.#secretBox()).open(sealed.data.sealed, labelOf(agentId));
    } catch (err) {
      throw new Error(
        `${file}: the A2A bridge identity does not open with this gateway's custody key; start the ` +
          `gateway with the key it was sealed with (${(err as Error).message})`,
      );
    }
    const stored = StoredBridge.safeParse(JSON.parse(opened));
    if (!stored.success || stored.data.identity.agentId !== agentId) {
      throw new Error(`${file}: the sealed A2A bridge identity is not ${agentId}'s`);
    }
    return stored.data;
  }

  /** A random id per data directory (or per start without one): bridge ids never collide between gateways. */
  installId(): Promise<string> {
    return this.#installId();
  }

  #installId(): Promise<string> {
    this.#install ??= (async () => {
      const dir = this.options.dataDir && join(this.options.dataDir, "a2a-bridge");
      if (!dir) return randomBytes(4).toString("hex");
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const file = join(dir, "install-id");
      const existing = await readFile(file, "utf8").catch(() => undefined);
      if (existing && /^[0-9a-f]{8}$/.test(existing.trim())) return existing.trim();
      const id = randomBytes(4).toString("hex");
      await writeFile(file, `${id}\n`, { mode: 0o600 });
      return id;
    })();
    return this.#install;
  }
}

/** Bound to each sealed identity: one agent's sealed file does not open as another's. */
function labelOf(agentId: string): string {
  return `acp-a2a-bridge-agent:v1:${agentId}`;
}
