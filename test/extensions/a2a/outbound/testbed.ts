import { join } from "node:path";
import { afterEach, beforeEach } from "vitest";
import type { AcpAgent } from "../../../../src/client/index.js";
import type { A2AOutboundBridgeOptions } from "../../../../src/extensions/a2a/outbound/bridge.js";
import { a2aOutboundExtension } from "../../../../src/extensions/a2a/outbound/extension.js";
import { secretKeeper } from "../../../../src/extensions/custody/sealing.js";
import type { GatewayOptions } from "../../../../src/gateway/index.js";
import { A2A_REMOTE_AGENTS_PATH as OUTBOUND_PATH } from "../../../../src/wire/a2a-outbound.js";
import { agentFor } from "../../../client/fixtures.js";
import { ADMIN_TOKEN, api, startTestGateway, type TestGateway } from "../../../helpers/gateway.js";
import { useTmpDir } from "../../../helpers/tmp.js";
import { startA2AServer, type TestA2AServer } from "./a2a-server.js";

export interface OutboundBed {
  gw: TestGateway;
  dir: string;
  /** A connected ACP caller (closed after the test). */
  caller(agentId?: string): Promise<AcpAgent>;
  a2a(options?: Parameters<typeof startA2AServer>[0]): Promise<TestA2AServer>;
  /** POST the registration as admin; returns status and JSON. */
  addA2A(body: Record<string, unknown>): Promise<{ status: number; json: Record<string, unknown> }>;
  cleanup(fn: () => Promise<unknown>): void;
}

/** Per test: a real gateway with the outbound bridge (short retry timers), real A2A SDK servers, real AcpAgents. */
export function useOutboundBed(
  gatewayOptions: Partial<GatewayOptions> = {},
  bridgeOptions: A2AOutboundBridgeOptions = {},
): OutboundBed {
  const tmp = useTmpDir("acp-a2a-out-");
  const cleanups: (() => Promise<unknown>)[] = [];
  const bed = {} as OutboundBed;
  beforeEach(async () => {
    bed.dir = tmp();
    bed.gw = await startTestGateway({
      // The A2A servers of these tests listen on loopback.
      allowPrivateUrls: true,
      ...gatewayOptions,
      dataDir: join(bed.dir, "data"),
      extensions: [
        a2aOutboundExtension({
          keyDir: join(bed.dir, "data", "a2a-bridge"),
          secrets: secretKeeper({ data: join(bed.dir, "data") }),
          attempts: 2,
          retryDelayMs: 50,
          ...bridgeOptions,
        }),
      ],
    });
    cleanups.push(() => bed.gw.close());
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });
  bed.cleanup = (fn) => cleanups.push(fn);
  bed.caller = async (agentId = "alice") => {
    const test = await bed.gw.register(agentId, `principal-${agentId}`);
    const agent = agentFor(bed.gw, test, join(bed.dir, agentId));
    await agent.connect();
    cleanups.push(() => agent.close());
    return agent;
  };
  bed.a2a = async (options) => {
    const server = await startA2AServer(options);
    cleanups.push(() => server.close());
    return server;
  };
  bed.addA2A = (body) =>
    api(bed.gw.url, OUTBOUND_PATH, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return bed;
}
