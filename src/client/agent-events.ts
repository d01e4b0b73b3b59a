/**
 * The events an `AcpAgent` tells its user of (`AgentEvents`): one emitter the agent's parts report
 * through, which never lets an unheard `error` crash the process and tells each protocol
 * deprecation once per agent.
 */
import { EventEmitter } from "node:events";
import type { VersionDeprecation } from "../wire/versions.js";
import type { Emit } from "./agent-core-deps.js";
import type { AgentEvents, AgentWarning } from "./types.js";

export class AgentEventEmitter {
  private readonly emitter = new EventEmitter();
  /** Each deprecation once per agent, not again at every reconnect. */
  private readonly deprecationsTold = new Set<string>();

  constructor() {
    this.emitter.setMaxListeners(0);
  }

  /** Adds `listener` for `event`. */
  on<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): void {
    this.emitter.on(event, listener);
  }

  /** Adds `listener` for the next `event` only. */
  once<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): void {
    this.emitter.once(event, listener);
  }

  /** Removes a listener added with `on` or `once`. */
  off<K extends keyof AgentEvents>(event: K, listener: AgentEvents[K]): void {
    this.emitter.off(event, listener);
  }

  readonly emit: Emit = (event, ...args) => {
    // An unheard "error" must not crash the process (EventEmitter would throw it): warn instead.
    if (event === "error" && this.emitter.listenerCount("error") === 0) {
      process.emitWarning(String((args[0] as Error | undefined)?.message), { code: "ACP_AGENT_ERROR" });
      return;
    }
    this.emitter.emit(event, ...args);
  };

  /** A `warning` (a process warning when nobody listens) that the gateway deprecated our protocol version. */
  warnDeprecated(deprecation: VersionDeprecation): void {
    const key = `${deprecation.version} ${deprecation.sunsetAt}`;
    if (this.deprecationsTold.has(key)) return;
    this.deprecationsTold.add(key);
    const warning: AgentWarning = {
      code: "ProtocolDeprecated",
      message: `protocol ${deprecation.version} is deprecated since ${deprecation.deprecatedAt} and will be refused from ${deprecation.sunsetAt}: register a newer version`,
      deprecation,
    };
    if (this.emitter.listenerCount("warning") === 0) {
      process.emitWarning(warning.message, { code: "ACP_PROTOCOL_DEPRECATED" });
      return;
    }
    this.emit("warning", warning);
  }
}
