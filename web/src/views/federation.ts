import type { View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { ago, badge, duration, when } from "../format.js";
import type { FederationPeer, FederationStatusView } from "../types.js";

/** How often the view reads the links again while it is open (their figures change without events). */
const REFRESH_MS = 5_000;

/** The admin accepts a peer's new gateway key only after ticking that it was checked out of band. */
function pendingKeyChange(peer: FederationPeer, accept: () => Promise<void>): HTMLElement | null {
  const pending = peer.pending_keys;
  if (!pending) return null;
  const checkId = `checked-${peer.domain}`;
  const result = h("p", { class: "decision-result", role: "status" });
  const button = h(
    "button",
    {
      type: "button",
      class: "approve",
      disabled: true,
      onclick: async () => {
        button.disabled = true;
        replaceChildren(result, "Accepting…");
        try {
          await accept();
        } catch (err) {
          replaceChildren(result, notice(`Not accepted: ${(err as Error).message}`, "error"));
          button.disabled = false;
        }
      },
    },
    `Accept ${peer.domain}'s new key`,
  );
  const checked = h("input", {
    type: "checkbox",
    id: checkId,
    onchange: () => {
      button.disabled = !checked.checked;
    },
  });
  return h(
    "section",
    { class: "pending-key", "aria-label": `Pending key change of ${peer.domain}` },
    h("h3", {}, "Pending key change"),
    h(
      "p",
      {},
      `${peer.domain}'s /.well-known/acp shows gateway keys that are not pinned (seen `,
      when(pending.seen_at),
      "). Its traffic signed by them is refused until an admin accepts them.",
    ),
    h(
      "ul",
      { class: "kids" },
      pending.kids.map((kid) => h("li", {}, h("code", {}, kid))),
    ),
    h(
      "p",
      {},
      "Check the new key with ",
      peer.domain,
      "'s operator first. From a shell: ",
      h("code", {}, `acp federation accept-key ${peer.domain}`),
    ),
    h(
      "div",
      { class: "actions" },
      h("label", { class: "inline" }, checked, ` I checked the new key with ${peer.domain}`),
      h("div", { class: "buttons" }, button),
      result,
    ),
  );
}

function refusals(counts: Record<string, number>): string {
  const entries = Object.entries(counts);
  if (entries.length === 0) return "none";
  return entries.map(([reason, n]) => `${reason}: ${n}`).join(", ");
}

function peerCard(peer: FederationPeer, accept: () => Promise<void>): HTMLElement {
  const link = peer.link;
  const down = link?.last_error != null;
  return h(
    "article",
    { class: "card peer", "aria-labelledby": `peer-${peer.domain}`, "data-domain": peer.domain },
    h(
      "header",
      { class: "card-head" },
      h("h2", { id: `peer-${peer.domain}` }, peer.domain),
      badge(peer.state, peer.state === "blocked" ? "revoked" : "established"),
      peer.pending_keys ? badge("key change pending", "warning") : null,
      down ? badge("unreachable", "failed") : null,
    ),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Endpoint"),
      h("dd", {}, peer.endpoint ?? peer.url),
      h("dt", {}, "Admitted by"),
      h("dd", {}, peer.admitted_by === "admin" ? "an admin" : "the open policy", " ", when(peer.added_at)),
      h("dt", {}, "Pinned keys"),
      h(
        "dd",
        {},
        peer.pinned_keys.length > 0 ? peer.pinned_keys.map((kid) => h("code", {}, kid, " ")) : "none yet",
      ),
      h("dt", {}, "Queued here"),
      h("dd", { "data-field": "queued" }, String(link?.queued ?? 0)),
      h("dt", {}, "Oldest queued"),
      h(
        "dd",
        { "data-field": "oldest" },
        link?.oldest_queued_seconds == null ? "—" : `${duration(link.oldest_queued_seconds * 1000)} old`,
      ),
      h("dt", {}, "Last contact"),
      h(
        "dd",
        { "data-field": "last-contact" },
        link?.last_contact_at ? [when(link.last_contact_at), ` (${ago(link.last_contact_at)})`] : "never",
      ),
      down ? [h("dt", {}, "Last error"), h("dd", { "data-field": "last-error" }, link?.last_error)] : null,
      h("dt", {}, "Refusals"),
      h("dd", { "data-field": "refusals" }, refusals(link?.refusals ?? {})),
      h("dt", {}, "Forwarded / received"),
      h("dd", {}, `${link?.forwarded ?? 0} / ${link?.received ?? 0}`),
    ),
    pendingKeyChange(peer, accept),
  );
}

/** The admin's view of federation: this gateway's domain and policy, each peer and its link. */
export const federationView: View = async (root, app) => {
  const head = h("p", { class: "lede" });
  const body = h("div", { class: "cards" });
  replaceChildren(root, h("h1", { tabindex: "-1" }, "Federation"), head, body);
  const load = async () => {
    try {
      const status = await app.api.admin.get<FederationStatusView>("/federation");
      replaceChildren(
        head,
        "This gateway is ",
        h("strong", {}, status.domain),
        ` (${status.policy === "open" ? "open policy: any domain that verifies may call" : "allow list: admitted peers only"}). Peers reach it at `,
        h("code", {}, status.endpoint),
        ".",
      );
      const accept = (peer: FederationPeer) => async () => {
        await app.api.admin.post(`/federation/peers/${encodeURIComponent(peer.domain)}/accept-key`);
        await load();
      };
      replaceChildren(
        body,
        status.peers.length === 0
          ? notice("No peer yet: admit one with acp federation add DOMAIN --url URL.")
          : status.peers.map((peer) => peerCard(peer, accept(peer))),
      );
    } catch (err) {
      replaceChildren(body, notice(`Federation could not be loaded: ${(err as Error).message}`, "error"));
    }
  };
  await load();
  // Reads again unless the admin is in the middle of accepting a key (the tick would be lost).
  const timer = setInterval(() => {
    if (!body.querySelector(".pending-key input:checked")) void load();
  }, REFRESH_MS);
  return () => clearInterval(timer);
};
