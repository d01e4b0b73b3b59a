/**
 * Turns the planned week (plan.ts) into what a gateway would have relayed: signed ACP envelopes
 * from each agent's own key (bodies end-to-end encrypted to the recipient where planned), the
 * broker's submit input, and the relay audit entry the gateway writes for each, with the summary
 * the relay would write (an answer names the request it answers).
 */
import type { AuditEntryInput } from "../../src/audit/index.js";
import type { SubmitInput } from "../../src/broker/index.js";
import { RequestLabels, relayedEntryFor } from "../../src/gateway/relay-audit.js";
import {
  type AcpMessage,
  buildAnnounce,
  buildCapabilities,
  buildErrorResponse,
  buildHandoff,
  buildNotification,
  buildRequest,
  buildResponse,
  createSigner,
  type EnvelopeHeaders,
  encryptBody,
  headersOf,
  messageKind,
  type PrivateIdentity,
  type SenderIdentity,
  type Signer,
  signMessage,
} from "../../src/protocol/index.js";
import { agentId, type PlannedEvent } from "./plan.js";

export interface RelayedMessage {
  input: SubmitInput;
  entry: AuditEntryInput;
  /** The sender's index (plan.ts agent number). */
  from: number;
  to: number;
}

interface Agent {
  identity: PrivateIdentity;
  sender: SenderIdentity;
  signer: Signer;
}

const ACTIONS = ["get-availability", "book-meeting", "quote", "check-status", "summarize", "translate"];

/** Roughly what a signed envelope adds around its body (headers, JSON-RPC, signature). */
const ENVELOPE_OVERHEAD = 560;

export class Traffic {
  private readonly agents: Agent[];
  /** Requests (and handoffs) waiting for their answer, by plan reference. */
  private readonly open = new Map<
    number,
    { id: string; from: number; to: number; encrypted: boolean; action: string }
  >();
  private readonly labels = new RequestLabels();

  constructor(
    identities: PrivateIdentity[],
    private readonly transport: "embedded" | "nats",
  ) {
    this.agents = identities.map((identity) => ({
      identity,
      sender: { agentId: identity.agentId, principalId: identity.principalId, layers: [0, 1, 2] },
      signer: createSigner(identity),
    }));
  }

  async relayed(event: PlannedEvent): Promise<RelayedMessage | undefined> {
    const now = new Date(event.at);
    let from: number;
    let to: number;
    let message: AcpMessage;
    switch (event.kind) {
      case "handshake": {
        ({ from, to } = event);
        const sender = this.agent(from).sender;
        message =
          event.step === "announce"
            ? buildAnnounce(
                sender,
                agentId(to),
                { capabilities: ["scheduling"], purpose: "meetings" },
                { now },
              )
            : buildCapabilities(
                sender,
                agentId(to),
                { tools: ["calendar"], domains: ["scheduling"], limits: [], requests: [] },
                { now },
              );
        break;
      }
      case "request": {
        ({ from, to } = event);
        const action = ACTIONS[event.ref % ACTIONS.length] as string;
        const body = await this.body(from, to, event.encrypted, {
          action,
          parameters: { date_range: "2026-02-17/2026-02-21", duration_minutes: 30 + (event.ref % 4) * 15 },
          note: pad(event.bytes),
        });
        const request = buildRequest(this.agent(from).sender, agentId(to), body, { now });
        this.open.set(event.ref, { id: String(request.id), from, to, encrypted: event.encrypted, action });
        message = request;
        break;
      }
      case "handoff": {
        ({ from, to } = event);
        const handoff = buildHandoff(
          this.agent(from).sender,
          agentId(to),
          {
            completed: "drafted the agenda",
            remaining: "book the room",
            context: { note: pad(event.bytes) },
          },
          { now },
        );
        this.open.set(event.ref, { id: String(handoff.id), from, to, encrypted: false, action: "handoff" });
        message = handoff;
        break;
      }
      case "notification": {
        ({ from, to } = event);
        message = buildNotification(
          this.agent(from).sender,
          agentId(to),
          { event: "calendar-changed", detail: pad(event.bytes) },
          { now },
        );
        break;
      }
      case "response": {
        const asked = this.open.get(event.ref);
        if (!asked) return undefined;
        this.open.delete(event.ref);
        from = asked.to;
        to = asked.from;
        const request = { id: asked.id, params: { headers: { "agent-id": agentId(asked.from) } } };
        const sender = this.agent(from).sender;
        message = event.error
          ? buildErrorResponse(sender, request, { code: -32000, message: "no slot free that week" }, { now })
          : buildResponse(
              sender,
              request,
              await this.body(from, to, asked.encrypted, { ok: true, slot: "2026-02-18T10:00:00Z" }),
              { now },
            );
        break;
      }
    }
    return this.seal(message, from, to);
  }

  private seal(message: AcpMessage, from: number, to: number): RelayedMessage {
    const signed = signMessage(message, this.agent(from).signer) as AcpMessage;
    const headers = headersOf(signed) as EnvelopeHeaders;
    const envelope = JSON.stringify(signed);
    const kind = messageKind(signed);
    const inReplyTo = this.labels.observe(signed, headers);
    const sender = this.agent(from).identity;
    const entry = relayedEntryFor(
      signed,
      { principalId: sender.principalId, custodial: undefined },
      this.agent(to).identity.principalId,
      `${this.transport}:agent.${agentId(to)}.inbox`,
      { ...(inReplyTo !== undefined ? { context: { inReplyTo } } : {}), postedToChat: false },
    );
    return {
      input: {
        id: headers["message-id"],
        from: agentId(from),
        to: agentId(to),
        kind: kind === "error" ? "response" : kind,
        method: "method" in signed ? signed.method : kind === "error" ? "error" : "response",
        envelope,
        submittedAt: headers.timestamp,
      },
      entry,
      from,
      to,
    };
  }

  private async body(
    from: number,
    to: number,
    encrypted: boolean,
    body: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    if (!encrypted) return body;
    const recipient = this.agent(to).identity;
    const { d: _private, ...recipientKey } = recipient.encryption;
    return encryptBody(body, { senderId: agentId(from), recipientId: recipient.agentId, recipientKey });
  }

  private agent(index: number): Agent {
    return this.agents[index] as Agent;
  }
}

function pad(envelopeBytes: number): string {
  return "x".repeat(Math.max(0, envelopeBytes - ENVELOPE_OVERHEAD));
}
