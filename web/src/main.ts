import "./styles.css";
import { Api, tokenStore } from "./api.js";
import type { AppContext, View } from "./app.js";
import { h, replaceChildren } from "./dom.js";
import type { Me, WebhookStatus } from "./types.js";
import { agentsView } from "./views/agents.js";
import { approvalsView } from "./views/approvals.js";
import { federationView } from "./views/federation.js";
import { feedView } from "./views/feed.js";
import { messageView } from "./views/message.js";
import { panelView, STANDARD_PANELS } from "./views/panels.js";
import { sessionsView, sessionView } from "./views/sessions.js";
import { signIn } from "./views/signin.js";
import { volumeView } from "./views/volume.js";
import { failing, webhooksView } from "./views/webhooks.js";

const ROUTES: [RegExp, View, string][] = [
  [/^\/feed$/, feedView, "Live feed"],
  [/^\/agents$/, agentsView, "Agents"],
  [/^\/messages\/([^/]+)\/([^/]+)$/, messageView, "Message"],
  [/^\/approvals$/, approvalsView, "Approvals"],
  [/^\/sessions$/, sessionsView, "Sessions"],
  [/^\/sessions\/([^/]+)$/, sessionView, "Session"],
  [/^\/panels\/([a-z0-9-]+)$/, panelView, "Panel"],
  [/^\/volume$/, volumeView, "Volume"],
  [/^\/webhooks$/, webhooksView, "Webhooks"],
  [/^\/federation$/, federationView, "Federation"],
];

const root = document.getElementById("app") as HTMLElement;

async function start(reason?: string): Promise<void> {
  const saved = tokenStore.get();
  let session: { token: string; me: Me } | undefined;
  if (saved) {
    try {
      session = { token: saved, me: await new Api(saved).get<Me>("/me") };
    } catch {
      tokenStore.clear();
    }
  }
  session ??= await signIn(root, reason);
  tokenStore.set(session.token);
  if (!location.hash.startsWith("#/")) history.replaceState(null, "", "#/feed");
  run(session.token, session.me);
}

