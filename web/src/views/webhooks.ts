import type { View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { badge, when } from "../format.js";
import type { WebhookStatus } from "../types.js";

/** A webhook is failing when its last attempt failed (an error newer than the last success). */
export function failing(status: WebhookStatus): boolean {
  return (
    status.last_error_at !== undefined &&
    (status.last_success_at === undefined || status.last_error_at > status.last_success_at)
  );
}

export const webhooksView: View = async (root, app) => {
  const body = h("div", {});
  replaceChildren(
    root,
    h("h1", { tabindex: "-1" }, "Chat webhooks"),
    h(
      "p",
      { class: "lede" },
      "Every relayed message's summary is also posted to these chat rooms (acp gateway --summary-webhook), batched and retried. Only each webhook's host is shown: its address is a secret.",
    ),
    body,
  );
  try {
    const { webhooks } = await app.api.get<{ webhooks: WebhookStatus[] }>("/webhooks");
    if (webhooks.length === 0) {
      replaceChildren(body, notice("No chat webhook is configured on this gateway."));
      return;
    }
    replaceChildren(
      body,
      h(
        "table",
        { class: "table" },
        h("caption", {}, "Webhooks"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            [
              "Webhook",
              "State",
              "Posts",
              "Summaries sent",
              "Failed attempts",
              "Dropped",
              "Waiting",
              "Last success",
              "Last error",
            ].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        h(
          "tbody",
          {},
          webhooks.map((w) =>
            h(
              "tr",
              {},
              h("th", { scope: "row" }, w.target),
              h("td", {}, failing(w) ? badge("failing", "failed") : badge("ok", "acknowledged")),
              h("td", {}, String(w.posts)),
              h("td", {}, String(w.lines)),
              h("td", {}, String(w.failures)),
              h("td", {}, String(w.dropped)),
              h("td", {}, String(w.queued)),
              h("td", {}, when(w.last_success_at)),
              h("td", {}, w.last_error ? [w.last_error, " (", when(w.last_error_at), ")"] : "—"),
            ),
          ),
        ),
      ),
    );
  } catch (err) {
    replaceChildren(body, notice(`Webhooks could not be loaded: ${(err as Error).message}`, "error"));
  }
};
