import type { EventStream } from "../../http/sse.js";
import type { GatewayContext } from "../../gateway/context.js";
import type { GatewayExtension } from "../../gateway/extension.js";
import type { DashboardPanel } from "../../gateway/panels.js";
import { handoffsPanel, negotiationsPanel, votesPanel } from "./panels.js";
import type { Handler, Router } from "../../http/server.js";
import { CollabAudit } from "./audit.js";
import { Intake } from "./intake.js";
import { KnowledgeIndex } from "./knowledge-index.js";
import { CreditLedger } from "./credit-ledger.js";
import {
  DEFAULT_NEGOTIATION_RULES,
  type NegotiationRules,
  type NegotiationSession,
} from "../../collab/negotiation.js";
import { DEFAULT_HANDOFF_LIMITS, type HandoffLimits, type HandoffRecord } from "../../collab/handoff.js";
import { HandoffExpiry } from "./handoff-expiry.js";
import { bucketOf } from "./store.js";
import { disputeRoutes } from "./routes-dispute.js";
import { type HandoffService, handoffRoutes } from "./routes-handoff.js";
import { knowledgeRoutes } from "./routes-knowledge.js";
import { negotiationRoutes } from "./routes-negotiation.js";
import { reachableAgent } from "../../gateway/addressing.js";
import { isRemoteRef } from "../../protocol/index.js";
import { handoffArrivals } from "./handoff-link.js";
import { negotiationArrivals } from "./negotiation-link.js";
import { statusRoutes } from "./routes-status.js";
import { teamRoutes } from "./routes-team.js";
import { voteRoutes } from "./routes-vote.js";
import type { CollabServices } from "./services.js";

export interface CollabOptions {
  /** Negotiation limits: `maxRounds` (default 10) and `timeoutMs` (default 30 minutes). */
  negotiation?: Partial<NegotiationRules>;
  /** The clock negotiation and vote deadlines are measured by (default: the system clock). */
  clock?: () => Date;
  /** Where the collaboration audit log goes (`<auditRoot>/collab/`); omitted: no audit log. */
  auditRoot?: string;
  /** Keep-alive interval of status streams. Default 15 s. */
  keepAliveMs?: number;
  /**
   * Handoff deadlines when an offer names none: `offerTtlMs` (default 24 h) until an offer expires
   * unanswered, `taskTtlMs` (default 7 days) from acceptance until an accepted task expires; and
   * how often the gateway looks for due work (`sweepMs`, default 5 s).
   */
  handoff?: Partial<HandoffLimits> & { sweepMs?: number };
}

/**
 * Negotiation, task handoff with escrow, status broadcasting and team collaboration, mounted on the
 * gateway under `/api/v1/{negotiations,handoffs,ledger,status,teams,votes,knowledge,disputes}`.
 * All state lives in the broker's KV, so it works the same on the embedded store and on NATS.
 */
export interface CollabExtension extends GatewayExtension {
  /** Handoffs for other extensions (the MCP endpoint's tasks); usable once the gateway started. */
  readonly handoffs: HandoffService;
  /** Dashboard panels over negotiations, handoffs and votes. */
  readonly panels: DashboardPanel[];
}

/**
 * The collaboration protocol on the gateway (docs/collab.md): negotiations, handoffs, votes, teams,
 * knowledge, escrow and disputes, their REST API and dashboard panels; `handoffs` serves other extensions.
 */
export function collabExtension(options: CollabOptions = {}): CollabExtension {
  // Other extensions reach handoffs and the panels' broker through this, once mounted.
  let mounted: { handoffs: HandoffService; ctx: GatewayContext } | undefined;
  const started = () => {
    if (!mounted) throw new Error("the collab extension is not mounted on a started gateway");
    return mounted;
  };

  return {
    name: "collab",
    handoffs: {
      pending: (agentId) => started().handoffs.pending(agentId),
      watchPending: (agentId, onChange) => started().handoffs.watchPending(agentId, onChange),
      watch: (handoffId, onChange) => started().handoffs.watch(handoffId, onChange),
      read: (caller, handoffId, withEnvelope) => started().handoffs.read(caller, handoffId, withEnvelope),
      apply: (caller, handoffId, step, message) => started().handoffs.apply(caller, handoffId, step, message),
    },
    panels: [
      handoffsPanel(() => started().ctx.broker),
      negotiationsPanel(() => started().ctx.broker),
      votesPanel(() => started().ctx.broker),
    ],
    mount(ctx: GatewayContext, router: Router) {
      const audit = new CollabAudit(
        options.auditRoot,
        (err) => ctx.logger.error({ err: (err as Error).message }, "collab audit append failed"),
        async (agentId) => (await ctx.registry.resolve(agentId))?.record.custodial === true,
      );
      // The delegate of a handoff across the link is an address: its principal is its home directory's.
      const principalOf = async (agentId: string) =>
        isRemoteRef(agentId, ctx.registry.remote?.domain)
          ? ((await reachableAgent(agentId, ctx.registry))?.record.principalId ?? null)
          : ((await ctx.registry.get(agentId))?.principalId ?? null);
      const clock = options.clock ?? (() => new Date());
      const services: CollabServices = {
        ctx,
        intake: new Intake(ctx),
        audit,
        ledger: new CreditLedger(ctx.broker, audit, principalOf, clock),
        knowledge: new KnowledgeIndex(ctx.broker),
        rules: { ...DEFAULT_NEGOTIATION_RULES, ...options.negotiation },
        handoffLimits: {
          offerTtlMs: options.handoff?.offerTtlMs ?? DEFAULT_HANDOFF_LIMITS.offerTtlMs,
          taskTtlMs: options.handoff?.taskTtlMs ?? DEFAULT_HANDOFF_LIMITS.taskTtlMs,
        },
        now: clock,
        streams: new Set<EventStream>(),
        keepAliveMs: options.keepAliveMs ?? 15_000,
      };
      // Every handler waits for start-up (index rebuilt, watches open); a failed start-up answers there.
      const gated: Pick<Router, "add"> = {
        add: (method: string, path: string, handler: Handler) =>
          router.add(method, path, async (...args) => {
            await ready;
            return handler(...args);
          }),
      };
      negotiationRoutes(gated, services);
      // Moves of negotiations with agents of other domains, arriving over the federation link.
      const stopArrivals = ctx.relay.onArrival(
        negotiationArrivals(services, bucketOf<NegotiationSession>(ctx.broker, "negotiations")),
      );
      // And the moves of handoffs with them (the escrow stays with the delegator's gateway).
      const stopHandoffArrivals = ctx.relay.onArrival(
        handoffArrivals(services, bucketOf<HandoffRecord>(ctx.broker, "handoffs")),
      );
      mounted = { handoffs: handoffRoutes(gated, services), ctx };
      teamRoutes(gated, services);
      voteRoutes(gated, services);
      knowledgeRoutes(gated, services);
      disputeRoutes(gated, services);
      const status = statusRoutes(gated, services);
      const expiry = new HandoffExpiry(
        services,
        bucketOf<HandoffRecord>(ctx.broker, "handoffs"),
        options.handoff?.sweepMs,
      );
      const ready = Promise.all([services.knowledge.start(), status.start()]).then(() => expiry.start());
      ready.catch((err: Error) => ctx.logger.error({ err: err.message }, "collab start-up failed"));
      return {
        start: () => ready,
        async close() {
          stopArrivals();
          stopHandoffArrivals();
          for (const stream of services.streams) stream.end();
          await ready.catch(() => undefined);
          await expiry.stop();
          status.stop();
          services.knowledge.stop();
          await audit.close();
        },
      };
    },
  };
}
