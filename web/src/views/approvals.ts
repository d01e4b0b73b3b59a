import type { View } from "../app.js";
import { h, notice, replaceChildren } from "../dom.js";
import { ago, badge, pre, when } from "../format.js";
import type { ApprovalView } from "../types.js";

function approvalCard(
  record: ApprovalView,
  decide: (verb: "approve" | "deny", note: string) => Promise<void>,
): HTMLElement {
  const c = record.command;
  const pending = record.status === "pending";
  const noteId = `note-${record.id}`;
  const note = h("textarea", {
    id: noteId,
    rows: 2,
    maxlength: 2000,
    placeholder: "Optional: why (kept with the decision)",
  });
  const result = h("p", { class: "decision-result", role: "status" });
  const buttons = pending
    ? h(
        "div",
        { class: "actions" },
        h("label", { for: noteId }, "Note"),
        note,
        h(
          "div",
          { class: "buttons" },
          h(
            "button",
            {
              type: "button",
              class: "approve",
              onclick: (event: Event) => void act(event, "approve"),
            },
            "Approve",
          ),
          h(
            "button",
            { type: "button", class: "deny", onclick: (event: Event) => void act(event, "deny") },
            "Deny",
          ),
        ),
        result,
      )
    : null;
  async function act(event: Event, verb: "approve" | "deny") {
    const form = (event.target as HTMLElement).closest(".actions");
    for (const button of form?.querySelectorAll("button") ?? []) button.disabled = true;
    replaceChildren(result, verb === "approve" ? "Approving…" : "Denying…");
    try {
      await decide(verb, note.value.trim());
    } catch (err) {
      replaceChildren(result, notice(`Not recorded: ${(err as Error).message}`, "error"));
      for (const button of form?.querySelectorAll("button") ?? []) button.disabled = false;
    }
  }
  return h(
    "article",
    {
      class: `card approval approval-${record.status}`,
      "aria-labelledby": `approval-${record.id}`,
      "data-id": record.id,
    },
    h(
      "header",
      { class: "card-head" },
      h("h2", { id: `approval-${record.id}` }, `${c.action} → ${c.to}`),
      badge(record.status),
    ),
    h("p", { class: "reason" }, record.reason),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Requested by"),
      h("dd", {}, `${record.requested_by}${record.principal ? ` for ${record.principal}` : ""}`),
      h("dt", {}, "Priority"),
      h("dd", {}, badge(c.priority)),
      h("dt", {}, "Asked"),
      h("dd", {}, when(record.created_at), ` (${ago(record.created_at)})`),
      pending
        ? [h("dt", {}, "Expires"), h("dd", {}, when(record.expires_at), ` (${ago(record.expires_at)})`)]
        : [
            h("dt", {}, "Decided"),
            h(
              "dd",
              {},
              when(record.decided_at),
              record.decided_by ? ` by ${record.decided_by}` : "",
              record.note ? ` — “${record.note}”` : "",
            ),
          ],
      record.fallbacks.length > 0
        ? [h("dt", {}, "May fall back to"), h("dd", {}, record.fallbacks.join(", "))]
        : null,
    ),
    h("details", {}, h("summary", {}, "Command parameters"), pre(c.parameters)),
    buttons,
  );
}

export const approvalsView: View = async (root, app) => {
  let show: "pending" | "" = "pending";
  const body = h("div", { class: "cards" });
  const toggle = h(
    "label",
    { class: "inline" },
    h("input", {
      type: "checkbox",
      onchange: (event: Event) => {
        show = (event.target as HTMLInputElement).checked ? "" : "pending";
        void load();
      },
    }),
    " Show decided and expired approvals too",
  );
  replaceChildren(
    root,
    h("h1", { tabindex: "-1" }, "Approvals"),
    h(
      "p",
      { class: "lede" },
      "Commands waiting for a human decision. The command runs (or is refused) as soon as you decide.",
    ),
    toggle,
    body,
  );
  const load = async () => {
    try {
      const { approvals } = await app.api.get<{ approvals: ApprovalView[] }>("/approvals", {
        status: show,
      });
      const decide = (record: ApprovalView) => async (verb: "approve" | "deny", note: string) => {
        await app.api.post(`/approvals/${encodeURIComponent(record.id)}/${verb}`, note ? { note } : {});
        await load();
      };
      replaceChildren(
        body,
        approvals.length === 0
          ? notice(show === "pending" ? "Nothing is waiting for your approval." : "No approvals yet.")
          : approvals.map((record) => approvalCard(record, decide(record))),
      );
    } catch (err) {
      replaceChildren(body, notice(`Approvals could not be loaded: ${(err as Error).message}`, "error"));
    }
  };
  await load();
  return app.on((event, data) => {
    if (event === "changed" && (data as { what: string }).what === "approvals") void load();
  });
};
