// @ts-check
/**
 * Building the page: elements from data, always as text nodes and attributes (never
 * HTML from data), and the small pieces every view uses (tables, facts, messages).
 */

/**
 * What h() and append() take as children: nodes, text, nothing, or lists of them.
 * @typedef {Node | string | null | undefined | false | ChildList} Child
 * @typedef {Child[]} ChildList
 */

/**
 * Attributes of h(): `class`, `text`, `on<event>` handlers, and plain attributes
 * (`true` sets an empty one; null, undefined and false leave it out).
 * @typedef {Record<string, string | number | boolean | null | undefined | ((ev: any) => void)>} Attrs
 */

/**
 * Creates an element: h("a", {href: "#", class: "x"}, "text", child, ...).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === "function") {
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    } else if (key === "class") el.className = String(value);
    else if (key === "text") el.textContent = String(value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/**
 * Appends children (text as text nodes; lists flattened; nothing skipped).
 * @param {Node} el
 * @param {Child} child
 */
export function append(el, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) child.forEach((c) => append(el, c));
  else el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
}

/**
 * The page's element with this id; throws when the page lacks it.
 * @param {string} id
 * @returns {HTMLElement}
 */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error("the page lacks #" + id);
  return el;
}

/**
 * The page's input with this id.
 * @param {string} id
 * @returns {HTMLInputElement}
 */
export function inputById(id) {
  const el = byId(id);
  if (!(el instanceof HTMLInputElement)) throw new Error("#" + id + " is no input");
  return el;
}

/**
 * The page's button with this id.
 * @param {string} id
 * @returns {HTMLButtonElement}
 */
export function buttonById(id) {
  const el = byId(id);
  if (!(el instanceof HTMLButtonElement)) throw new Error("#" + id + " is no button");
  return el;
}

/**
 * The page's link with this id.
 * @param {string} id
 * @returns {HTMLAnchorElement}
 */
export function linkById(id) {
  const el = byId(id);
  if (!(el instanceof HTMLAnchorElement)) throw new Error("#" + id + " is no link");
  return el;
}

/** @param {string} text */
export function empty(text) {
  return h("p", { class: "empty" }, text);
}

/**
 * A table whose cells carry their column's name (shown on narrow screens).
 * @param {string} caption
 * @param {string[]} heads
 * @param {Node[]} rows
 */
export function table(caption, heads, rows) {
  return h("table", { class: "responsive" },
    h("caption", { class: "visually-hidden" }, caption),
    h("thead", null, h("tr", null, heads.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", null, rows.length ? rows
      : h("tr", null, h("td", { colspan: heads.length, class: "empty" }, "Nothing matches the filter."))));
}

/**
 * @param {string} label the column's name
 * @param {Child} content
 * @param {string} [cls]
 */
export function cell(label, content, cls) {
  return h("td", { "data-label": label, class: cls }, content);
}

/** @typedef {[string, Child]} Fact a name and its value; an empty value is left out */

/** @param {Fact[]} pairs */
export function facts(pairs) {
  const dl = h("dl", { class: "facts" });
  for (const [name, value] of pairs) {
    if (value === null || value === undefined || value === "") continue;
    append(dl, [h("dt", null, name), h("dd", null, value)]);
  }
  return dl;
}

/**
 * @typedef {object} MessageArea
 * @property {HTMLDivElement} el
 * @property {(kind: string, text: string) => void} set kind: "", "ok", "notice", "error"
 * @property {() => void} clear
 */

/**
 * A line that says how an action went, read out by screen readers.
 * @param {string} id
 * @returns {MessageArea}
 */
export function messageArea(id) {
  const el = h("div", { class: "message", id, role: "status", "aria-live": "polite" });
  return {
    el,
    set(kind, text) {
      el.className = "message " + kind;
      el.textContent = text;
    },
    clear() {
      el.className = "message";
      el.textContent = "";
    },
  };
}
