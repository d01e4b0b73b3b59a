/**
 * Priority: one vocabulary for the command layer's `AgentCommand.priority` and for how a message
 * ranks in its recipient's queue (the messaging platform's `priority`, whose "normal" is medium).
 * A recipient gets higher-priority messages first, and messages of one priority oldest first.
 */
export const PRIORITIES = ["low", "medium", "high", "critical"] as const;
export type Priority = (typeof PRIORITIES)[number];

/** What a message without a priority has. */
export const DEFAULT_PRIORITY: Priority = "medium";

/** 0 (low) to 3 (critical): higher goes first. */
export function priorityRank(priority: Priority): number {
  return PRIORITIES.indexOf(priority);
}

/** The priority of rank `rank`; out of range (a newer peer's level) is the nearest one. */
export function priorityOfRank(rank: number): Priority {
  return PRIORITIES[Math.min(Math.max(Math.trunc(rank), 0), PRIORITIES.length - 1)] ?? DEFAULT_PRIORITY;
}

/** A priority as people write it: one of PRIORITIES, or the messaging platform's "normal" (medium). */
export function parsePriority(text: string): Priority | undefined {
  if (text === "normal") return "medium";
  return (PRIORITIES as readonly string[]).includes(text) ? (text as Priority) : undefined;
}
