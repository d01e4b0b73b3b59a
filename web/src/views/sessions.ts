import { ApiError } from "../api.js";
import type { View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { badge, short, when } from "../format.js";
import { dependencyGraph } from "../graph.js";
import type { SessionDetail, SessionSummary } from "../types.js";

const STATUSES = ["waiting", "in_progress", "completed", "failed"];

function statusCounts(byStatus: Record<string, number>): HTMLElement {
  return h(
    "span",
    { class: "counts" },
    STATUSES.filter((status) => byStatus[status]).map((status) => [
      badge(`${byStatus[status]} ${status}`, status),
      " ",
    ]),
  );
}

export const sessionsView: View = async (root, app) => {
  const body = h("div", {});
  replaceChildren(
    root,
    h("h1", { tabindex: "-1" }, "Coordination sessions"),
    h(
      "p",
      { class: "lede" },
      "Parallel agents working through a shared session directory, with who waits for whom.",
    ),
    body,
  );
  try {
    const { sessions } = await app.api.get<{ sessions: SessionSummary[] }>("/sessions");
    if (sessions.length === 0) {
      replaceChildren(
        body,
        notice("Nothing yet: no coordination session you take part in on this gateway's machine."),
      );
      return;
    }
    replaceChildren(
      body,
      h(
        "table",
        { class: "table" },
        h("caption", {}, "Sessions, newest first"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Session", "Started", "Project", "Agents", "Status"].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        h(
          "tbody",
          {},
          sessions.map((session) =>
            h(
              "tr",
              {},
              h(
                "th",
                { scope: "row" },
                h("a", { href: `#/sessions/${session.id}` }, h("code", {}, short(session.id, 13))),
              ),
              h("td", {}, when(session.started_at ?? undefined)),
              h("td", {}, session.project_type ?? "—"),
              h("td", {}, String(session.agents)),
              h("td", {}, session.error ? notice(session.error, "error") : statusCounts(session.by_status)),
            ),
          ),
        ),
      ),
    );
  } catch (err) {
    replaceChildren(body, notice(`Sessions could not be loaded: ${(err as Error).message}`, "error"));
  }
};

function agentsTable(detail: SessionDetail): HTMLElement {
  return h(
    "table",
    { class: "table" },
    h("caption", {}, "Agents"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Agent", "Status", "Depends on", "Progress", "Started", "Finished", "Problem"].map((t) =>
          h("th", { scope: "col" }, t),
        ),
      ),
    ),
    h(
      "tbody",
      {},
      detail.agent_list.map((agent) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, agent.name),
          h("td", {}, badge(agent.status)),
          h("td", {}, (agent.dependencies ?? []).join(", ") || "—"),
          h("td", {}, agent.progress ?? "—"),
          h("td", {}, when(agent.started_at)),
          h("td", {}, when(agent.completed_at ?? agent.failed_at)),
          h("td", {}, agent.error ?? agent.reason ?? ""),
        ),
      ),
    ),
  );
}

function reportsTable(detail: SessionDetail): HTMLElement {
  if (detail.reports.length === 0) return notice("No reports yet.");
  return h(
    "table",
    { class: "table" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Agent", "Status", "Written", "Findings", "Summary"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    h(
      "tbody",
      {},
      detail.reports.map((report) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, report.agent),
          h("td", {}, badge(report.status)),
          h(
            "td",
            {},
            when(report.timestamp),
            // A repaired field (the recipe's unexpanded $(date …)) is flagged where it is shown.
            report.warnings
              ? [" ", badge("approximate", "warning"), notice(report.warnings.join("; "), "info")]
              : null,
          ),
          h("td", {}, String(report.findings)),
          h("td", {}, report.summary),
        ),
      ),
    ),
  );
}

function eventsList(detail: SessionDetail): HTMLElement {
  if (detail.events.length === 0) return notice("No events yet.");
  return h(
    "ol",
    { class: "events", reversed: true },
    [...detail.events].reverse().map((event) => {
      const extra = event as { message?: string; severity?: string };
      return h(
        "li",
        {},
        h("span", { class: "feed-time" }, when(event.timestamp)),
        h("strong", {}, event.from),
        " ",
        badge(event.type),
        extra.severity ? [" ", badge(extra.severity)] : null,
        " ",
        extra.message ?? "",
      );
    }),
  );
}

export const sessionView: View = async (root, app, [id]) => {
  const sessionId = id ?? "";
  const body = h("div", {});
  replaceChildren(
    root,
    h("p", {}, h("a", { href: "#/sessions" }, "← All sessions")),
    h("h1", { tabindex: "-1" }, "Session ", h("code", {}, short(sessionId, 13))),
    body,
  );
  let shown = "";
  const load = async () => {
    try {
      const detail = await app.api.get<SessionDetail>(`/sessions/${encodeURIComponent(sessionId)}`);
      const text = JSON.stringify(detail);
      if (text === shown) return;
      shown = text;
      replaceChildren(
        body,
        h(
          "p",
          {},
          "Started ",
          when(detail.started_at ?? undefined),
          detail.project_type ? ` · ${detail.project_type}` : "",
          " · ",
          statusCounts(detail.by_status),
        ),
        h(
          "section",
          { class: "card", "aria-labelledby": "graph" },
          h("h2", { id: "graph" }, "Dependency graph"),
          h("div", { class: "graph-wrap" }, dependencyGraph(detail.agent_list)),
        ),
        h("section", { class: "card" }, agentsTable(detail)),
        h(
          "section",
          { class: "card", "aria-labelledby": "reports" },
          h("h2", { id: "reports" }, `Reports (${detail.reports.length})`),
          detail.unreadable_reports > 0
            ? notice(`${detail.unreadable_reports} report(s) could not be read.`, "error")
            : null,
          reportsTable(detail),
        ),
        h(
          "section",
          { class: "card", "aria-labelledby": "events" },
          h(
            "h2",
            { id: "events" },
            `Events (${detail.event_count}${detail.event_count > detail.events.length ? `, latest ${detail.events.length} shown` : ""})`,
          ),
          detail.problems > 0
            ? notice(`${detail.problems} line(s) of messages.jsonl could not be read.`, "error")
            : null,
          eventsList(detail),
        ),
      );
    } catch (err) {
      const text =
        err instanceof ApiError && err.status === 404
          ? `There is no session ${sessionId} you can see.`
          : (err as Error).message;
      replaceChildren(body, notice(text, "error"));
    }
  };
  await load();
  // Sessions live in files, not the broker: refresh while the page is open.
  const timer = setInterval(() => void load(), 5000);
  return () => clearInterval(timer);
};