function run(token: string, me: Me): void {
  const api = new Api(token);
  const listeners = new Set<(event: string, data: unknown) => void>();
  const liveState = h("span", { class: "live live-connecting", role: "status" }, "connecting…");
  const approvalsCount = h("span", { class: "count", "aria-label": "pending approvals" });
  const webhookState = h("a", { href: "#/webhooks", class: "webhooks-state" });
  const main = h("main", { id: "main", tabindex: "-1" });
  const extraPanels = me.panels.filter((p) => !STANDARD_PANELS.some((s) => s.name === p.name));
  const navItems: [string, string, Node?][] = [
    ["#/feed", "Live feed"],
    ["#/agents", "Agents"],
    ["#/approvals", "Approvals", approvalsCount],
    ["#/sessions", "Sessions"],
    ...[...STANDARD_PANELS, ...extraPanels].map((p): [string, string] => [`#/panels/${p.name}`, p.title]),
    ["#/volume", "Volume"],
  ];
  const federationItem = h("li", { hidden: true }, h("a", { href: "#/federation" }, "Federation"));
  const nav = h(
    "nav",
    { "aria-label": "Views" },
    h(
      "ul",
      {},
      navItems.map(([href, text, extra]) => h("li", {}, h("a", { href }, text, extra ? [" ", extra] : null))),
      federationItem,
    ),
  );
  let stopStream: () => void = () => undefined;
  const signOut = (reason?: string) => {
    stopStream();
    tokenStore.clear();
    listeners.clear();
    void start(reason);
  };
  api.onUnauthorized = () => signOut("Your token is no longer accepted; sign in again.");
  const who = me.viewer.kind === "admin" ? "admin (sees everything)" : `principal ${me.viewer.principal_id}`;
  replaceChildren(
    root,
    h(
      "header",
      { class: "topbar" },
      h("a", { href: "#/feed", class: "brand" }, "ACP transparency"),
      h("span", { class: "who" }, "Signed in as ", h("strong", {}, who)),
      liveState,
      webhookState,
      h("button", { type: "button", class: "link", onclick: () => signOut() }, "Sign out"),
    ),
    h("div", { class: "layout" }, nav, main),
  );

  const refreshApprovals = async () => {
    const { approvals } = await api
      .get<{ approvals: unknown[] }>("/approvals", { status: "pending" })
      .catch(() => ({ approvals: [] }));
    replaceChildren(approvalsCount, approvals.length > 0 ? String(approvals.length) : "");
    approvalsCount.hidden = approvals.length === 0;
  };
  const refreshWebhooks = async () => {
    const { webhooks } = await api
      .get<{ webhooks: WebhookStatus[] }>("/webhooks")
      .catch(() => ({ webhooks: [] }));
    const bad = webhooks.filter(failing).length;
    webhookState.hidden = webhooks.length === 0;
    webhookState.className = `webhooks-state${bad > 0 ? " bad" : ""}`;
    replaceChildren(
      webhookState,
      `Chat webhooks: ${bad > 0 ? `${bad} of ${webhooks.length} failing` : `${webhooks.length} ok`}`,
    );
  };
  // Federation is the admin's, and only on a gateway with a federation domain.
  federationItem.hidden = !me.admin_views.includes("federation");
  void refreshApprovals();
  void refreshWebhooks();
  const webhookTimer = setInterval(() => void refreshWebhooks(), 15_000);

  stopStream = (() => {
    const stop = api.follow(
      (event, data) => {
        if (event === "changed" && (data as { what: string }).what === "approvals") void refreshApprovals();
        for (const listener of listeners) listener(event, data);
      },
      (state) => {
        liveState.className = `live live-${state}`;
        replaceChildren(liveState, state === "live" ? "● live" : "reconnecting…");
      },
    );
    return () => {
      stop();
      clearInterval(webhookTimer);
      window.removeEventListener("hashchange", route);
    };
  })();

  const app: AppContext = {
    api,
    me,
    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    navigate: (hash) => {
      location.hash = hash;
    },
  };

  let cleanup: (() => void) | undefined;
  let generation = 0;
  async function route(): Promise<void> {
    const path = location.hash.replace(/^#/, "") || "/feed";
    const found = ROUTES.map(([pattern, view, title]) => ({ match: pattern.exec(path), view, title })).find(
      (r) => r.match,
    );
    cleanup?.();
    cleanup = undefined;
    const mine = ++generation;
    for (const link of nav.querySelectorAll("a")) {
      const current =
        path === link.getAttribute("href")?.slice(1) ||
        (path.startsWith("/messages/") && link.getAttribute("href") === "#/feed");
      if (current) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    if (!found) {
      replaceChildren(
        main,
        h("h1", { tabindex: "-1" }, "Not found"),
        h("p", {}, h("a", { href: "#/feed" }, "Go to the live feed")),
      );
      return;
    }
    document.title = `${found.title} · ACP dashboard`;
    replaceChildren(main, h("p", { class: "muted" }, "Loading…"));
    const done = await found.view(main, app, found.match?.slice(1) ?? []);
    if (mine !== generation) {
      // The reader moved on while this view loaded: undo its subscriptions at once.
      if (typeof done === "function") done();
      return;
    }
    if (typeof done === "function") cleanup = done;
    // Keyboard and screen-reader users land on the new view's heading.
    (main.querySelector("h1") as HTMLElement | null)?.focus({ preventScroll: true });
  }
  window.addEventListener("hashchange", route);
  void route();
}

/** The skip link moves focus to the content without touching the route in the URL's hash. */
document.addEventListener("click", (event) => {
  const target = (event.target as HTMLElement).closest(".skip-link");
  if (!target) return;
  event.preventDefault();
  (document.getElementById("main") as HTMLElement | null)?.focus();
});

void start();
