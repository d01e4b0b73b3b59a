import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Collector } from "../gateway/metrics.js";
import type { BreakerState } from "./breaker.js";
import type { Status } from "./schemas.js";

const WINDOW = 1024;
const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, "half-open": 1, open: 2 };

interface AgentSeries {
  byStatus: Map<Status, number>;
  latencies: number[];
  next: number;
  latencySum: number;
  circuitRejections: number;
  cacheHits: number;
}

export interface AgentMetricsSnapshot {
  agent: string;
  attempts: number;
  successRate: number;
  p50Ms: number;
  p99Ms: number;
  breaker: BreakerState;
  circuitRejections: number;
  cacheHits: number;
}

/**
 * Per target agent: attempts by status, latency (p50/p99 over the last 1,024 attempts), success
 * rate, circuit state. Rendered as a gateway `Collector` when the orchestrator runs inside the
 * gateway, or served on the orchestrator's own `/metrics` (`serveMetrics`) when it runs apart.
 */
export class OrchestrationMetrics {
  private readonly agents = new Map<string, AgentSeries>();

  constructor(private readonly breakerOf: (agent: string) => BreakerState) {}

  /** Counts one attempt to `agent` with its outcome and latency. */
  observe(agent: string, status: Status, ms: number): void {
    const series = this.series(agent);
    series.byStatus.set(status, (series.byStatus.get(status) ?? 0) + 1);
    if (series.latencies.length < WINDOW) series.latencies.push(ms);
    else series.latencies[series.next] = ms;
    series.next = (series.next + 1) % WINDOW;
    series.latencySum += ms;
  }

  /** Counts a command the agent's open circuit refused without sending it. */
  circuitRejected(agent: string): void {
    this.series(agent).circuitRejections++;
  }

  /** Counts a command answered from the response cache without reaching the agent. */
  cacheHit(agent: string): void {
    this.series(agent).cacheHits++;
  }

  /** Each agent's figures now: attempts by status, latency percentiles, success rate, circuit state. */
  snapshot(): AgentMetricsSnapshot[] {
    return [...this.agents.entries()].map(([agent, series]) => {
      const attempts = [...series.byStatus.values()].reduce((a, b) => a + b, 0);
      const good = (series.byStatus.get("success") ?? 0) + (series.byStatus.get("partial") ?? 0);
      const sorted = [...series.latencies].sort((a, b) => a - b);
      return {
        agent,
        attempts,
        successRate: attempts === 0 ? 1 : good / attempts,
        p50Ms: quantile(sorted, 0.5),
        p99Ms: quantile(sorted, 0.99),
        breaker: this.breakerOf(agent),
        circuitRejections: series.circuitRejections,
        cacheHits: series.cacheHits,
      };
    });
  }

  /** For `Metrics.addCollector` of the gateway this orchestrator runs in. */
  collector(): Collector {
    return () => {
      const snapshots = this.snapshot();
      const per = (value: (s: AgentMetricsSnapshot) => number) =>
        snapshots.map((s) => ({ labels: { agent: s.agent }, value: value(s) }));
      const byStatus = [...this.agents.entries()].flatMap(([agent, series]) =>
        [...series.byStatus.entries()].map(([status, value]) => ({ labels: { agent, status }, value })),
      );
      return [
        {
          name: "acp_orchestrator_commands_total",
          help: "Command attempts per target agent and status",
          type: "counter",
          samples: byStatus,
        },
        {
          name: "acp_orchestrator_success_ratio",
          help: "Share of attempts that succeeded (success or partial)",
          type: "gauge",
          samples: per((s) => s.successRate),
        },
        {
          name: "acp_orchestrator_latency_p50_ms",
          help: "Median attempt latency over the last 1024 attempts",
          type: "gauge",
          samples: per((s) => s.p50Ms),
        },
        {
          name: "acp_orchestrator_latency_p99_ms",
          help: "99th percentile attempt latency over the last 1024 attempts",
          type: "gauge",
          samples: per((s) => s.p99Ms),
        },
        {
          name: "acp_orchestrator_latency_ms_sum",
          help: "Total attempt latency in ms",
          type: "counter",
          samples: [...this.agents.entries()].map(([agent, series]) => ({
            labels: { agent },
            value: series.latencySum,
          })),
        },
        {
          name: "acp_orchestrator_circuit_state",
          help: "Circuit breaker state: 0 closed, 1 half-open, 2 open",
          type: "gauge",
          samples: per((s) => BREAKER_VALUE[s.breaker]),
        },
        {
          name: "acp_orchestrator_circuit_rejections_total",
          help: "Commands refused by an open circuit",
          type: "counter",
          samples: per((s) => s.circuitRejections),
        },
        {
          name: "acp_orchestrator_cache_hits_total",
          help: "Commands answered from the response cache",
          type: "counter",
          samples: per((s) => s.cacheHits),
        },
      ];
    };
  }

  /** Prometheus text exposition (0.0.4) of the collector alone. */
  render(): string {
    const lines: string[] = [];
    for (const metric of this.collector()()) {
      lines.push(`# HELP ${metric.name} ${metric.help}`, `# TYPE ${metric.name} ${metric.type}`);
      for (const sample of metric.samples) {
        const labels = Object.entries(sample.labels ?? {})
          .map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`)
          .join(",");
        lines.push(`${metric.name}${labels ? `{${labels}}` : ""} ${sample.value}`);
      }
    }
    return `${lines.join("\n")}\n`;
  }

  private series(agent: string): AgentSeries {
    let series = this.agents.get(agent);
    if (!series) {
      series = {
        byStatus: new Map(),
        latencies: [],
        next: 0,
        latencySum: 0,
        circuitRejections: 0,
        cacheHits: 0,
      };
      this.agents.set(agent, series);
    }
    return series;
  }
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
}

/**
 * An orchestrator running in its own process serves its own `/metrics` (Prometheus scrapes it next
 * to the gateway's); nothing is pushed through the gateway, so metrics never compete with messages.
 */
export async function serveMetrics(
  metrics: OrchestrationMetrics,
  options: { port?: number; host?: string } = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.method === "GET" && req.url?.split("?")[0] === "/metrics") {
      const text = metrics.render();
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
      res.end(text);
      return;
    }
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? "127.0.0.1";
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
