/**
 * Test bed for A2A clients calling ACP agents: a real gateway with the inbound extension, real
 * AcpAgents as targets, and the real, unmodified A2A SDK client (ClientFactory + JSON-RPC transport,
 * authenticating with the SDK's own createAuthenticatingFetchWithRetry).
 */
import { join } from "node:path";
import { type Message, Role, type SendMessageRequest } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { afterEach, beforeEach } from "vitest";
import type { AcpAgent } from "../../../src/client/index.js";
import {
  type A2AInboundExtension,
  type A2AInboundOptions,
  a2aInboundExtension,
} from "../../../src/extensions/a2a/inbound/extension.js";
import { secretKeeper } from "../../../src/extensions/custody/sealing.js";
import { agentFor } from "../../client/fixtures.js";
import { startTestGateway, type TestAgent, type TestGateway } from "../../helpers/gateway.js";
import { useTmpDir } from "../../helpers/tmp.js";

export interface A2ABed {
  gw: TestGateway;
  a2a: A2AInboundExtension;
  dir: string;
  register(agentId: string, capabilities?: string[]): Promise<TestAgent>;
  /** Connects the AcpAgent of a registered agent (closed after the test). */
  connect(test: TestAgent, agentId: string): Promise<AcpAgent>;
  /** An SDK client for the agent's card URL, sending `apiKey` as a bearer token. */
  client(agentId: string, apiKey: string): Promise<Client>;
  cleanup(fn: () => Promise<unknown>): void;
}

export function useA2AGateway(options: A2AInboundOptions = {}): A2ABed {
  const tmp = useTmpDir("acp-a2a-in-");
  const cleanups: (() => Promise<unknown>)[] = [];
  const bed = {} as A2ABed;
  beforeEach(async () => {
    bed.dir = tmp();
    const data = join(bed.dir, "data");
    bed.a2a = a2aInboundExtension({
      dataDir: data,
      secrets: secretKeeper({ data }),
      auditRoot: join(bed.dir, "a2a-audit"),
      requestTimeoutMs: 20_000,
      ...options,
    });
    // Push receivers in these tests listen on loopback.
    bed.gw = await startTestGateway({ dataDir: data, extensions: [bed.a2a], allowPrivateUrls: true });
    cleanups.push(() => bed.gw.close());
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });
  bed.cleanup = (fn) => cleanups.push(fn);
  bed.register = (agentId, capabilities = ["a2a"]) =>
    bed.gw.register(agentId, `principal-${agentId}`, { capabilities });
  bed.connect = async (test, agentId) => {
    const agent = agentFor(bed.gw, test, join(bed.dir, agentId));
    await agent.connect();
    cleanups.push(() => agent.close());
    return agent;
  };
  bed.client = (agentId, apiKey) => {
    const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
      headers: async () => ({ authorization: `Bearer ${apiKey}` }),
      shouldRetryWithHeaders: async () => undefined,
    });
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl })],
      }),
    );
    // The SDK resolves the card relative to the base URL: the trailing slash matters.
    return factory.createFromUrl(`${bed.gw.url}/a2a/${agentId}/`);
  };
  return bed;
}

export function userMessage(text: string, taskId = ""): Message {
  return {
    messageId: crypto.randomUUID(),
    contextId: "",
    taskId,
    role: Role.ROLE_USER,
    parts: [
      { content: { $case: "text", value: text }, mediaType: "text/plain", filename: "", metadata: undefined },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export function sendRequest(text: string, returnImmediately = false): SendMessageRequest {
  return {
    tenant: "",
    message: userMessage(text),
    configuration: {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      returnImmediately,
    },
    metadata: undefined,
  };
}

/** A raw JSON-RPC POST to an agent's A2A endpoint. */
export async function rawCall(
  bed: A2ABed,
  agentId: string,
  body: unknown,
  apiKey?: string,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${bed.gw.url}/a2a/${agentId}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(apiKey ? { "x-api-key": apiKey } : {}) },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}
