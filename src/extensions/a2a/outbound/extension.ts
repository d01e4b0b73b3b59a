import type { GatewayExtension } from "../../../gateway/gateway.js";
import { loadBridgeIdentity } from "../bridge-identity.js";
import { OutboundBridge, type OutboundBridgeOptions } from "./bridge.js";
import { outboundRoutes } from "./routes.js";

export interface A2AOutboundOptions extends OutboundBridgeOptions {
  /** Where the bridge key lives (`<gateway data>/a2a-bridge`). */
  keyDir: string;
}

/**
 * The gateway glue of the outbound A2A bridge (the only file that knows the extension interface):
 * loads the bridge key, starts serving the registered A2A agents, mounts the admin routes. Nothing
 * is reachable until an admin registers an A2A agent, so it is safe to mount by default.
 */
export function a2aOutboundExtension(options: A2AOutboundOptions): GatewayExtension {
  let started: Promise<OutboundBridge> | undefined;
  return {
    name: "a2a-outbound",
    routes(router, ctx) {
      started = (async () => {
        const bridge = new OutboundBridge(ctx, await loadBridgeIdentity(options.keyDir), options);
        await bridge.start();
        return bridge;
      })();
      started.catch((err: unknown) =>
        ctx.logger.error({ err: (err as Error).message }, "A2A outbound bridge did not start"),
      );
      outboundRoutes(router, ctx, () => started as Promise<OutboundBridge>);
    },
    async close() {
      const bridge = await started?.catch(() => undefined);
      await bridge?.close();
    },
  };
}
