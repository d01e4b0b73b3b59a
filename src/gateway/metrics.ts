/**
 * A small Prometheus registry (text exposition format 0.0.4): counters and gauges with labels,
 * and latency histograms. Other modules (orchestration, webhooks) register gauges through
 * `gauge()` or a collector callback so /metrics stays one place.
 */
type Labels = Record<string, string>;

const BUCKETS_MS = [1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 5000];

function labelText(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  return `{${entries.map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`).join(",")}}`;
}

interface Histogram {
  counts: number[];
  sum: number;
  count: number;
}

export type Collector = () => {
  name: string;
  help: string;
  type: "gauge" | "counter";
  samples: { labels?: Labels; value: number }[];
}[];

/**
 * The gateway's Prometheus registry, served at /metrics: counters and gauges with labels, and latency
 * histograms; extensions add theirs through `gauge()`, `count()` or a collector.
 */
export class Metrics {
  private readonly counters = new Map<string, Map<string, number>>();
  private readonly gauges = new Map<string, Map<string, number>>();
  private readonly histograms = new Map<string, Map<string, Histogram>>();
  private readonly help = new Map<string, string>();
  private readonly collectors: Collector[] = [];

  /** Sets a metric's HELP text. */
  describe(name: string, help: string): this {
    this.help.set(name, help);
    return this;
  }

  /** Adds `by` to a counter (one series per label set). */
  count(name: string, labels: Labels = {}, by = 1): void {
    const series = this.counters.get(name) ?? new Map<string, number>();
    const key = labelText(labels);
    series.set(key, (series.get(key) ?? 0) + by);
    this.counters.set(name, series);
  }

  /** Sets a gauge's value (one series per label set). */
  gauge(name: string, value: number, labels: Labels = {}): void {
    const series = this.gauges.get(name) ?? new Map<string, number>();
    series.set(labelText(labels), value);
    this.gauges.set(name, series);
  }

  /** Records one latency in milliseconds in a histogram (buckets from 1 ms to 5 s). */
  observe(name: string, ms: number, labels: Labels = {}): void {
    const series = this.histograms.get(name) ?? new Map<string, Histogram>();
    const key = labelText(labels);
    const h = series.get(key) ?? { counts: BUCKETS_MS.map(() => 0), sum: 0, count: 0 };
    for (let i = 0; i < BUCKETS_MS.length; i++)
      if (ms <= (BUCKETS_MS[i] as number)) h.counts[i] = (h.counts[i] ?? 0) + 1;
    h.sum += ms;
    h.count++;
    series.set(key, h);
    this.histograms.set(name, series);
  }

  /**
   * Adds a callback that returns samples at each scrape, for figures kept elsewhere (queue depths, circuit
   * states).
   */
  addCollector(collector: Collector): void {
    this.collectors.push(collector);
  }

  /** Every metric in Prometheus's text exposition format 0.0.4, collectors' samples included. */
  render(): string {
    const lines: string[] = [];
    const head = (name: string, type: string) => {
      lines.push(`# HELP ${name} ${this.help.get(name) ?? name}`, `# TYPE ${name} ${type}`);
    };
    for (const [name, series] of this.counters) {
      head(name, "counter");
      for (const [labels, value] of series) lines.push(`${name}${labels} ${value}`);
    }
    for (const [name, series] of this.gauges) {
      head(name, "gauge");
      for (const [labels, value] of series) lines.push(`${name}${labels} ${value}`);
    }
    for (const [name, series] of this.histograms) {
      head(name, "histogram");
      for (const [labels, h] of series) {
        const inner = labels.slice(1, -1);
        const join = (extra: string) => `{${inner ? `${inner},` : ""}${extra}}`;
        BUCKETS_MS.forEach((le, i) => {
          lines.push(`${name}_bucket${join(`le="${le}"`)} ${h.counts[i]}`);
        });
        lines.push(
          `${name}_bucket${join('le="+Inf"')} ${h.count}`,
          `${name}_sum${labels} ${h.sum}`,
          `${name}_count${labels} ${h.count}`,
        );
      }
    }
    for (const collector of this.collectors) {
      for (const metric of collector()) {
        this.help.set(metric.name, metric.help);
        head(metric.name, metric.type);
        for (const sample of metric.samples)
          lines.push(`${metric.name}${labelText(sample.labels ?? {})} ${sample.value}`);
      }
    }
    return `${lines.join("\n")}\n`;
  }
}
