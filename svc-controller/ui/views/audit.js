// @ts-check
/**
 * #/audit (admins): the audit log, newest first, a page at a time, and the Reload
 * button (POST /svc/api/reload, as SIGHUP does).
 */

import { explain, reloadRequest } from "../actions.js";
import { cell, h, messageArea } from "../dom.js";
import { absTime } from "../format.js";
import { refresh } from "../live.js";
import { api } from "../session.js";
import { state } from "../state.js";

/** @typedef {import("../state.js").View} View */

/**
 * Who did it: an account, a signed request, a webhook, SIGHUP.
 * @typedef {object} Actor
 * @property {string} kind
 * @property {string} [name]
 * @property {string} [delivery]
 */

/**
 * One entry of the audit log.
 * @typedef {object} AuditEntry
 * @property {number} seq
 * @property {string} time
 * @property {Actor} [actor]
 * @property {string} action
 * @property {{kind: string, id: string}} [job]
 * @property {string} [address]
 * @property {string} [node] cluster mode: the node that recorded it
 * @property {string} result "ok", "refused", …
 * @property {number} [status]
 * @property {string} [reason]
 * @property {number} [repeated] that many more identical refusals, the last at `time`
 */

const AUDIT_PAGE = 50;
const COLUMNS = ["Time", "Who", "Action", "Job", "Address", "Result"];

/** @param {Actor | undefined} actor */
function actorText(actor) {
  if (!actor) return "";
  switch (actor.kind) {
    case "account": return actor.name || "";
    case "signed": return "signed request";
    case "webhook": return "webhook" + (actor.delivery ? " " + actor.delivery : "");
    case "signal": return "SIGHUP";
    default: return "anonymous";
  }
}

/** @param {AuditEntry} entry */
function auditRow(entry) {
  const job = entry.job
    ? h("a", { href: (entry.job.kind === "job_http" ? "#/http/" : "#/job/") + encodeURIComponent(entry.job.id) },
      entry.job.id)
    : h("span", { class: "muted" }, "—");
  const result = entry.result === "ok" ? "ok"
    : entry.result + (entry.status ? " " + entry.status : "") + (entry.reason ? ": " + entry.reason : "")
      + (entry.repeated ? " (" + entry.repeated + " more times, the last at this time)" : "");
  return h("tr", { "data-seq": String(entry.seq) },
    cell("Time", h("time", { datetime: entry.time }, absTime(entry.time))),
    cell("Who", actorText(entry.actor)),
    cell("Action", entry.action.replace("_", " ")),
    cell("Job", job),
    // Cluster mode: the node that recorded it, under the address.
    cell("Address", [entry.address || h("span", { class: "muted" }, "—"),
      entry.node ? h("span", { class: "sub", title: "node that recorded it" }, entry.node) : null]),
    cell("Result", h("span", { class: "audit-" + entry.result }, result)));
}

/**
 * The audit view, rendered into `main`.
 * @param {HTMLElement} main
 * @returns {View}
 */
export function auditView(main) {
  document.title = "Audit · " + (state.env && state.env.name ? state.env.name : "svc");
  const message = messageArea("audit-message");
  const body = h("tbody");
  const more = h("button", { type: "button", id: "audit-more", hidden: true }, "Older entries");
  const reload = h("button", { type: "button", id: "reload", class: "primary" }, "Reload configuration");
  /** @type {number | null} the page before this entry comes next */
  let next = null;
  let loading = false;

  /** @param {boolean} reset from the newest entry again */
  async function load(reset) {
    if (loading) return;
    loading = true;
    const result = await api("GET", "/svc/api/audit?limit=" + AUDIT_PAGE + (!reset && next ? "&before=" + next : ""));
    loading = false;
    if (!result.ok) { message.set("error", explain(result)); return; }
    if (reset) body.replaceChildren();
    for (const entry of result.data.entries || []) body.appendChild(auditRow(entry));
    if (!body.firstChild) {
      body.appendChild(h("tr", null, h("td", { colspan: COLUMNS.length, class: "empty" }, "Nothing recorded yet.")));
    }
    next = result.data.next_before;
    more.hidden = !next;
  }

  more.addEventListener("click", () => load(false));
  reload.addEventListener("click", async () => {
    reload.disabled = true;
    message.set("", "Reloading…");
    const result = await reloadRequest();
    reload.disabled = false;
    if (result.ok) message.set("ok", "Configuration reloaded.");
    else message.set("error", explain(result));
    load(true);
    refresh();
  });

  main.replaceChildren(
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Dashboard"), " › Audit"),
    h("div", { class: "detail-head" }, h("h1", null, "Audit log"), reload),
    h("p", { class: "hint" }, "Every action, refused ones included, newest first. " +
      "Reload takes the configuration files again, as SIGHUP does."),
    message.el,
    h("div", { class: "card table-wrap" },
      h("table", { class: "responsive", id: "audit-table" },
        h("caption", { class: "visually-hidden" }, "Audit log"),
        h("thead", null, h("tr", null, COLUMNS.map((t) => h("th", { scope: "col" }, t)))),
        body)),
    more);
  load(true);
  return { key: "audit", update() {}, route() {}, destroy() {} };
}
