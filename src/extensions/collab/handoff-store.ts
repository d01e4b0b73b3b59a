import type { Broker, Unsubscribe } from "../../broker/index.js";
import type { HandoffRecord, HandoffStatus } from "../../collab/handoff.js";
import { bucketOf, listValues } from "./store.js";

const PENDING: ReadonlySet<HandoffStatus> = new Set(["offered", "accepted"]);

/**
 * The handoffs waiting on `agentId` as delegate: offered (to accept or decline) and accepted (to
 * complete or fail), oldest first. For the MCP `tasks://pending` resource.
 */
export async function pendingHandoffs(broker: Broker, agentId: string): Promise<HandoffRecord[]> {
  const all = await listValues(bucketOf<HandoffRecord>(broker, "handoffs"), "h.");
  return all
    .filter((h) => h.delegate === agentId && PENDING.has(h.status))
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}

/** Calls `onChange` whenever a handoff delegated to `agentId` changes (on every gateway of one NATS). */
export function watchPendingHandoffs(
  broker: Broker,
  agentId: string,
  onChange: (handoff: HandoffRecord) => void,
): Promise<Unsubscribe> {
  return bucketOf<HandoffRecord>(broker, "handoffs").watch(
    (change) => {
      if (change.value && change.value.delegate === agentId) onChange(change.value);
    },
    { prefix: "h." },
  );
}
