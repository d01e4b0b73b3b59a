/**
 * The gateway-facing glue of custodial keys: opened by the composition root before the gateway
 * listens (a missing or wrong key-encryption key stops start-up), then handed to the registry,
 * which creates custodial agents with it and lets the gateway's own signers (the MCP task tools)
 * open an agent's key for one signature; and the extension that answers custodial agents' inboxes.
 */
import type { Broker } from "../../broker/index.js";
import type { GatewayContext, GatewayExtension } from "../../gateway/extension.js";
import type { Registry } from "../../gateway/registry.js";
import { CustodialResponder } from "./responder.js";
import { Custody } from "./store.js";

export interface CustodyOptions {
  /** Off: `custodial: true` registrations are refused. Default on (each agent opts in). */
  enabled?: boolean;
  /** The key-encryption key (else `ACP_CUSTODY_KEY`, else `<data>/custody.key`, made at first use). */
  key?: string;
}

/** Opens custody for `registry`; throws CustodyKeyError (clear, nothing changed) on a bad KEK. */
export async function attachCustody(
  broker: Broker,
  registry: Registry,
  data: string,
  options: CustodyOptions = {},
): Promise<void> {
  if (options.enabled === false) return;
  registry.custodian = await Custody.open(broker, {
    data,
    ...(options.key !== undefined ? { key: options.key } : {}),
  });
}

/** Answers custodial agents' handshakes (responder.ts); does nothing while custody is off. */
export function custodyExtension(): GatewayExtension {
  let responder: CustodialResponder | undefined;
  return {
    name: "custody",
    routes(_router, ctx: GatewayContext) {
      const custodian = ctx.registry.custodian;
      if (custodian) responder = new CustodialResponder(ctx, custodian);
    },
    async start() {
      await responder?.start();
    },
    async close() {
      await responder?.close();
    },
  };
}
