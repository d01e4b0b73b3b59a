import type { Broker } from "../../broker/index.js";
import { verifyAgreement } from "../../collab/agreement.js";
import type { HandoffRecord } from "../../collab/handoff.js";
import type { NegotiationSession } from "../../collab/negotiation.js";
import { ballotsOf, bucketOf, listValues } from "./store.js";
import { type Ballot, tallyVote, type Vote } from "../../collab/votes.js";
import type { DashboardPanel, PanelItem } from "../../gateway/panels.js";

/**
 * Panels over the collaboration module's records (negotiations, handoffs, votes), read from its KV
 * buckets, so they show what every gateway on the same NATS recorded.
 */

const WEEK_MS = 7 * 24 * 3_600_000;
const newestFirst = (a: PanelItem, b: PanelItem) => (b.at ?? "").localeCompare(a.at ?? "");

/** `{ price: 120, slot: "…" }` as `price 120, slot "…"`, short enough for one line. */
function describeTerms(terms: Record<string, unknown>): string {
  const text = Object.entries(terms)
    .map(([key, value]) => `${key} ${JSON.stringify(value)}`)
    .join(", ");
  return text.length > 160 ? `${text.slice(0, 159)}…` : text || "no terms";
}

export function negotiationsPanel(brokerOf: () => Broker): DashboardPanel {
  return {
    name: "negotiations",
    title: "Negotiations",
    async items(scope) {
      const sessions = await listValues(bucketOf<NegotiationSession>(brokerOf(), "negotiations"), "s.");
      return sessions
        .filter((s) => scope.seesExchange(s.proposer.agentId, s.responder.agentId))
        .map((s): PanelItem => {
          const lines = s.rounds.map((r) => `Round ${r.round}: ${r.by} offered ${describeTerms(r.terms)}`);
          if (s.rejection)
            lines.push(`Rejected by ${s.rejection.by}${s.rejection.reason ? `: ${s.rejection.reason}` : ""}`);
          if (s.acceptance) lines.push(`Accepted by ${s.acceptance.by}`);
          if (s.agreement) {
            const check = verifyAgreement(s.agreement);
            lines.push(
              check.valid
                ? `Agreement signed by ${check.signedBy.join(" and ")}: both signatures verify`
                : `Agreement signatures do not verify: ${check.problems.map((p) => p.message).join("; ")}`,
            );
          }
          return {
            id: s.sessionId,
            title: `${s.subject ?? "Negotiation"}: ${s.proposer.agentId} ↔ ${s.responder.agentId}`,
            status: s.status,
            participants: [s.proposer.agentId, s.responder.agentId],
            at: s.updatedAt,
            lines,
            ...(s.rounds.at(-1)
              ? { messageId: s.rounds.at(-1)?.messageId, messageFrom: s.rounds.at(-1)?.by }
              : {}),
          };
        })
        .sort(newestFirst);
    },
  };
}

/**
 * Handoffs: the collaboration module's task handoffs (status, progress, escrow), and plain
 * `agent.handoff` messages of the last week that no such record covers.
 */
export function handoffsPanel(brokerOf: () => Broker): DashboardPanel {
  return {
    name: "handoffs",
    title: "Handoffs",
    async items(scope, sources) {
      const records = (await listValues(bucketOf<HandoffRecord>(brokerOf(), "handoffs"), "h.")).filter((h) =>
        scope.seesExchange(h.delegator, h.delegate),
      );
      const tracked = new Set(records.map((h) => `${h.delegator}/${h.offer.messageId}`));
      const fromRecords = records.map(
        (h): PanelItem => ({
          id: h.handoffId,
          title: `${h.delegator} → ${h.delegate}${h.title ? `: ${h.title}` : ""}`,
          status: h.status,
          participants: [h.delegator, h.delegate],
          at: h.updatedAt,
          lines: [
            ...(h.delivery === "queued"
              ? [`Queued until ${h.delegate} is online and has completed the handshake`]
              : []),
            ...(h.status === "offered" ? [`Respond by ${h.respondBy}`] : []),
            ...(h.status === "accepted" && h.deadline ? [`Deadline ${h.deadline}`] : []),
            ...(h.escrow > 0
              ? [
                  `${h.escrow} credits in escrow${h.status === "expired" ? `, refunded to ${h.delegator}` : ""}`,
                ]
              : []),
            ...h.events.map(
              (e) =>
                `${e.status === "progress" ? `progress ${e.progress ?? 0}%` : e.status} by ${e.by}${e.reason ? `: ${e.reason}` : ""}${e.note ? ` (${e.note})` : ""}`,
            ),
          ],
          messageId: h.offer.messageId,
          messageFrom: h.delegator,
        }),
      );
      const messages = await sources.messages({
        type: "handoff",
        since: Date.now() - WEEK_MS,
        limit: 200,
      });
      const fromMessages = messages
        .filter((item) => !tracked.has(`${item.from.agent}/${item.id}`))
        .map(
          (item): PanelItem => ({
            id: item.id,
            title: `${item.from.agent} → ${item.to.agent}`,
            ...(item.status ? { status: item.status } : {}),
            participants: [item.from.agent, item.to.agent],
            at: item.at,
            lines: [item.summary],
            messageId: item.id,
            messageFrom: item.from.agent,
          }),
        );
      return [...fromRecords, ...fromMessages].sort(newestFirst);
    },
  };
}

export function votesPanel(brokerOf: () => Broker): DashboardPanel {
  return {
    name: "votes",
    title: "Votes",
    async items(scope) {
      const bucket = bucketOf<Vote | Ballot>(brokerOf(), "votes");
      const votes = (await listValues(bucket, "v.")) as Vote[];
      const visible = votes.filter(
        (v) => scope.isAdmin || scope.ownsAgent(v.createdBy) || v.electorate.some((a) => scope.ownsAgent(a)),
      );
      const items = await Promise.all(
        visible.map(async (v): Promise<PanelItem> => {
          const ballots = await ballotsOf(bucket, v.voteId);
          const result = v.announced?.result ?? tallyVote(v, ballots);
          const closed = Date.now() >= Date.parse(v.closesAt);
          return {
            id: v.voteId,
            title: v.question,
            status: v.announced ? "announced" : closed ? "closed" : "open",
            participants: v.electorate,
            at: v.announced?.at ?? v.createdAt,
            lines: [
              `${v.options.map((o) => `${o}: ${result.tally[o] ?? 0}`).join(", ")} (${result.cast} of ${result.electorate} voted)`,
              result.reason,
              ...ballots.map((b) => `${b.voter} voted ${b.option}`),
            ],
          };
        }),
      );
      return items.sort(newestFirst);
    },
  };
}
