import { h } from "./dom.js";
import type { FeedItem } from "./types.js";

const timeFormat = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});
const dateTimeFormat = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});

/** Today's times as a clock time, older ones with their date; the exact instant in the tooltip. */
export function when(iso: string | undefined): HTMLTimeElement | string {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const today = new Date().toDateString() === date.toDateString();
  return h(
    "time",
    { datetime: iso, title: date.toISOString() },
    (today ? timeFormat : dateTimeFormat).format(date),
  );
}

export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export function ago(iso: string): string {
  const ms = Date.now() - Date.parse(iso);
  if (Number.isNaN(ms)) return "";
  if (ms < 0) return `in ${duration(-ms)}`;
  return `${duration(ms)} ago`;
}

/** A state word with a colour class; the word itself carries the meaning (not only the colour). */
export function badge(text: string, kind = text): HTMLSpanElement {
  return h(
    "span",
    { class: `badge badge-${kind.replace(/[^a-z0-9-]/gi, "-").toLowerCase()}` },
    text.replace(/_/g, " "),
  );
}

export function short(id: string, length = 8): string {
  return id.length > length + 1 ? `${id.slice(0, length)}…` : id;
}

export function pre(value: unknown): HTMLPreElement {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

/**
 * A message's summary: in the sending agent's own words (signed with the message) it is quoted and
 * attributed; otherwise it is the gateway's description, shown plain.
 */
export function summaryOf(item: Pick<FeedItem, "summary" | "summary_by" | "from">): HTMLElement | string {
  if (item.summary_by !== "sender") return item.summary;
  return h(
    "span",
    { class: "agent-words", title: `In ${item.from.agent}'s own words, signed with the message` },
    h("q", {}, item.summary),
    h("span", { class: "words-by" }, ` — ${item.from.agent}`),
  );
}
