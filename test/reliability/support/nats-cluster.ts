/**
 * A 3-node NATS JetStream cluster on loopback ports, one config file per node — the same files
 * docs/deploy.md shows for the "many machines" deployment, with ports picked free.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { natsServerPath } from "../../helpers/nats.js";
import { retryOnPortClash } from "../../helpers/ports.js";
import { until } from "../../helpers/until.js";
import type { LaunchOptions } from "./processes.js";
import { exited, freePort } from "./processes.js";

export interface NatsNode {
  readonly name: string;
  readonly url: string;
  readonly monitorUrl: string;
  readonly configFile: string;
  running(): boolean;
  /** SIGKILL: the machine died. */
  kill(): Promise<void>;
  start(): Promise<void>;
}

export interface NatsCluster {
  readonly nodes: NatsNode[];
  readonly urls: string[];
  /** Name of the node leading a stream's raft group (from any live node's /jsz). */
  streamLeader(stream: string): Promise<string | undefined>;
  dispose(): Promise<void>;
}

/** The config file of one node: client, monitoring and cluster ports, its own store directory. */
export function nodeConfig(node: {
  name: string;
  clientPort: number;
  monitorPort: number;
  clusterPort: number;
  storeDir: string;
  routePorts: number[];
}): string {
  return `server_name: ${node.name}
listen: 127.0.0.1:${node.clientPort}
http: 127.0.0.1:${node.monitorPort}
jetstream {
  store_dir: "${node.storeDir}"
}
cluster {
  name: acp
  listen: 127.0.0.1:${node.clusterPort}
  routes: [
${node.routePorts.map((port) => `    nats-route://127.0.0.1:${port}`).join("\n")}
  ]
}
`;
}

function launch(binary: string, configFile: string): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ["-c", configFile], { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`nats-server did not become ready:\n${log}`));
    }, 15_000);
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      log = (log + chunk).slice(-16_000);
      if (log.includes("Server is ready")) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`nats-server exited early (code ${code}):\n${log}`));
    });
  });
}

async function json(url: string): Promise<Record<string, unknown> | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return (await res.json()) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/**
 * JetStream serves only once the meta group has a leader that every node knows, and every node is
 * current with it: its `/healthz` says ok (before that, it answers that it has not established
 * contact with a meta leader, or is not current with it, and a JetStream API request may time out).
 */
async function jetStreamReady(nodes: NatsNode[]): Promise<void> {
  await until(
    async () => ({
      leaders: await Promise.all(
        nodes.map(
          async (node) =>
            ((await json(`${node.monitorUrl}/jsz`))?.meta_cluster as { leader?: string } | undefined)?.leader,
        ),
      ),
      health: await Promise.all(
        nodes.map(async (node) => (await json(`${node.monitorUrl}/healthz`))?.status),
      ),
    }),
    ({ leaders, health }) =>
      leaders.every((leader) => leader && leader === leaders[0]) && health.every((status) => status === "ok"),
    "the NATS cluster's JetStream is ready (one meta leader, every node healthy)",
    30_000,
  );
}

export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const binary = natsServerPath;
  if (!binary) throw new Error("nats-server is not installed");
  return retryOnPortClash(() => startOnFreePorts(binary, size));
}

async function startOnFreePorts(binary: string, size: number): Promise<NatsCluster> {
  const root = mkdtempSync(join(tmpdir(), "acp-nats-cluster-"));
  const ports: Array<{ client: number; monitor: number; cluster: number }> = [];
  for (let i = 0; i < size; i++) {
    ports.push({ client: await freePort(), monitor: await freePort(), cluster: await freePort() });
  }
  const children = new Map<string, ChildProcess>();
  const nodes: NatsNode[] = ports.map((port, i) => {
    const name = `n${i + 1}`;
    const storeDir = join(root, name);
    mkdirSync(storeDir);
    const configFile = join(root, `${name}.conf`);
    writeFileSync(
      configFile,
      nodeConfig({
        name,
        clientPort: port.client,
        monitorPort: port.monitor,
        clusterPort: port.cluster,
        storeDir,
        routePorts: ports.filter((_, j) => j !== i).map((other) => other.cluster),
      }),
    );
    return {
      name,
      url: `nats://127.0.0.1:${port.client}`,
      monitorUrl: `http://127.0.0.1:${port.monitor}`,
      configFile,
      running: () => children.has(name),
      kill: async () => {
        const child = children.get(name);
        if (!child) return;
        children.delete(name);
        child.kill("SIGKILL");
        await exited(child);
      },
      start: async () => {
        children.set(name, await launch(binary, configFile));
      },
    };
  });
  const dispose = async () => {
    await Promise.all(nodes.map((node) => node.kill()));
    rmSync(root, { recursive: true, force: true });
  };
  try {
    // Every start settles before a failure is thrown, so dispose also stops the nodes that started.
    const starts = await Promise.allSettled(nodes.map((node) => node.start()));
    const failed = starts.find((start) => start.status === "rejected");
    if (failed) throw failed.reason;
    await jetStreamReady(nodes);
  } catch (error) {
    await dispose();
    throw error;
  }
  return {
    nodes,
    urls: nodes.map((node) => node.url),
    async streamLeader(stream) {
      for (const node of nodes.filter((n) => n.running())) {
        const view = await json(`${node.monitorUrl}/jsz?accounts=true&streams=true`);
        const accounts = (view?.account_details ?? []) as Array<{
          stream_detail?: Array<{ name: string; cluster?: { leader?: string } }>;
        }>;
        for (const account of accounts) {
          const found = account.stream_detail?.find((s) => s.name === stream);
          if (found?.cluster?.leader) return found.cluster.leader;
        }
      }
      return undefined;
    },
    dispose,
  };
}

/** startGateway options for a gateway on NATS, with a short ack wait so redeliveries come quickly. */
export function natsGatewayOptions(servers: string[], data: string, replicas = 1): LaunchOptions {
  return {
    data,
    nats: { servers, replicas, name: "acp-gateway" },
    delivery: { ackWaitMs: 5_000 },
    limits: { ratePerSecond: 1_000_000, burst: 2_000_000 },
  };
}
