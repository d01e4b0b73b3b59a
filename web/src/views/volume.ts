import { coalesce, type View } from "../app.js";
import { h, notice, replaceChildren, s } from "../dom.js";
import type { VolumeBucket } from "../types.js";

const TYPES = ["request", "response", "notification", "handoff"] as const;
const WINDOWS: [string, number][] = [
  ["Last hour", 3_600_000],
  ["Last 6 hours", 6 * 3_600_000],
  ["Last 24 hours", 24 * 3_600_000],
  ["Last 7 days", 7 * 24 * 3_600_000],
];
const W = 900;
const H = 280;
const M = { left: 48, right: 12, top: 16, bottom: 42 };

/** Four gridline steps of 1, 2 or 5 × 10^n, so the axis has round numbers and reaches `value`. */
function niceStep(value: number): number {
  const raw = Math.max(1, value / 4);
  const power = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 5, 10].find((m) => m * power >= raw) ?? 10) * power;
}

function bucketText(ms: number): string {
  if (ms >= 24 * 3_600_000) return `${ms / (24 * 3_600_000)} day${ms === 24 * 3_600_000 ? "" : "s"}`;
  if (ms >= 3_600_000) return `${ms / 3_600_000} hour${ms === 3_600_000 ? "" : "s"}`;
  return `${ms / 60_000} minute${ms === 60_000 ? "" : "s"}`;
}

function axisLabel(iso: string, bucketMs: number): string {
  const date = new Date(iso);
  const options: Intl.DateTimeFormatOptions =
    bucketMs >= 24 * 3_600_000
      ? { month: "short", day: "numeric" }
      : bucketMs >= 3 * 3_600_000
        ? { weekday: "short", hour: "2-digit" }
        : { hour: "2-digit", minute: "2-digit" };
  return new Intl.DateTimeFormat(undefined, options).format(date);
}

/** Messages per time bucket as stacked bars, one colour per type; each bar names its numbers on hover. */
export function volumeChart(buckets: VolumeBucket[], bucketMs: number): SVGSVGElement {
  const step = niceStep(Math.max(0, ...buckets.map((b) => b.total)));
  const max = step * 4;
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const slot = plotW / Math.max(1, buckets.length);
  const barW = Math.max(2, slot * 0.75);
  const y = (value: number) => M.top + plotH - (value / max) * plotH;
  const ticks = [0, 1, 2, 3, 4].map((n) => n * step);
  const labelEvery = Math.max(1, Math.ceil(buckets.length / 8));
  const total = buckets.reduce((sum, b) => sum + b.total, 0);
  return s(
    "svg",
    {
      class: "chart",
      viewBox: `0 0 ${W} ${H}`,
      role: "img",
      "aria-label": `Message volume: ${total} messages in ${buckets.length} intervals`,
    },
    ticks.map((tick) => [
      s("line", { class: "grid", x1: M.left, x2: W - M.right, y1: y(tick), y2: y(tick) }),
      s("text", { class: "tick", x: M.left - 6, y: y(tick) + 4, "text-anchor": "end" }, String(tick)),
    ]),
    buckets.map((bucket, i) => {
      const x = M.left + i * slot + (slot - barW) / 2;
      let base = 0;
      const parts = TYPES.filter((type) => bucket.by_type[type] > 0).map((type) => {
        const value = bucket.by_type[type];
        const rect = s("rect", {
          class: `bar bar-${type}`,
          x,
          width: barW,
          y: y(base + value),
          height: y(base) - y(base + value),
        });
        base += value;
        return rect;
      });
      const detail = TYPES.filter((t) => bucket.by_type[t] > 0)
        .map((t) => `${bucket.by_type[t]} ${t}`)
        .join(", ");
      return s(
        "g",
        { class: "bar-group" },
        s(
          "title",
          {},
          `${axisLabel(bucket.start, bucketMs)}: ${bucket.total} message${bucket.total === 1 ? "" : "s"}${detail ? ` (${detail})` : ""}`,
        ),
        // A transparent full-height target, so hovering an empty or short bar still shows its numbers.
        s("rect", { class: "bar-hit", x: M.left + i * slot, width: slot, y: M.top, height: plotH }),
        parts,
        i % labelEvery === 0
          ? s(
              "text",
              { class: "tick", x: x + barW / 2, y: H - M.bottom + 18, "text-anchor": "middle" },
              axisLabel(bucket.start, bucketMs),
            )
          : null,
      );
    }),
    s("line", { class: "axis", x1: M.left, x2: W - M.right, y1: y(0), y2: y(0) }),
  );
}

function table(buckets: VolumeBucket[], bucketMs: number): HTMLElement {
  return h(
    "details",
    {},
    h("summary", {}, "The same numbers as a table"),
    h(
      "table",
      { class: "table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["From", "Total", ...TYPES].map((t) => h("th", { scope: "col" }, t)),
        ),
      ),
      h(
        "tbody",
        {},
        buckets
          .filter((b) => b.total > 0)
          .map((b) =>
            h(
              "tr",
              {},
              h("th", { scope: "row" }, axisLabel(b.start, bucketMs)),
              h("td", {}, String(b.total)),
              TYPES.map((t) => h("td", {}, String(b.by_type[t]))),
            ),
          ),
      ),
    ),
  );
}

export const volumeView: View = async (root, app) => {
  let windowMs = 24 * 3_600_000;
  const body = h("div", { class: "card" });
  const picker = h(
    "label",
    {},
    "Time ",
    h(
      "select",
      {
        onchange: (event: Event) => {
          windowMs = Number((event.target as HTMLSelectElement).value);
          void load();
        },
      },
      WINDOWS.map(([text, ms]) => h("option", { value: ms, selected: ms === windowMs }, text)),
    ),
  );
  const legend = h(
    "ul",
    { class: "legend", "aria-label": "Colours" },
    TYPES.map((type) => h("li", {}, h("span", { class: `swatch bar-${type}`, "aria-hidden": "true" }), type)),
  );
  replaceChildren(
    root,
    h("h1", { tabindex: "-1" }, "Message volume"),
    h("p", { class: "lede" }, "How many messages your agents exchanged over time, by type."),
    h("div", { class: "filters" }, picker),
    body,
  );
  const load = async () => {
    try {
      const { buckets, bucket_ms: bucketMs } = await app.api.get<{
        buckets: VolumeBucket[];
        bucket_ms: number;
      }>("/volume", {
        since: new Date(Date.now() - windowMs).toISOString(),
      });
      const total = buckets.reduce((sum, b) => sum + b.total, 0);
      replaceChildren(
        body,
        h(
          "p",
          { class: "muted" },
          `${total} message${total === 1 ? "" : "s"} · one bar per ${bucketText(bucketMs)}`,
        ),
        volumeChart(buckets, bucketMs),
        legend,
        table(buckets, bucketMs),
      );
    } catch (err) {
      replaceChildren(body, notice(`The chart could not be loaded: ${(err as Error).message}`, "error"));
    }
  };
  await load();
  const refresh = coalesce(() => void load(), 2000);
  const stop = app.on((event) => {
    if (event === "summary") refresh.call();
  });
  return () => {
    stop();
    refresh.cancel();
  };
};
