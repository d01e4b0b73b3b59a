/**
 * The gateway-facing glue of custodial keys, as one extension. `start` (awaited before the gateway
 * listens) opens custody, so a missing or wrong key-encryption key stops start-up with nothing
 * changed; it then hands custody to the registry, which creates custodial agents with it and lets
 * the gateway's own signers (the MCP task tools) open an agent's key for one signature, and starts
 * answering custodial agents' inboxes (responder.ts).
 */
import type { GatewayExtension } from "../../gateway/extension.js";
import { CustodialResponder } from "./responder.js";
import { Custody } from "./store.js";

export interface CustodyOptions {
  /** The gateway's data directory, where `custody.key` is kept when no key is configured. */
  data: string;
  /** The key-encryption key (else `ACP_CUSTODY_KEY`, else `<data>/custody.key`, made at first use). */
  key?: string;
}

/**
 * Custodial agents: the gateway keeps their signing keys sealed with a key-encryption key, signs for them and
 * answers their inboxes; start-up stops with nothing changed when the key is missing or wrong.
 */
export function custodyExtension(options: CustodyOptions): GatewayExtension {
  return {
    name: "custody",
    mount(ctx) {
      let responder: CustodialResponder | undefined;
      return {
        async start() {
          const custody = await Custody.open(ctx.broker, {
            data: options.data,
            ...(options.key !== undefined ? { key: options.key } : {}),
          });
          ctx.registry.custodian = custody;
          responder = new CustodialResponder(ctx, custody);
          await responder.start();
        },
        async close() {
          await responder?.close();
          ctx.registry.custodian = undefined;
        },
      };
    },
  };
}
