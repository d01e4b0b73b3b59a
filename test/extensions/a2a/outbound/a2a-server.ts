/**
 * A real, unmodified A2A SDK server for the outbound bridge's tests: the SDK's DefaultRequestHandler
 * with an InMemoryTaskStore behind its own express JSON-RPC and agent-card handlers, on 127.0.0.1:0.
 * Only the executor (the agent's behaviour) is ours.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type AgentCard, Role, TaskState } from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  type ExecutionEventBus,
  InMemoryTaskStore,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import express from "express";

export interface TestA2AServer {
  url: string;
  /** The card's URL (`/.well-known/agent-card.json`). */
  cardUrl: string;
  card: AgentCard;
  /** Texts of the user messages the agent received, in order. */
  received: string[];
  /** "stepwise" waits here before each step after the first: `release()` lets the next one go. */
  gate: Gate;
  close(): Promise<void>;
}

/**
 * - `ask-name`: asks for the caller's name (input-required); a message continuing the task
 *   re-announces it as it was (as the SDK's agent contract asks), then completes `hello, <name>`;
 * - `stepwise`: says "step 1" (working), then at each release: an artifact chunk "Hel", the chunk
 *   "lo" appended, "step 2", and completes;
 * - `chatty`: says "step 1" to "step 20" (working), then completes.
 */
export type Behaviour =
  | "echo-message"
  | "echo-task"
  | "slow-task"
  | "large-message"
  | "ask-name"
  | "stepwise"
  | "chatty";

/** Steps of an agent that the test lets go one at a time. */
export class Gate {
  #waiting: (() => void)[] = [];
  #released = 0;

