import {
  AcpError,
  buildErrorResponse,
  buildResponse,
  type HandoffBody,
  isEncryptedBody,
  type JsonRpcId,
  type MethodMessage,
  type VerifiedEnvelope,
} from "../protocol/index.js";
import type { AgentCore } from "./agent-core.js";
import { type HandledRecord, handledKey } from "./handled-store.js";
import type { InboundContext } from "./types.js";

type Request = MethodMessage & { id: JsonRpcId };

/**
 * Answers requests and handoffs: runs the handler, turns its value (or throw) into the signed
 * response, records that response in the delivery ledger before submitting it, and answers a
 * redelivery from what an earlier run recorded instead of running the handler again. The caller
 * acknowledges the delivery once the returned promise resolves.
 */
export class Responder {
  constructor(private readonly core: AgentCore) {}

  /** Runs the request's handler; its value becomes the signed response, a throw a signed error response. */
  async answer(message: Request, body: Record<string, unknown>, context: InboundContext): Promise<void> {
    const { core } = this;
    const handlers = core.handlers;
    let reply: object;
    try {
      const handler =
        message.method === "agent.handoff"
          ? handlers.handoff && ((b: Record<string, unknown>) => handlers.handoff!(b as HandoffBody, context))
          : (handlers.byMethod.get(message.method) ?? handlers.anyRequest);
      if (!handler) {
        throw new AcpError("MethodNotFound", `${core.self.agentId} has no handler for ${message.method}`, {
          method: message.method,
        });
      }
      const value = await handler(body, context);
      reply = await this.responseTo(message, context.from, context.encrypted, value);
      core.trust.observe(context.from, "clean-exchange");
    } catch (err) {
      if (!(err instanceof AcpError)) core.emit("error", err as Error);
      // Anything but an AcpError is reported as -32603 without its message or stack.
      const error = err instanceof AcpError ? err : new AcpError("InternalError");
      reply = buildErrorResponse(core.self, message, error);
    }
    await this.reply(reply, context.from, handledKey(context));
  }

  /**
   * A request the application's store says was handled (its handler's transaction committed) but
   * whose response was not recorded: answered with the result the handler recorded, else with an
   * error saying so. The handler does not run again.
   */
  async answerRecorded(verified: VerifiedEnvelope, message: Request, record: HandledRecord): Promise<void> {
    const peer = verified.headers["agent-id"];
    const messageId = verified.headers["message-id"];
    const reply = record.result
      ? await this.responseTo(message, peer, isEncryptedBody(message.params.body), record.result)
      : buildErrorResponse(
          this.core.self,
          message,
          new AcpError(
            "InternalError",
            `${this.core.self.agentId} handled this request before a crash, and its result was not recorded`,
            { messageId },
          ),
        );
    await this.reply(reply, peer, handledKey({ from: peer, messageId }));
  }

  /** Sends a response recorded by an earlier run: the identical envelope, which the gateway deduplicates. */
  async resend(peer: string, response: Record<string, unknown>): Promise<void> {
    await this.core.submitSigned(response, peer);
  }

  /** The handler's value as the response body (encrypted back to an encrypted request). */
  private async responseTo(
    message: Request,
    peer: string,
    encrypted: boolean,
    value: unknown,
  ): Promise<object> {
    const result = responseBody(value);
    const outgoing = encrypted ? await this.core.encryptFor(peer, result) : result;
    return buildResponse(this.core.self, message, outgoing);
  }

  /** Signs the response, records it in the ledger (a crash from here on sends it again), submits it. */
  /** `request`: the request's `handledKey`, under which its response is recorded. */
  private async reply(reply: object, peer: string, request: string): Promise<void> {
    const signed = await this.core.sign(reply, peer);
    await this.core.ledger.respond(request, signed);
    await this.core.submitSigned(signed, peer);
  }
}

function responseBody(value: unknown): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
  throw new TypeError(
    `a handler must return a JSON object (or nothing), not ${Array.isArray(value) ? "an array" : typeof value}`,
  );
}
