import { ApiError } from "../api.js";
import type { View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { badge, duration, short, summaryOf, when } from "../format.js";
import type { MessageDetail } from "../types.js";

const FLOW = ["queued", "delivered", "acknowledged"] as const;

/** queued → delivered → acknowledged as a row of steps; failed/expired end it early. */
function timeline(detail: MessageDetail): HTMLElement {
  const at = new Map(detail.timeline.map((step) => [step.status, step.at]));
  const end = detail.timeline.find((step) => step.status === "failed" || step.status === "expired");
  const steps: { status: string; at: string | undefined }[] = FLOW.map((status) => ({
    status,
    at: at.get(status),
  }));
  if (end) steps.push({ status: end.status, at: end.at });
  const queued = at.get("queued");
  return h(
    "ol",
    { class: "timeline", "aria-label": "Delivery status" },
    steps.map((step) =>
      h(
        "li",
        { class: `step ${step.at ? "done" : "todo"} step-${step.status}` },
        h("span", { class: "step-name" }, step.status),
        h("span", { class: "step-time" }, step.at ? when(step.at) : "not yet"),
        step.at && queued && step.status !== "queued"
          ? h("span", { class: "step-delta" }, `+${duration(Date.parse(step.at) - Date.parse(queued))}`)
          : null,
      ),
    ),
  );
}

function signature(detail: MessageDetail): HTMLElement {
  const sig = detail.signature;
  const ok = sig.result === "verified";
  return h(
    "div",
    { class: `signature ${ok ? "ok" : "bad"}` },
    h(
      "strong",
      {},
      ok
        ? "✓ Signature verified"
        : sig.result === "unavailable"
          ? "Signature not checkable"
          : "✗ Signature not valid",
    ),
    h("span", {}, ` — ${sig.detail}`),
  );
}

function headersTable(headers: Record<string, unknown>): HTMLElement {
  return h(
    "table",
    { class: "table kv" },
    h("caption", {}, "Identity headers (as signed)"),
    h(
      "tbody",
      {},
      Object.entries(headers).map(([key, value]) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, key),
          h("td", {}, typeof value === "string" ? value : JSON.stringify(value)),
        ),
      ),
    ),
  );
}

function auditTable(detail: MessageDetail): HTMLElement {
  if (detail.audit.length === 0)
    return notice(
      "No relay audit entry for this message on this gateway (another gateway relayed it, or the audit log is off).",
    );
  return h(
    "table",
    { class: "table" },
    h("caption", {}, "Relay audit entries"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Seq", "Time", "Direction", "Channel", "Summary", "Posted to chat", "Hash", "File"].map((t) =>
          h("th", { scope: "col" }, t),
        ),
      ),
    ),
    h(
      "tbody",
      {},
      detail.audit.map((entry) =>
        h(
          "tr",
          {},
          h("td", {}, String(entry.seq)),
          h("td", {}, when(entry.ts)),
          h("td", {}, entry.direction),
          h("td", {}, entry.channel),
          h("td", {}, entry.encrypted ? "An encrypted exchange occurred." : entry.summary),
          h("td", {}, entry.discord_summary === undefined ? "—" : entry.discord_summary ? "yes" : "no"),
          h("td", { title: entry.hash }, h("code", {}, short(entry.hash, 12))),
          h("td", {}, h("code", {}, `${entry.file}:${entry.line}`)),
        ),
      ),
    ),
  );
}

export const messageView: View = async (root, app, [sender, id]) => {
  const from = decodeURIComponent(sender ?? "");
  const messageId = decodeURIComponent(id ?? "");
  const heading = h("h1", { tabindex: "-1" }, "Message");
  const body = h("div", {});
  replaceChildren(root, h("p", {}, h("a", { href: "#/feed" }, "← Back to the feed")), heading, body);
  const load = async () => {
    try {
      const path = `/messages/${encodeURIComponent(messageId)}?from=${encodeURIComponent(from)}`;
      render(heading, body, await app.api.get<MessageDetail>(path));
    } catch (err) {
      const text =
        err instanceof ApiError && err.status === 404
          ? `There is no message ${messageId} you can see.`
          : (err as Error).message;
      replaceChildren(body, notice(text, "error"));
    }
  };
  await load();
  // The timeline moves on while the page is open (delivered, acknowledged).
  return app.on((event, data) => {
    const update = data as { id?: string; from?: string };
    if (event === "status" && update.id === messageId && update.from === from) void load();
  });
};

function render(heading: HTMLElement, body: HTMLElement, detail: MessageDetail): void {
  const { item } = detail;
  replaceChildren(heading, `${item.from.agent} → ${item.to.agent}`);
  replaceChildren(
    body,
    h(
      "section",
      { class: "card", "aria-label": "Summary" },
      h("p", { class: "summary-line" }, badge(item.type), " ", item.encrypted ? "🔒 " : "", summaryOf(item)),
      item.encrypted ? notice("An encrypted exchange occurred: the payload is not shown.", "info") : null,
      item.custodial
        ? notice(
            `Signed by the gateway on ${item.from.agent}'s behalf, with the key it holds for this custodial agent.`,
            "info",
          )
        : null,
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "Message id"),
        h("dd", {}, h("code", {}, item.id)),
        h("dt", {}, "Method"),
        h("dd", {}, h("code", {}, item.method)),
        h("dt", {}, "From"),
        h("dd", {}, `${item.from.agent} (principal ${item.from.principal ?? "unknown"})`),
        h("dt", {}, "To"),
        h("dd", {}, `${item.to.agent} (principal ${item.to.principal ?? "unknown"})`),
        h("dt", {}, "Status"),
        h(
          "dd",
          {},
          badge(detail.status),
          ` · ${detail.retry_count} ${detail.retry_count === 1 ? "retry" : "retries"}`,
        ),
        detail.last_error ? [h("dt", {}, "Last error"), h("dd", {}, detail.last_error)] : null,
        detail.dead_letter
          ? [
              h("dt", {}, "Dead letter"),
              h("dd", {}, `${detail.dead_letter.reason}: ${detail.dead_letter.detail}`),
            ]
          : null,
      ),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "delivery" },
      h("h2", { id: "delivery" }, "Delivery"),
      timeline(detail),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "sig" },
      h("h2", { id: "sig" }, "Signature"),
      signature(detail),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "headers" },
      h("h2", { id: "headers" }, "Headers"),
      detail.headers
        ? headersTable(detail.headers)
        : notice("The envelope is past retention; its headers are no longer kept."),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "audit" },
      h("h2", { id: "audit" }, "Audit"),
      auditTable(detail),
    ),
  );
}
