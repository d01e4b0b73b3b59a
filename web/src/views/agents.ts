import { coalesce, type View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { ago, badge, when } from "../format.js";
import type { DashboardAgent, PeerView } from "../types.js";

function meter(label: string, value: number, max: number, text: string): HTMLElement {
  return h(
    "div",
    { class: "meter-row" },
    h("span", { class: "meter-label" }, label),
    h("meter", { min: 0, max, value, low: max * 0.6, high: max * 0.85, optimum: 0, "aria-label": label }),
    h("span", { class: "meter-text" }, text),
  );
}

function layers(side: PeerView["self"]): string {
  return side ? `[${side.layers.join(", ")}]` : "—";
}

function steps(side: PeerView["self"]): string {
  if (!side) return "nothing yet";
  return (
    [side.announced ? "announced" : "", side.capabilities_exchanged ? "capabilities" : ""]
      .filter(Boolean)
      .join(" + ") || "nothing yet"
  );
}

function peersTable(agent: DashboardAgent): HTMLElement {
  if (agent.peers.length === 0) return notice("No handshake with any peer yet.");
  return h(
    "table",
    { class: "table" },
    h("caption", {}, `Peers of ${agent.agent_id}`),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        [
          "Peer",
          "Principal",
          "Handshake",
          "Layers (this agent / peer)",
          "Steps seen (this agent / peer)",
          "Last step",
        ].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    h(
      "tbody",
      {},
      agent.peers.map((peer) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, peer.peer),
          h("td", {}, peer.peer_principal ?? "unknown"),
          h("td", {}, badge(peer.handshake)),
          h("td", {}, `${layers(peer.self)} / ${layers(peer.peer_side)}`),
          h("td", {}, `${steps(peer.self)} / ${steps(peer.peer_side)}`),
          h(
            "td",
            {},
            when(
              [peer.self?.at, peer.peer_side?.at]
                .filter((t): t is string => !!t)
                .sort()
                .at(-1),
            ),
          ),
        ),
      ),
    ),
  );
}

function agentCard(agent: DashboardAgent): HTMLElement {
  const p = agent.presence;
  return h(
    "article",
    { class: "card agent", "aria-labelledby": `agent-${agent.agent_id}` },
    h(
      "header",
      { class: "card-head" },
      h(
        "h2",
        { id: `agent-${agent.agent_id}` },
        h("span", { class: `dot dot-${p.state}`, "aria-hidden": "true" }),
        agent.agent_id,
      ),
      badge(agent.revoked_at ? "revoked" : p.state),
    ),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Principal"),
      h("dd", {}, agent.principal_id),
      h("dt", {}, "Last seen"),
      h(
        "dd",
        {},
        p.state === "offline" && Date.parse(p.last_seen) === 0
          ? "never"
          : [when(p.last_seen), ` (${ago(p.last_seen)})`],
      ),
      h("dt", {}, "Connections"),
      h("dd", {}, String(p.connections)),
      h("dt", {}, "Capabilities"),
      h("dd", {}, agent.capabilities.length > 0 ? agent.capabilities.join(", ") : "none declared"),
      h("dt", {}, "Protocol"),
      h(
        "dd",
        {},
        agent.protocol_versions.join(", "),
        agent.deprecation
          ? [
              " ",
              badge("deprecated"),
              ` ${agent.deprecation.version} since `,
              when(agent.deprecation.deprecated_at),
              "; refused from ",
              when(agent.deprecation.sunset_at),
            ]
          : null,
      ),
      h("dt", {}, "Keys"),
      h(
        "dd",
        { class: agent.custodial ? "custodial" : "" },
        agent.custodial
          ? "custodial: held by the gateway, which signs on the agent's behalf"
          : "held by the agent (the gateway has only its public keys)",
      ),
      h("dt", {}, "End-to-end encryption"),
      h("dd", {}, agent.accepts_encryption ? "accepts encrypted messages" : "no encryption key registered"),
    ),
    h(
      "div",
      { class: "meters" },
      meter("Load", p.load, 100, `${Math.round(p.load)}%`),
      meter("Error rate", p.metrics.error_rate * 100, 100, `${(p.metrics.error_rate * 100).toFixed(1)}%`),
      h(
        "p",
        { class: "health" },
        `Response time ${Math.round(p.metrics.response_time_ms)} ms · ${p.active_tasks} active task${p.active_tasks === 1 ? "" : "s"}`,
      ),
    ),
    p.tasks.length > 0
      ? h(
          "ul",
          { class: "tasks" },
          p.tasks.map((t) =>
            h("li", {}, t.title ?? t.id, t.progress !== undefined ? ` — ${t.progress}%` : ""),
          ),
        )
      : null,
    peersTable(agent),
  );
}

export const agentsView: View = async (root, app) => {
  const body = h("div", { class: "cards" });
  replaceChildren(
    root,
    h("h1", { tabindex: "-1" }, app.me.viewer.kind === "admin" ? "Agents" : "Your agents"),
    h(
      "p",
      { class: "lede" },
      "Presence, load and health as each agent reports them, and the handshake the gateway relayed with each peer. Trust levels are calibrated by each agent itself.",
    ),
    body,
  );
  const load = async () => {
    try {
      const { agents } = await app.api.get<{ agents: DashboardAgent[] }>("/agents");
      replaceChildren(
        body,
        agents.length === 0 ? notice("No agents registered for you yet.") : agents.map(agentCard),
      );
    } catch (err) {
      replaceChildren(body, notice(`Agents could not be loaded: ${(err as Error).message}`, "error"));
    }
  };
  await load();
  // Presence changes come in bursts: refresh at most twice a second.
  const refresh = coalesce(() => void load(), 500);
  const stop = app.on((event, data) => {
    if (event === "changed" && (data as { what: string }).what === "agents") refresh.call();
  });
  return () => {
    stop();
    refresh.cancel();
  };
};
