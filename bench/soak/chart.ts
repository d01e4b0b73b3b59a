/**
 * The soak's plot: three panels over time (throughput, latency p50/p99, gateway RSS with its bound)
 * drawn as SVG by hand, then converted to PNG with `rsvg-convert` (Debian: librsvg2-bin) or, if
 * that is missing, a headless Chromium screenshot.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";

export interface Sample {
  /** Minutes since the start of the load. */
  minute: number;
  msgsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  rssMb: number;
}

interface Series {
  label: string;
  color: string;
  values: number[];
}

const WIDTH = 900;
const PANEL = 200;
const LEFT = 70;
const RIGHT = 20;
const TOP = 50;
const GAP = 50;

function niceMax(value: number): number {
  if (!Number.isFinite(value) || value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((m) => m >= value * 1.1) ?? value * 1.1;
}

function panel(
  index: number,
  title: string,
  unit: string,
  minutes: number[],
  series: Series[],
  bound?: { value: number; label: string },
): string {
  const top = TOP + index * (PANEL + GAP);
  const plotWidth = WIDTH - LEFT - RIGHT;
  const maxX = Math.max(...minutes, 1e-9);
  const maxY = niceMax(
    Math.max(...series.flatMap((s) => s.values.filter(Number.isFinite)), bound?.value ?? 0),
  );
  const x = (m: number) => LEFT + (m / maxX) * plotWidth;
  const y = (v: number) => top + PANEL - (v / maxY) * PANEL;
  const parts = [
    `<text x="${LEFT}" y="${top - 10}" font-size="14" font-weight="bold">${title}</text>`,
    `<rect x="${LEFT}" y="${top}" width="${plotWidth}" height="${PANEL}" fill="none" stroke="#999"/>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const v = (maxY * i) / 4;
    parts.push(
      `<line x1="${LEFT}" x2="${LEFT + plotWidth}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/>`,
      `<text x="${LEFT - 6}" y="${y(v) + 4}" font-size="11" text-anchor="end">${+v.toFixed(1)} ${unit}</text>`,
    );
  }
  for (let i = 0; i <= 6; i++) {
    const m = (maxX * i) / 6;
    parts.push(
      `<text x="${x(m)}" y="${top + PANEL + 15}" font-size="11" text-anchor="middle">${+m.toFixed(1)} min</text>`,
    );
  }
  if (bound) {
    parts.push(
      `<line x1="${LEFT}" x2="${LEFT + plotWidth}" y1="${y(bound.value)}" y2="${y(bound.value)}" stroke="#c00" stroke-dasharray="6 4"/>`,
      `<text x="${LEFT + plotWidth - 4}" y="${y(bound.value) - 4}" font-size="11" fill="#c00" text-anchor="end">${bound.label}</text>`,
    );
  }
  series.forEach((s, i) => {
    const points = s.values
      .map((v, j) => (Number.isFinite(v) ? `${x(minutes[j] ?? 0).toFixed(1)},${y(v).toFixed(1)}` : ""))
      .filter(Boolean)
      .join(" ");
    parts.push(
      `<polyline points="${points}" fill="none" stroke="${s.color}" stroke-width="2"/>`,
      `<text x="${LEFT + 10 + i * 120}" y="${top + 16}" font-size="12" fill="${s.color}">${s.label}</text>`,
    );
  });
  return parts.join("\n");
}

export function renderSvg(samples: Sample[], title: string, rssBoundMb: number): string {
  const minutes = samples.map((s) => s.minute);
  const height = TOP + 3 * (PANEL + GAP);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="${WIDTH / 2}" y="24" font-size="16" text-anchor="middle">${title}</text>
${panel(0, "Throughput (delivered messages per second)", "/s", minutes, [{ label: "msgs/s", color: "#1f77b4", values: samples.map((s) => s.msgsPerSecond) }])}
${panel(1, "Latency, submit → delivered (connected recipients)", "ms", minutes, [
  { label: "p50", color: "#2ca02c", values: samples.map((s) => s.p50Ms) },
  { label: "p99", color: "#d62728", values: samples.map((s) => s.p99Ms) },
])}
${panel(2, "Gateway resident memory", "MB", minutes, [{ label: "RSS", color: "#9467bd", values: samples.map((s) => s.rssMb) }], { value: rssBoundMb, label: `bound ${rssBoundMb} MB` })}
</svg>
`;
}

function has(command: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Writes the SVG and its PNG rendering; returns how the PNG was made, or why it was not. */
export function writeChart(svg: string, svgPath: string, pngPath: string): string {
  writeFileSync(svgPath, svg);
  if (has("rsvg-convert")) {
    execFileSync("rsvg-convert", ["-f", "png", "-o", pngPath, svgPath]);
    return "rsvg-convert";
  }
  const chromium = ["chromium", "chromium-browser", "google-chrome"].find(has);
  if (chromium) {
    const [, height] = /height="(\d+)"/.exec(svg) ?? [];
    execFileSync(chromium, [
      "--headless",
      "--disable-gpu",
      "--no-sandbox",
      `--screenshot=${pngPath}`,
      `--window-size=${WIDTH},${height ?? 800}`,
      `file://${svgPath}`,
    ]);
    return chromium;
  }
  return "no PNG: install librsvg2-bin (rsvg-convert) or chromium";
}
