import { AcpError } from "../../../protocol/index.js";
import type { GatewayContext, GatewayExtension } from "../../../gateway/extension.js";
import { loadBridgeIdentity } from "../bridge-identity.js";
import { OutboundBridge, type OutboundBridgeOptions } from "./bridge.js";
import { outboundRoutes } from "./routes.js";

export interface A2AOutboundOptions extends OutboundBridgeOptions {
  /** Where the bridge key lives (`<gateway data>/a2a-bridge`). */
  keyDir: string;
}

/**
 * The gateway glue of the outbound A2A bridge (the only file that knows the extension interface):
 * mounts the admin routes, then on start loads the bridge key and serves the registered A2A agents.
 * Nothing is reachable until an admin registers an A2A agent, so it is mounted by default.
 */
export function a2aOutboundExtension(options: A2AOutboundOptions): GatewayExtension {
  let ctx: GatewayContext | undefined;
  let bridge: OutboundBridge | undefined;
  const started = async () => {
    if (!bridge) throw new AcpError("StorageUnavailable", "the A2A bridge is not started");
    return bridge;
  };
  return {
    name: "a2a-outbound",
    routes(router, context) {
      ctx = context;
      outboundRoutes(router, context, started);
    },
    async start() {
      if (!ctx) throw new Error("a2a-outbound: start before routes");
      const created = new OutboundBridge(ctx, await loadBridgeIdentity(options.keyDir), options);
      await created.start();
      bridge = created;
    },
    async close() {
      await bridge?.close();
    },
  };
}
