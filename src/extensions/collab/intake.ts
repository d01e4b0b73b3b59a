import type { IncomingMessage } from "node:http";
import type { z } from "zod";
import type { GatewayContext } from "../../gateway/context.js";
import { readJsonBody } from "../../http/server.js";
import type { ResolvedAgent } from "../../gateway/registry.js";
import { senderNames } from "../../gateway/addressing.js";
import { refuseClaimedIdentity } from "../../gateway/sender-binding.js";
import type { SubmitResponse } from "../../wire/api.js";
import type { SummaryContext } from "../../audit/index.js";
import {
  AcpError,
  type EnvelopeHeaders,
  headersOf,
  type MethodMessage,
  ReplayGuard,
  validateMessage,
  verifyMessageSignature,
} from "../../protocol/index.js";
import { parseOrThrow } from "../../collab/util.js";

/** A signed collaboration message the gateway checked: structure, signer, freshness, method, body. */
export interface Action<B> {
  message: MethodMessage;
  headers: EnvelopeHeaders;
  body: B;
  /** Serialized size, for the relay's size limit. */
  size: number;
  /** What the collaboration knows of it (a negotiation's round limit, a vote's question), for its summary. */
  summaryContext?: SummaryContext;
  /** When the gateway first took it in, for one held back (a queued handoff offer): see SubmitOptions. */
  receivedAt?: number;
}

export interface ActionSpec<B> {
  method: string;
  body: z.ZodType<B>;
  /**
   * `self`: a record addressed to the signer itself, stored but not relayed (ballots, entries…).
   * `any`: any agent, the signer included (channel copies; the caller checks the set).
   * A string: the one agent it must be addressed to. Omitted: any other agent (checked later).
   */
  to?: "self" | "any" | string;
}

const BODY = "/params/body";

/**
 * Where every collaboration request enters: the body of the HTTP request is the signed ACP message
 * (or, for a channel, one per member), and nothing changes state before it verified against the
 * caller's registered key. Relayed ones then go through the gateway's own relay, with its delivery
 * guarantees, handshake gate and relay audit.
 */
export class Intake {
  private readonly freshness = new ReplayGuard({ skewMs: 5 * 60_000 });

  constructor(private readonly ctx: GatewayContext) {}

  async readOne<B>(req: IncomingMessage, caller: ResolvedAgent, spec: ActionSpec<B>): Promise<Action<B>> {
    return this.check(caller, await readJsonBody(req, this.ctx.maxEnvelopeBytes), spec, "");
  }

  /** `{"envelopes": [...]}`: the same message signed once per recipient (channel posts, announcements). */
  async readMany<B>(req: IncomingMessage, caller: ResolvedAgent, spec: ActionSpec<B>): Promise<Action<B>[]> {
    const input = await readJsonBody(req, this.ctx.maxEnvelopeBytes * 16);
    const envelopes = (input as { envelopes?: unknown } | null)?.envelopes;
    if (!Array.isArray(envelopes) || envelopes.length === 0 || envelopes.length > 256) {
      throw new AcpError(
        "InvalidParams",
        'the body must be {"envelopes": [...]} with 1-256 signed messages',
        {
          problems: [{ path: "/envelopes", message: "must be an array of 1-256 signed messages" }],
        },
      );
    }
    return envelopes.map((envelope, i) => this.check(caller, envelope, spec, `/envelopes/${i}`));
  }

  check<B>(caller: ResolvedAgent, input: unknown, spec: ActionSpec<B>, at: string): Action<B> {
    const located = (err: unknown): never => {
      if (err instanceof AcpError && at !== "") {
        const problems = (err.data.problems ?? []).map((p) => ({ ...p, path: at + p.path }));
        throw new AcpError(err.kind, `${at}: ${err.message}`, { ...err.data, problems });
      }
      throw err;
    };
    try {
      const message = named(() => validateMessage(input, { envelope: true }));
      if (!("params" in message) || message.method !== spec.method) {
        throw new AcpError("InvalidParams", `this endpoint takes a signed ${spec.method} message`, {
          problems: [{ path: "/method", message: `must be ${spec.method}` }],
        });
      }
      const headers = headersOf(message) as EnvelopeHeaders;
      const self = caller.record.agentId;
      // To an agent of another domain, the signer names itself by its address (docs/federation.md).
      const names = senderNames(caller, headers["recipient-id"], this.ctx.registry, message, false);
      refuseClaimedIdentity(message, headers, names);
      verifyMessageSignature(message, (agentId, kid) =>
        agentId === names.agentId && kid === caller.kid ? caller.key : undefined,
      );
      if (spec.to === "self") this.freshness.check(headers["message-id"], headers.timestamp);
      else this.freshness.checkTimestamp(headers.timestamp);
      const to = headers["recipient-id"];
      const expected = spec.to === "self" ? self : spec.to === "any" ? undefined : spec.to;
      if (expected !== undefined && to !== expected) {
        throw new AcpError("Misrouted", `this message must be addressed to ${expected}, not ${to}`, {
          problems: [{ path: "/params/headers/recipient-id", message: `must be ${expected}` }],
        });
      }
      if (spec.to === undefined && to === self) {
        throw new AcpError("InvalidParams", "this message goes to another agent, not to its signer", {
          problems: [{ path: "/params/headers/recipient-id", message: "must be another agent" }],
        });
      }
      const body = parseOrThrow(spec.body, message.params.body, `${spec.method} body`, BODY);
      return { message, headers, body, size: Buffer.byteLength(JSON.stringify(input)) };
    } catch (err) {
      return located(err);
    }
  }

  /** Relays a checked message to its recipient through the gateway's relay pipeline. */
  relay(caller: ResolvedAgent, action: Action<unknown>): Promise<SubmitResponse> {
    return this.ctx.relay.submit(caller, action.message, action.size, {
      ...(action.summaryContext ? { summaryContext: action.summaryContext } : {}),
      ...(action.receivedAt !== undefined ? { receivedAt: action.receivedAt } : {}),
    });
  }
}

/** Validation errors say which field first, so a person (or the CLI) sees what to fix. */
function named<T>(run: () => T): T {
  try {
    return run();
  } catch (err) {
    const first = err instanceof AcpError ? err.data.problems?.[0] : undefined;
    if (!(err instanceof AcpError) || !first) throw err;
    throw new AcpError(err.kind, `${err.message}: ${first.path || "/"} ${first.message}`, err.data);
  }
}
