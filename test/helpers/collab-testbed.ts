import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach } from "vitest";
import { CollabClient } from "../../src/client/collab.js";
import type { AcpAgent } from "../../src/client/index.js";
import type { GatewayOptions } from "../../src/gateway/index.js";
import { type CollabOptions, collabExtension } from "../../src/server.js";
import { agentFor } from "../client/fixtures.js";
import type { TestAgent, TestGateway } from "./gateway.js";
import { useTmpDir } from "./tmp.js";
import { until } from "./until.js";

export { until };

export type GatewayFactory = (
  options?: Partial<GatewayOptions> & { dataDir?: string },
) => Promise<TestGateway>;

export interface Member {
  test: TestAgent;
  agent: AcpAgent & { errors: Error[] };
  collab: CollabClient;
}

export interface CollabBed {
  gw: TestGateway;
  dir: string;
  /** Moves the gateway's collaboration clock (deadlines: negotiation expiry, vote periods). */
  advance(ms: number): void;
  /** Registers an agent (with these capabilities) and connects its AcpAgent and CollabClient. */
  member(agentId: string, capabilities?: string[]): Promise<Member>;
  /** Registered but never connected: a CollabClient without an agent (reads and self-addressed records). */
  offline(agentId: string): Promise<{ test: TestAgent; collab: CollabClient }>;
  cleanups: (() => Promise<void>)[];
}

/**
 * Per test: a real gateway (from the broker's factory) with the collaboration extension on an
 * injectable clock and its audit log in the test's directory, plus helpers to bring agents in.
 */
export function useCollabBed(
  makeGateway: GatewayFactory,
  options: Omit<CollabOptions, "clock" | "auditRoot"> = {},
): CollabBed {
  const tmp = useTmpDir("acp-collab-");
  const bed = { cleanups: [] } as unknown as CollabBed;
  let offset = 0;
  beforeEach(async () => {
    offset = 0;
    bed.dir = tmp();
    const dataDir = mkdtempSync(join(tmpdir(), "acp-collab-gw-"));
    bed.cleanups.push(async () => {
      const { rmSync } = await import("node:fs");
      rmSync(dataDir, { recursive: true, force: true });
    });
    bed.gw = await makeGateway({
      dataDir,
      extensions: [
        collabExtension({
          ...options,
          clock: () => new Date(Date.now() + offset),
          auditRoot: join(bed.dir, "collab-audit"),
        }),
      ],
    });
    bed.cleanups.push(() => bed.gw.close());
  });
  afterEach(async () => {
    for (const cleanup of bed.cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });
  bed.advance = (ms) => {
    offset += ms;
  };
  bed.member = async (agentId, capabilities = []) => {
    const test = await bed.gw.register(agentId, `principal-${agentId}`, { capabilities });
    const agent = agentFor(bed.gw, test, join(bed.dir, agentId));
    const errors: Error[] = [];
    agent.on("error", (err) => errors.push(err));
    await agent.connect();
    bed.cleanups.push(() => agent.close());
    const collab = new CollabClient({ agent, identity: test.identity, apiKey: test.apiKey });
    return { test, agent: Object.assign(agent, { errors }), collab };
  };
  bed.offline = async (agentId) => {
    const test = await bed.gw.register(agentId, `principal-${agentId}`);
    return {
      test,
      collab: new CollabClient({ gateway: bed.gw.url, identity: test.identity, apiKey: test.apiKey }),
    };
  };
  return bed;
}

/** The methods in the collaboration audit log, in order (appends are asynchronous: poll for `expected`). */
/** The collaboration audit's summaries of `method`, in order. */
export async function auditSummaries(bed: CollabBed, method: string): Promise<string[]> {
  const { readAudit } = await import("../../src/audit/index.js");
  const summaries: string[] = [];
  for await (const { entry } of readAudit({ root: join(bed.dir, "collab-audit"), agent: "collab" }))
    if (entry.method === method) summaries.push(entry.summary);
  return summaries;
}

export async function auditMethods(bed: CollabBed, expected?: string): Promise<string[]> {
  const { readAudit } = await import("../../src/audit/index.js");
  const read = async () => {
    const methods: string[] = [];
    for await (const record of readAudit({ root: join(bed.dir, "collab-audit"), agent: "collab" }))
      methods.push(record.entry.method);
    return methods;
  };
  return expected === undefined
    ? read()
    : until(read, (m) => m.includes(expected), `the audit log has ${expected}`);
}
