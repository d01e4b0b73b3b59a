import type { HandoffRecord } from "../../collab/handoff.js";
import type { CollabServices } from "./services.js";

/**
 * What follows a handoff's state wherever it changed (a party's message, or the gateway expiring
 * it): its escrow, and the delegate's presence.
 */

/** Brings the escrow in line with the handoff's state; each step is a no-op once done. */
export async function settleEscrow(
  services: Pick<CollabServices, "ledger">,
  record: HandoffRecord,
): Promise<void> {
  if (record.escrow === 0) return;
  const { ledger } = services;
  if (record.status === "accepted" || record.status === "completed") await ledger.hold(record.handoffId);
  if (record.status === "completed") await ledger.release(record.handoffId);
  if (["failed", "declined", "cancelled", "expired"].includes(record.status))
    await ledger.refund(record.handoffId);
}

/**
 * The delegate's presence lists its accepted handoffs with their progress (the ACP messaging
 * platform's status updates).
 */
export async function trackTask(services: Pick<CollabServices, "ctx">, record: HandoffRecord): Promise<void> {
  const { presence } = services.ctx;
  const current = await presence.get(record.delegate);
  const others = current.tasks.filter((t) => t.id !== record.handoffId);
  const tasks =
    record.status === "accepted"
      ? [
          ...others,
          {
            id: record.handoffId,
            ...(record.title ? { title: record.title } : {}),
            progress: record.progress?.percent ?? 0,
          },
        ]
      : others;
  await presence.update(record.delegate, { tasks, activeTasks: tasks.length });
}
