import { afterEach, beforeEach } from "vitest";
import { type AcpAgent, GatewayClient, type MessageStatusView } from "../../src/client/index.js";
import type { TestAgent, TestGateway } from "../helpers/gateway.js";
import { useTmpDir } from "../helpers/tmp.js";
import { agentFor, type GatewayFactory } from "./fixtures.js";

export interface Testbed {
  makeGateway: GatewayFactory;
  /** The current gateway (a test may replace it, e.g. to restart it). */
  gw: TestGateway;
  /** This test's directory for audit logs and handshake state. */
  dir: string;
  alpha: TestAgent;
  beta: TestAgent;
  /** Run in reverse order after the test. */
  cleanups: (() => Promise<void>)[];
  tmp(): string;
  /** A connected AcpAgent, closed after the test; its `error` events are collected in `errors`. */
  connected(
    who: TestAgent,
    options?: Parameters<typeof agentFor>[3],
  ): Promise<AcpAgent & { errors: Error[] }>;
  /** The status of message `id` as `as` sees it; `from` names its sender when `as` received it. */
  statusOf(as: TestAgent, id: string, from?: string): Promise<MessageStatusView>;
  /** Replaces the gateway by one whose ack wait is 100 ms, so redeliveries come quickly. */
  quickRedeliveryGateway(): Promise<void>;
  /** Replaces the gateway by one made with `options`; alice's and bob's assistants are registered again. */
  replaceGateway(options?: Record<string, unknown>): Promise<void>;
  /**
   * Replaces the gateway by one on a data directory of its own; the function returned stops it
   * and starts it again on the same data and port (the agents reconnect by themselves).
   */
  restartableGateway(): Promise<() => Promise<void>>;
}

/** Per test: a fresh gateway from the factory with alice's and bob's assistants registered. */
export function useTestbed(makeGateway: GatewayFactory): Testbed {
  const tmp = useTmpDir("acp-client-");
  const t = { makeGateway, tmp, cleanups: [] } as unknown as Testbed;
  const register = async () => {
    t.alpha = await t.gw.register("alice-assistant", "alice");
    t.beta = await t.gw.register("bob-assistant", "bob");
  };
  beforeEach(async () => {
    t.gw = await makeGateway();
    t.cleanups.push(() => t.gw.close());
    t.dir = tmp();
    await register();
  });
  afterEach(async () => {
    for (const cleanup of t.cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });
  t.connected = async (who, options = {}) => {
    const agent = agentFor(t.gw, who, t.dir, options);
    const errors: Error[] = [];
    agent.on("error", (err) => errors.push(err));
    await agent.connect();
    t.cleanups.push(() => agent.close());
    return Object.assign(agent, { errors });
  };
  t.statusOf = (as, id, from) =>
    new GatewayClient({ gateway: t.gw.url, apiKey: as.apiKey }).messageStatus(id, from);
  t.replaceGateway = async (options = {}) => {
    await t.gw.close();
    t.gw = await makeGateway(options);
    t.cleanups.push(() => t.gw.close());
    await register();
  };
  t.quickRedeliveryGateway = () =>
    t.replaceGateway({ delivery: { ackWaitMs: 100, maxDeliver: 5, backoffFactor: 1 } });
  t.restartableGateway = async () => {
    const dataDir = tmp();
    await t.replaceGateway({ dataDir });
    const port = Number(new URL(t.gw.url).port);
    return async () => {
      await t.gw.close();
      t.gw = await makeGateway({ dataDir, port });
      t.cleanups.push(() => t.gw.close());
    };
  };
  return t;
}
