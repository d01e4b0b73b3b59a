/**
 * The coordination protocol's own recipe for writing a report is a quoted heredoc
 * (`cat > reports/my-agent.json << 'EOF'`) holding `"timestamp": "'$(date -u +%Y-%m-%dT%H:%M:%SZ)'"`.
 * The quoted delimiter stops the shell from expanding anything, so the file keeps that text instead
 * of a time. Such a report is read with the file's modification time (when the recipe ran), and
 * the substitution is reported as a warning, so the agent's work is not skipped for the recipe's slip.
 */
import type { LocatedProblem } from "./errors.js";

/** `$(date …)`, alone or inside the single quotes the recipe puts around it. */
const UNEXPANDED_DATE = /^'?\$\(date(?:\s[^)]*)?\)'?$/;

/** A report's fields, with an unexpanded `$(date …)` timestamp replaced by the file's modification time. */
export function withShellTimestampRepaired(
  value: unknown,
  modifiedAt: Date,
): { value: unknown; warning?: LocatedProblem } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { value };
  const timestamp = (value as Record<string, unknown>)["timestamp"];
  if (typeof timestamp !== "string" || !UNEXPANDED_DATE.test(timestamp)) return { value };
  const time = modifiedAt.toISOString();
  return {
    value: { ...value, timestamp: time },
    warning: {
      field: "timestamp",
      detail: `is the shell's unexpanded $(date …), which a quoted heredoc leaves as text; read as the file's modification time, ${time}`,
    },
  };
}
