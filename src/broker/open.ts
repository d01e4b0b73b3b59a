import type { Broker, OpenBrokerOptions } from "./types.js";

/**
 * Opens the broker chosen at start-up: `{ nats: {...} }` connects to NATS JetStream, anything else
 * opens the embedded SQLite broker in `data` (default `./.acp`). Each driver is loaded only when
 * chosen, so a NATS gateway never loads SQLite's native module, nor an embedded one the NATS client.
 */
export async function openBroker(options: OpenBrokerOptions = {}): Promise<Broker> {
  if ("nats" in options && options.nats !== undefined) {
    const { NatsBroker } = await import("./nats/broker.js");
    return NatsBroker.open(options);
  }
  const { EmbeddedBroker } = await import("./embedded/broker.js");
  return EmbeddedBroker.open(options);
}