  /** Resolves once the test has released this step. */
  pass(): Promise<void> {
    if (this.#released > 0) {
      this.#released--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#released++;
  }
}

export function textOf(context: RequestContext): string {
  return context.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
}

function agentMessage(text: string, context: RequestContext, withTask: boolean) {
  return {
    messageId: `agent-${Math.random().toString(36).slice(2)}`,
    contextId: context.contextId,
    taskId: withTask ? context.taskId : "",
    role: Role.ROLE_AGENT,
    parts: [
      { content: { $case: "text" as const, value: text }, metadata: undefined, filename: "", mediaType: "" },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function status(context: RequestContext, state: TaskState, text?: string) {
  return AgentEvent.statusUpdate({
    taskId: context.taskId,
    contextId: context.contextId,
    status: {
      state,
      message: text === undefined ? undefined : agentMessage(text, context, true),
      timestamp: new Date().toISOString(),
    },
    metadata: undefined,
  });
}

function artifactChunk(context: RequestContext, text: string, append: boolean, lastChunk = false) {
  return AgentEvent.artifactUpdate({
    taskId: context.taskId,
    contextId: context.contextId,
    artifact: {
      artifactId: "result",
      name: "result",
      description: "",
      parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
      metadata: undefined,
      extensions: [],
    },
    append,
    lastChunk,
    metadata: undefined,
  });
}

/** The agent's behaviours: answer with a message, run a task, or run a task until cancelled. */
export class TestExecutor implements AgentExecutor {
  private readonly running = new Map<string, () => void>();
  constructor(
    private readonly behaviour: Behaviour,
    private readonly received: string[],
    private readonly gate: Gate,
  ) {}

  async execute(context: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const text = textOf(context);
    this.received.push(text);
    if (this.behaviour === "ask-name" && context.task) {
      // The agent contract: the task first, as it is, then what the new message changes.
      bus.publish(AgentEvent.task(context.task));
      bus.publish(status(context, TaskState.TASK_STATE_WORKING, "reading your answer"));
      bus.publish(status(context, TaskState.TASK_STATE_COMPLETED, `hello, ${text}`));
      bus.finished();
      return;
    }
    if (this.behaviour === "echo-message" || this.behaviour === "large-message") {
      const answer = this.behaviour === "large-message" ? "x".repeat(1_200_000) : `echo: ${text}`;
      bus.publish(AgentEvent.message(agentMessage(answer, context, false)));
      bus.finished();
      return;
    }
    bus.publish(
      AgentEvent.task({
        id: context.taskId,
        contextId: context.contextId,
        status: {
          state: TaskState.TASK_STATE_SUBMITTED,
          message: undefined,
          timestamp: new Date().toISOString(),
        },
        artifacts: [],
        history: [context.userMessage],
        metadata: undefined,
      }),
    );
    if (this.behaviour === "ask-name") {
      bus.publish(status(context, TaskState.TASK_STATE_INPUT_REQUIRED, "what is your name?"));
      bus.finished();
      return;
    }
    if (this.behaviour === "stepwise") {
      bus.publish(status(context, TaskState.TASK_STATE_WORKING, "step 1"));
      await this.gate.pass();
      bus.publish(artifactChunk(context, "Hel", false));
      await this.gate.pass();
      bus.publish(artifactChunk(context, "lo", true));
      await this.gate.pass();
      bus.publish(status(context, TaskState.TASK_STATE_WORKING, "step 2"));
      await this.gate.pass();
      bus.publish(status(context, TaskState.TASK_STATE_COMPLETED, "done"));
      bus.finished();
      return;
    }
    if (this.behaviour === "chatty") {
      for (let step = 1; step <= 20; step++)
        bus.publish(status(context, TaskState.TASK_STATE_WORKING, `step ${step}`));
      bus.publish(status(context, TaskState.TASK_STATE_COMPLETED, "done"));
      bus.finished();
      return;
    }
    bus.publish(status(context, TaskState.TASK_STATE_WORKING, "working on it"));
    if (this.behaviour === "slow-task") {
      // Runs until cancelTask ends it.
      await new Promise<void>((resolve) => this.running.set(context.taskId, resolve));
      bus.publish(status(context, TaskState.TASK_STATE_CANCELED, "cancelled"));
      bus.finished();
      return;
    }
    bus.publish(artifactChunk(context, `upper: ${text.toUpperCase()}`, false, true));
    bus.publish(status(context, TaskState.TASK_STATE_COMPLETED, `done: ${text}`));
    bus.finished();
  }

  async cancelTask(taskId: string, _bus: ExecutionEventBus): Promise<void> {
    this.running.get(taskId)?.();
    this.running.delete(taskId);
  }
}

export function testCard(url: string, streaming: boolean): AgentCard {
  return {
    name: "Echo Agent",
    description: "Echoes what it is told",
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: { url: "https://example.org", organization: "Example Org" },
    version: "1.2.3",
    capabilities: { streaming, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [
      {
        id: "echo",
        name: "Echo",
        description: "Echoes the input",
        tags: ["echo"],
        examples: [],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/**
 * Starts the SDK server. `card` may rewrite the card (bad cards, signatures); `port` reuses a port
 * (to bring a stopped agent back).
 */
export async function startA2AServer(
  options: {
    behaviour?: Behaviour;
    streaming?: boolean;
    card?: (card: AgentCard) => AgentCard | Promise<AgentCard>;
    /** Serve this JSON as the card instead (bad cards). */
    rawCard?: (card: AgentCard) => unknown;
    port?: number;
    /** Served at `/.well-known/jwks.json` (card signature keys). */
    jwks?: unknown;
    /** Headers every request (card included) must carry, else HTTP 401 (an agent that needs credentials). */
    requireHeaders?: Record<string, string>;
    /** With requireHeaders: the card is public, only calls need them (as most agents do it). */
    publicCard?: boolean;
    /**
     * An A2A 0.3 agent: the SDK's own 0.3 compatibility layer serves a 0.3 card (`url`,
     * `preferredTransport`) and answers `message/send`…, whatever A2A-Version a client sends.
     */
    legacy?: boolean;
  } = {},
): Promise<TestA2AServer> {
  const app = express();
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(options.port ?? 0, "127.0.0.1", () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  const base = testCard(`${url}/a2a/jsonrpc`, options.streaming ?? false);
  if (options.legacy) {
    base.supportedInterfaces = [
      { url: `${url}/a2a/jsonrpc`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "0.3" },
    ];
    // A 0.3 agent knows no A2A-Version header: every request is a 0.3 one, and its card has no
    // 1.0 members (the SDK adds `supportedInterfaces` for 1.0 clients).
    app.use((req, res, next) => {
      delete req.headers["a2a-version"];
      if (req.path === "/.well-known/agent-card.json") {
        const send = res.send.bind(res);
        res.send = (body: unknown) => {
          const card = JSON.parse(Buffer.isBuffer(body) ? body.toString() : String(body)) as Record<
            string,
            unknown
          >;
          delete card.supportedInterfaces;
          return send(JSON.stringify(card));
        };
      }
      next();
    });
  }
  const legacyCompat = { enabled: options.legacy ?? false };
  const card = options.card ? await options.card(base) : base;
  const received: string[] = [];
  const gate = new Gate();
  const handler = new DefaultRequestHandler(
    card,
    new InMemoryTaskStore(),
    new TestExecutor(options.behaviour ?? "echo-task", received, gate),
  );
  const required = Object.entries(options.requireHeaders ?? {});
  if (required.length > 0) {
    app.use((req, res, next) => {
      const card = options.publicCard && req.path === "/.well-known/agent-card.json";
      if (card || required.every(([name, value]) => req.get(name) === value)) next();
      else res.status(401).json({ error: "unauthorized" });
    });
  }
  if (options.jwks !== undefined)
    app.get("/.well-known/jwks.json", (_req, res) => void res.json(options.jwks));
  if (options.rawCard) {
    const raw = options.rawCard(card);
    app.get("/.well-known/agent-card.json", (_req, res) => {
      res.json(raw);
    });
  } else {
    app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler, legacyCompat }));
  }
  app.use(
    "/a2a/jsonrpc",
    jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat }),
  );
  return {
    url,
    cardUrl: `${url}/.well-known/agent-card.json`,
    card,
    received,
    gate,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
