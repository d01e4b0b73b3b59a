/**
 * Every reliability test reports what it measured: printed, and written as JSON to
 * `<os tmpdir>/acp-reliability/<test>.json` (docs/reliability.md quotes these files).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const FIGURES_DIR = join(tmpdir(), "acp-reliability");

export type Figures = Record<string, number | string | boolean>;

/** The delivery accounting of a fault test. */
export interface DeliveryFigures extends Figures {
  /** Distinct messages the sender tried to submit. */
  sent: number;
  /** Distinct messages the gateway answered 202 for. */
  acknowledged: number;
  /** Distinct messages handed to the application. */
  delivered: number;
  /** Extra hand-outs of an already handled message to the application. */
  duplicated: number;
  /** Acknowledged messages never delivered. */
  lost: number;
  /** Delivered although the sender never saw the 202 (the answer died with the gateway). */
  deliveredUnacknowledged: number;
}

/** Sent/acknowledged/delivered/duplicated/lost from the sender's and the application's records. */
export function deliveryFigures(
  sent: number,
  acknowledged: ReadonlySet<string>,
  deliveries: ReadonlyMap<string, number>,
): DeliveryFigures {
  let duplicated = 0;
  let deliveredUnacknowledged = 0;
  for (const [id, times] of deliveries) {
    duplicated += times - 1;
    if (!acknowledged.has(id)) deliveredUnacknowledged++;
  }
  let lost = 0;
  for (const id of acknowledged) if (!deliveries.has(id)) lost++;
  return {
    sent,
    acknowledged: acknowledged.size,
    delivered: deliveries.size,
    duplicated,
    lost,
    deliveredUnacknowledged,
  };
}

/** Prints the figures and writes them to FIGURES_DIR/<name>.json; returns the file path. */
export function recordFigures(name: string, figures: Figures): string {
  mkdirSync(FIGURES_DIR, { recursive: true });
  const file = join(FIGURES_DIR, `${name}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ test: name, at: new Date().toISOString(), ...figures }, null, 2)}\n`,
  );
  const line = Object.entries(figures)
    .map(([key, value]) => `${key}=${value}`)
    .join(" ");
  console.log(`[reliability] ${name}: ${line} (${file})`);
  return file;
}
