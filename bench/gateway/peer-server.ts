/**
 * The peers the gateway benchmark compares against, each run in its own child process (forked by
 * main.ts with `kind` and a JSON config as arguments; it answers `{url}` over IPC):
 *
 * - `http-verify`: the ceiling, plain node:http that parses the signed envelope and checks
 *   its signature once (`verifyMessageSignature`: JCS + one Ed25519 verify), then answers 200.
 * - `a2a-echo`: the A2A JS SDK's documented server (express + DefaultRequestHandler +
 *   jsonRpcHandler) with an AgentExecutor that echoes the user's message back.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { AGENT_CARD_PATH, type AgentCard, Role } from "@a2a-js/sdk";
import { AgentEvent, type AgentExecutor, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import express from "express";
import {
  type AcpMessage,
  type Ed25519PublicJwk,
  importPublicKey,
  verifyMessageSignature,
} from "../../src/protocol/index.js";

interface HttpVerifyConfig {
  agentId: string;
  signing: Ed25519PublicJwk;
}

function ready(url: string): void {
  process.send?.({ url });
  process.on("disconnect", () => process.exit(0));
  process.on("SIGTERM", () => process.exit(0));
}

function serveHttpVerify(config: HttpVerifyConfig): void {
  const key = importPublicKey(config.signing);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      try {
        const message = JSON.parse(Buffer.concat(chunks).toString()) as AcpMessage;
        verifyMessageSignature(message, (agentId) => (agentId === config.agentId ? key : undefined));
        res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
      } catch (err) {
        res
          .writeHead(400, { "content-type": "application/json" })
          .end(JSON.stringify({ error: (err as Error).message }));
      }
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, "127.0.0.1", () => ready(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
}

/** Echoes the user's message parts back as the agent's reply: the smallest complete A2A exchange. */
const echoExecutor: AgentExecutor = {
  async execute(context, eventBus) {
    eventBus.publish(
      AgentEvent.message({
        messageId: randomUUID(),
        contextId: context.contextId,
        taskId: "",
        role: Role.ROLE_AGENT,
        parts: context.userMessage.parts,
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      }),
    );
    eventBus.finished();
  },
  async cancelTask() {},
};

function serveA2AEcho(): void {
  const app = express();
  const server = app.listen(0, "127.0.0.1", () => {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const card: AgentCard = {
      name: "Echo Agent",
      description: "Echoes the user's message (benchmark peer).",
      supportedInterfaces: [
        { url: `${base}/a2a/jsonrpc`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
      ],
      provider: undefined,
      version: "1.0.0",
      capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
      securitySchemes: {},
      securityRequirements: [],
      defaultInputModes: ["text"],
      defaultOutputModes: ["text"],
      skills: [
        {
          id: "echo",
          name: "Echo",
          description: "Echoes the message back",
          tags: ["echo"],
          examples: ["hello"],
          inputModes: ["text"],
          outputModes: ["text"],
          securityRequirements: [],
        },
      ],
      signatures: [],
    };
    const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), echoExecutor);
    app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
    app.use("/a2a/jsonrpc", jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
    server.keepAliveTimeout = 65_000;
    ready(base);
  });
}

const [kind, rawConfig] = process.argv.slice(2);
if (kind === "http-verify") serveHttpVerify(JSON.parse(rawConfig ?? "{}") as HttpVerifyConfig);
else if (kind === "a2a-echo") serveA2AEcho();
else {
  process.send?.({ error: `unknown peer kind ${kind}` });
  process.exit(2);
}
