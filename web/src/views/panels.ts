import { ApiError } from "../api.js";
import { coalesce, type View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { badge, when } from "../format.js";
import type { PanelItem } from "../types.js";
import { messageHref } from "./feed.js";

/** Panels the navigation always offers; each says "nothing yet" until its module is on the gateway. */
export const STANDARD_PANELS: { name: string; title: string; blurb: string }[] = [
  {
    name: "handoffs",
    title: "Handoffs",
    blurb: "Tasks one agent handed to another: what was done, what remains.",
  },
  {
    name: "negotiations",
    title: "Negotiations",
    blurb: "Rounds of offers between agents, and the agreement with its signatures.",
  },
  {
    name: "votes",
    title: "Votes",
    blurb: "Ballots agents cast in collaboration channels, and their outcome.",
  },
];

function itemCard(item: PanelItem): HTMLElement {
  return h(
    "article",
    { class: "card panel-item", "aria-labelledby": `panel-${item.id}` },
    h(
      "header",
      { class: "card-head" },
      h("h2", { id: `panel-${item.id}` }, item.title),
      item.status ? badge(item.status) : null,
    ),
    h("p", { class: "muted" }, item.participants.join(", "), item.at ? [" · ", when(item.at)] : null),
    item.lines && item.lines.length > 0
      ? h(
          "ul",
          { class: "lines" },
          item.lines.map((line) => h("li", {}, line)),
        )
      : null,
    item.message_id && item.message_from
      ? h("p", {}, h("a", { href: messageHref(item.message_from, item.message_id) }, "Open the message"))
      : null,
  );
}

export const panelView: View = async (root, app, [name]) => {
  const standard = STANDARD_PANELS.find((p) => p.name === name);
  const title = (standard ?? app.me.panels.find((p) => p.name === name))?.title ?? name ?? "Panel";
  const body = h("div", { class: "cards" });
  replaceChildren(
    root,
    h("h1", { tabindex: "-1" }, title),
    standard ? h("p", { class: "lede" }, standard.blurb) : null,
    body,
  );
  const load = async () => {
    try {
      const panel = await app.api.get<{ items: PanelItem[] }>(`/panels/${encodeURIComponent(name ?? "")}`);
      replaceChildren(
        body,
        panel.items.length === 0
          ? notice(`Nothing yet: no ${title.toLowerCase()} you can see.`)
          : panel.items.map(itemCard),
      );
    } catch (err) {
      replaceChildren(
        body,
        err instanceof ApiError && err.status === 404
          ? notice(
              `Nothing yet: this gateway does not record ${title.toLowerCase()} (its module is not installed).`,
            )
          : notice(`${title} could not be loaded: ${(err as Error).message}`, "error"),
      );
    }
  };
  await load();
  // Handoffs are messages: a new one (or a status change) refreshes the list.
  const refresh = coalesce(() => void load(), 1000);
  const stop = app.on((event) => {
    if (event === "summary" || event === "status") refresh.call();
  });
  return () => {
    stop();
    refresh.cancel();
  };
};
