import { ApiError } from "../api.js";
import type { View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { badge, summaryOf, when } from "../format.js";
import type { FeedItem } from "../types.js";

const TYPES = ["request", "response", "notification", "handoff"] as const;
const WINDOWS: [string, number | undefined][] = [
  ["Last 15 minutes", 15 * 60_000],
  ["Last hour", 3_600_000],
  ["Last 24 hours", 24 * 3_600_000],
  ["Last 7 days", 7 * 24 * 3_600_000],
  ["Last 30 days", 30 * 24 * 3_600_000],
];

interface Filters {
  agent: string;
  peer: string;
  type: string;
  windowMs: number;
}

/** The same rule the server applies to history (`matchesQuery`), for items arriving live. */
function matches(item: FeedItem, f: Filters): boolean {
  const { from, to } = { from: item.from.agent, to: item.to.agent };
  if (f.agent && from !== f.agent && to !== f.agent) return false;
  if (f.peer) {
    const between = f.agent
      ? (from === f.agent && to === f.peer) || (from === f.peer && to === f.agent)
      : from === f.peer || to === f.peer;
    if (!between) return false;
  }
  return !f.type || item.type === f.type;
}

/** A message is named by its sender and its id (ids are per sender). */
function feedKey(from: string, id: string): string {
  return `${from}/${id}`;
}

/** The dashboard page of one message. */
export function messageHref(from: string, id: string): string {
  return `#/messages/${encodeURIComponent(from)}/${encodeURIComponent(id)}`;
}

export function feedRow(item: FeedItem): HTMLLIElement {
  const status = h("span", { class: "feed-status" }, item.status ? badge(item.status) : null);
  const row = h(
    "li",
    { class: `feed-item${item.encrypted ? " encrypted" : ""}`, "data-id": feedKey(item.from.agent, item.id) },
    h(
      "a",
      { href: messageHref(item.from.agent, item.id), class: "feed-link" },
      h("span", { class: "feed-time" }, when(item.at)),
      h(
        "span",
        { class: "feed-route" },
        h("strong", {}, item.from.agent),
        " → ",
        h("strong", {}, item.to.agent),
      ),
      badge(item.step ? `handshake: ${item.step}` : item.type, item.type),
      h(
        "span",
        { class: "feed-summary" },
        item.encrypted ? "🔒 " : "",
        item.custodial ? [badge("custodial"), " "] : "",
        summaryOf(item),
      ),
      status,
    ),
  );
  return row;
}

export const feedView: View = async (root, app) => {
  const filters: Filters = { agent: "", peer: "", type: "", windowMs: 24 * 3_600_000 };
  const list = h("ol", { class: "feed", "aria-live": "polite", "aria-label": "Exchanges, newest first" });
  const state = h("div", {});
  const rows = new Map<string, HTMLLIElement>();

  const select = (label: string, name: keyof Filters, options: [string, string][]) =>
    h(
      "label",
      {},
      label,
      h(
        "select",
        {
          name,
          onchange: (event: Event) => {
            const value = (event.target as HTMLSelectElement).value;
            if (name === "windowMs") filters.windowMs = Number(value);
            else filters[name] = value;
            void load();
          },
        },
        options.map(([value, text]) =>
          h("option", { value, selected: String(filters[name]) === value }, text),
        ),
      ),
    );
  const peerInput = h("input", {
    type: "search",
    name: "peer",
    placeholder: "any agent",
    list: "known-agents",
    autocomplete: "off",
  });
  peerInput.addEventListener("change", () => {
    filters.peer = peerInput.value.trim();
    void load();
  });
  const form = h(
    "form",
    {
      class: "filters",
      role: "search",
      "aria-label": "Filter the feed",
      onsubmit: (e: Event) => e.preventDefault(),
    },
    select("Agent", "agent", [["", "All my agents"], ...app.me.agents.map((a): [string, string] => [a, a])]),
    h("label", {}, "Peer", peerInput),
    h(
      "datalist",
      { id: "known-agents" },
      app.me.agents.map((a) => h("option", { value: a })),
    ),
    select("Type", "type", [["", "All types"], ...TYPES.map((t): [string, string] => [t, t])]),
    select(
      "Time",
      "windowMs",
      WINDOWS.map(([text, ms]) => [String(ms), text]),
    ),
  );

  const setRows = (items: FeedItem[]) => {
    rows.clear();
    replaceChildren(
      list,
      items.map((item) => {
        const row = feedRow(item);
        rows.set(feedKey(item.from.agent, item.id), row);
        return row;
      }),
    );
    replaceChildren(
      state,
      items.length === 0
        ? notice("No exchanges in this window yet. New ones appear here as they happen.")
        : null,
    );
  };

  // Items that arrive while a page loads are added back after it, so none falls between the two.
  let arrivedDuringLoad: FeedItem[] | undefined;
  const load = async () => {
    arrivedDuringLoad = [];
    try {
      const { items } = await app.api.get<{ items: FeedItem[] }>("/feed", {
        agent: filters.agent,
        peer: filters.peer,
        type: filters.type,
        since: new Date(Date.now() - filters.windowMs).toISOString(),
        limit: 200,
      });
      setRows(items);
      for (const item of arrivedDuringLoad) prepend(item);
    } catch (err) {
      replaceChildren(list);
      const problem =
        err instanceof ApiError && err.problems[0]
          ? ` (${err.problems[0].path}: ${err.problems[0].message})`
          : "";
      replaceChildren(
        state,
        notice(`The feed could not be loaded: ${(err as Error).message}${problem}`, "error"),
      );
    } finally {
      arrivedDuringLoad = undefined;
    }
  };

  const prepend = (item: FeedItem) => {
    if (!matches(item, filters) || rows.has(feedKey(item.from.agent, item.id))) return;
    const row = feedRow(item);
    row.classList.add("fresh");
    rows.set(feedKey(item.from.agent, item.id), row);
    list.prepend(row);
    replaceChildren(state);
  };

  replaceChildren(
    root,
    h("h1", { tabindex: "-1" }, "Live feed"),
    h(
      "p",
      { class: "lede" },
      "What your agents said to each other, newest first, as it happens. Encrypted exchanges show only that they occurred.",
    ),
    form,
    state,
    list,
  );
  const stop = app.on((event, data) => {
    if (event === "summary") {
      arrivedDuringLoad?.push(data as FeedItem);
      prepend(data as FeedItem);
    } else if (event === "status") {
      const update = data as { id: string; from: string; status: string };
      const row = rows.get(feedKey(update.from, update.id));
      const slot = row?.querySelector(".feed-status");
      if (slot) replaceChildren(slot, badge(update.status));
    }
  });
  await load();
  return stop;
};
