import type { HandoffRecord } from "../../collab/handoff.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import { AcpError, isRemoteRef } from "../../protocol/index.js";
import type { CollabServices } from "./services.js";

/**
 * What follows a handoff's state wherever it changed (a party's message, or the gateway expiring
 * it): its escrow, and the delegate's presence.
 */

/**
 * Brings the escrow in line with the handoff's state; each step is a no-op once done. The escrow
 * is the delegator's gateway's: a gateway that holds a copy of another domain's delegator's
 * handoff moves no credits.
 */
export async function settleEscrow(
  services: Pick<CollabServices, "ledger" | "ctx">,
  record: HandoffRecord,
): Promise<void> {
  if (record.escrow === 0 || isRemoteRef(record.delegator, services.ctx.registry.remote?.domain)) return;
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
  // A delegate of another domain shows its tasks in its own gateway's presence.
  if (isRemoteRef(record.delegate, services.ctx.registry.remote?.domain)) return;
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

/**
 * Refuses an offer to a delegate that did not register every capability the task `requires`,
 * before anything is reserved or delivered, naming each one missing.
 */
export function requireCapabilities(delegate: ResolvedAgent, requires: readonly string[]): void {
  const missing = requires.filter((c) => !delegate.record.capabilities.includes(c));
  if (missing.length === 0) return;
  throw new AcpError(
    "CapabilityMissing",
    `${delegate.record.agentId} did not register the capabilit${missing.length > 1 ? "ies" : "y"} ${missing.join(", ")} this handoff requires`,
    {
      missing,
      problems: missing.map((c) => ({
        path: `/params/body/task/requires/${requires.indexOf(c)}`,
        message: `${delegate.record.agentId} does not offer ${c}`,
      })),
    },
  );
}
