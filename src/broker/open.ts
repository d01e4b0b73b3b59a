import { EmbeddedBroker } from "./embedded/broker.js";
import { NatsBroker } from "./nats/broker.js";
import type { Broker, OpenBrokerOptions } from "./types.js";

/**
 * Opens the broker chosen at start-up: `{ nats: {...} }` connects to NATS JetStream, anything else
 * opens the embedded SQLite broker in `data` (default `./.acp`).
 */
export async function openBroker(options: OpenBrokerOptions = {}): Promise<Broker> {
  if ("nats" in options && options.nats !== undefined) return NatsBroker.open(options);
  return EmbeddedBroker.open(options);
}
