import type { GatewayContext, GatewayExtension } from "../../../gateway/extension.js";
import type { SecretKeeper } from "../../../gateway/secrets.js";
import { AcpError } from "../../../protocol/index.js";
import { type BridgeSigningKey, loadBridgeSigningKey } from "./bridge-key.js";
import { type BridgeKey, A2AOutboundBridge, type A2AOutboundBridgeOptions } from "./bridge.js";
import { outboundRoutes } from "./routes.js";

export interface A2AOutboundOptions extends A2AOutboundBridgeOptions {
  /** Where the bridge key lives (`<gateway data>/a2a-bridge`). */
  keyDir: string;
  /** Seals the bridge key and the agents' credentials at rest (the custody key; `secretKeeper()`). */
  secrets: SecretKeeper;
}

/**
 * The gateway glue of the outbound A2A bridge (the only file that knows the extension interface):
 * mounts the admin routes, then on start loads the bridge key (sealed with the custody key) and serves
 * the registered A2A agents.
 * Nothing is reachable until an admin registers an A2A agent, so it is mounted by default.
 */
export function a2aOutboundExtension(options: A2AOutboundOptions): GatewayExtension {
  return {
    name: "a2a-outbound",
    mount(ctx, router) {
      let bridge: A2AOutboundBridge | undefined;
      const started = async () => {
        if (!bridge) throw new AcpError("StorageUnavailable", "the A2A bridge is not started");
        return bridge;
      };
      outboundRoutes(router, ctx, started);
      return {
        start: async () => {
          bridge = await startBridge(ctx, options);
        },
        close: async () => {
          await bridge?.close();
        },
      };
    },
  };
}

/** Loads the bridge key (sealed with the custody key) and serves the registered A2A agents. */
async function startBridge(context: GatewayContext, options: A2AOutboundOptions): Promise<A2AOutboundBridge> {
  const box = await options.secrets.open(context.broker);
  const loaded = await loadBridgeSigningKey(options.keyDir, box, { create: false });
  if (loaded?.migrated)
    context.logger.info(
      { dir: options.keyDir },
      "A2A bridge key sealed with the custody key (was in the clear)",
    );
  let current: BridgeSigningKey | undefined = loaded?.identity;
  let making: Promise<BridgeSigningKey> | undefined;
  // Made at the first registration, not at start: a gateway that registers nothing needs no KEK.
  const key: BridgeKey = {
    get current() {
      return current;
    },
    ensure() {
      if (current) return Promise.resolve(current);
      making ??= loadBridgeSigningKey(options.keyDir, box, { create: true }).then((made) => {
        current = (made as NonNullable<typeof made>).identity;
        return current;
      });
      return making.catch((err: unknown) => {
        making = undefined;
        throw err;
      });
    },
  };
  const created = new A2AOutboundBridge(context, key, box, options);
  await created.start();
  return created;
}
