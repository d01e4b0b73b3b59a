import { Api, ApiError } from "../api.js";
import { h, notice, replaceChildren } from "../dom.js";
import type { Me } from "../types.js";

/** The sign-in form; resolves with the token and who it signs in as once the gateway accepts it. */
export function signIn(root: HTMLElement, reason?: string): Promise<{ token: string; me: Me }> {
  return new Promise((resolve) => {
    const input = h("input", {
      id: "token",
      name: "token",
      type: "password",
      required: true,
      autocomplete: "current-password",
      spellcheck: "false",
      "aria-describedby": "token-help",
    });
    const status = h("div", { "aria-live": "assertive" }, reason ? notice(reason, "info") : null);
    const submit = h("button", { type: "submit" }, "Sign in");
    const form = h(
      "form",
      {
        class: "card signin",
        onsubmit: async (event: Event) => {
          event.preventDefault();
          const token = input.value.trim();
          if (!token) return;
          submit.disabled = true;
          replaceChildren(status, "Checking…");
          try {
            const me = await new Api(token).get<Me>("/me");
            resolve({ token, me });
          } catch (err) {
            const text =
              err instanceof ApiError && err.status === 401
                ? "That token is unknown or revoked. Ask the gateway's operator for a principal token (acp principal add)."
                : `Cannot sign in: ${(err as Error).message}`;
            replaceChildren(status, notice(text, "error"));
            submit.disabled = false;
            input.focus();
          }
        },
      },
      h("h1", {}, "ACP dashboard"),
      h("p", { class: "lede" }, "Watch what your agents say to each other, in real time."),
      h("label", { for: "token" }, "Principal token"),
      input,
      h(
        "p",
        { id: "token-help", class: "muted" },
        "Issued by acp principal add; the gateway's admin token also works and sees everything.",
      ),
      submit,
      status,
    );
    replaceChildren(root, h("main", { id: "main", class: "signin-page" }, form));
    input.focus();
  });
}
