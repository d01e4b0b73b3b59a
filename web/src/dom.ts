/**
 * The one DOM helper: `h("a", { href, class: "x", onclick }, "text", child)`. Text is always set as
 * text (never parsed as HTML), so nothing a message says can inject markup.
 */
export type Child = Node | string | number | null | undefined | false | Child[];
type Handler = (event: Event) => void;
export type Attrs = Record<string, string | number | boolean | Handler | null | undefined>;

function apply(element: Element, attrs: Attrs): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === "function") {
      element.addEventListener(name.replace(/^on/, ""), value);
    } else if (value === true) {
      element.setAttribute(name, "");
    } else {
      element.setAttribute(name, String(value));
    }
  }
}

function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  apply(element, attrs);
  append(element, children);
  return element;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** The same for SVG elements (charts, the dependency graph). */
export function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  apply(element, attrs);
  append(element, children);
  return element;
}

export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

/** A visible, announced message in place of content ("Nothing yet", errors). */
export function notice(text: string, kind: "empty" | "error" | "info" = "empty"): HTMLElement {
  return h("p", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}
