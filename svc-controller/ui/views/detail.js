// @ts-check
/**
 * #/job/<id> and #/http/<id>: a job's page, the parts every kind shares: name and
 * status, the cluster's warning, the description, the action buttons, the logs, the log
 * viewer (#/…/log/<counter>), the pictures of its recent runs and the run history.
 * What differs by kind (its facts, its actions and their endpoints) comes from
 * views/job.js and views/job_http.js.
 */

import { explain, needSecret } from "../actions.js";
import { driftOf, otherHolders, shortHash } from "../cluster.js";
import { append, empty, h, messageArea } from "../dom.js";
import { STATUS_TEXT, absTime, isNever, statusOf, timing } from "../format.js";
import { jobsById, maxCounter, runningCounter } from "../jobs.js";
import { refresh } from "../live.js";
import { applyRights } from "../session.js";
import { state } from "../state.js";
import { badge, countdown, timeCell } from "../widgets.js";
import { HistoryPanel } from "./history.js";
import { LogViewer } from "./log.js";
import { RunChartsPanel } from "./run_charts.js";

/** @typedef {import("../api.js").ApiResult} ApiResult */
/** @typedef {import("../dom.js").Fact} Fact */
/** @typedef {import("../dom.js").MessageArea} MessageArea */
/** @typedef {import("../state.js").Job} Job */
/** @typedef {import("../state.js").Kind} Kind */
/** @typedef {import("../state.js").Route} Route */
/** @typedef {import("../state.js").View} View */

/** @typedef {{counter: number}} RunTarget the log a Run now is to follow */

/**
 * One action button: `send` makes the request, `success` says what it did.
 * @typedef {object} Action
 * @property {string} name the button's id is action-<name>
 * @property {string} label
 * @property {string} cls
 * @property {(job: Job, target: RunTarget) => Promise<ApiResult>} send
 * @property {(job: Job, target: RunTarget) => string} success
 */

/**
 * The parts of the page a kind fills.
 * @typedef {object} Parts
 * @property {HTMLElement} info the first panel: schedule and more
 * @property {HTMLElement} side the second panel: commands or request, and the actions
 * @property {HTMLElement} actions the buttons' row
 * @property {HTMLElement} hint how the actions are authorised, or why they are not
 * @property {MessageArea} message how the last action went
 * @property {Record<string, HTMLButtonElement>} buttons by action name
 */

/**
 * What a kind of job adds to its page.
 * @typedef {object} KindPage
 * @property {Kind} kind
 * @property {string} noun "job", "HTTP job"
 * @property {string} crumb "Job", "HTTP job"
 * @property {Action[]} actions
 * @property {(job: Job, common: Fact[], parts: Parts) => void} render fills `info` and
 *   `side`, and sets the buttons and the hint
 */

/**
 * The facts every kind shows first.
 * @param {Job} job
 * @returns {Fact[]}
 */
function commonFacts(job) {
  return [
    ["ID", h("code", null, job.id)],
    ["Status", STATUS_TEXT[statusOf(job)] || job.status],
    ["Last run", timeCell(job.last_run)],
    ["Next run", isNever(job.next_run) ? countdown(job) : h("span", null, countdown(job), " ",
      h("span", { class: "muted", id: "next-run-local" }, "(" + absTime(job.next_run) + " your time)"))],
    ["Interval / schedule", timing(job) || "none"],
  ];
}

/**
 * Links to the job's logs, newest first, with the run going on (if any) listed.
 * @param {Kind} kind
 * @param {Job} job
 * @param {number} current the counter shown in the viewer
 */
function logLinks(kind, job, current) {
  const logs = (job.logs || []).slice().sort((a, b) => b.counter - a.counter);
  const running = kind === "job" ? runningCounter(job) : 0;
  if (running && !logs.some((l) => l.counter === running)) logs.unshift({ counter: running, status: "started" });
  if (!logs.length) return empty("No logs yet.");
  return h("ul", { class: "logs", "aria-label": "Logs, newest first" }, logs.map((log) => h("li", null, h("a", {
    href: "#/" + kind + "/" + encodeURIComponent(job.id) + "/log/" + log.counter,
    class: log.status,
    "aria-current": log.counter === current ? "true" : null,
    "data-counter": log.counter,
  }, log.status === "started" ? h("span", { class: "spinner", "aria-hidden": "true" }) : null,
  "#" + log.counter + " " + (STATUS_TEXT[log.status] || log.status)))));
}

/**
 * The note a job carries when its definition here differs from another live node's.
 * @param {HTMLElement} note
 * @param {Kind} kind
 * @param {string} id
 */
function showDrift(note, kind, id) {
  const drift = driftOf(kind, id);
  note.hidden = !drift;
  note.replaceChildren();
  if (!drift) return;
  append(note, ["⚠ This job's definition differs on " + otherHolders(drift).join(", ") +
    " (this node's is ", shortHash(drift.here), "). A run does what the node that claims it defines."]);
}

/**
 * Runs one action of the page, says how it went, and renders the page again.
 * @param {Action} action
 * @param {Job | undefined} job
 * @param {Parts} parts
 * @param {RunTarget} target
 * @param {() => void} update
 */
async function act(action, job, parts, target, update) {
  const { message } = parts;
  if (!job || needSecret(message)) return;
  message.set("", action.name + "…");
  parts.buttons[action.name].disabled = true;
  const result = await action.send(job, target);
  if (result.ok && result.data && result.data.skipped) {
    // 200, but nothing started (on_busy = skip): say why, and stay.
    message.set("notice", "Not run: " + (result.data.reason || result.message) + ".");
  } else if (result.ok) {
    message.set("ok", action.success(job, target));
  } else {
    message.set("error", explain(result));
  }
  try {
    await refresh();
  } finally {
    update();
  }
}

/**
 * The parts a kind fills, with its buttons.
 * @param {KindPage} page
 * @param {(action: Action) => void} onAction
 * @returns {Parts}
 */
function makeParts(page, onAction) {
  /** @type {Parts} */
  const parts = {
    info: h("div", { class: "card panel" }),
    side: h("div", { class: "card panel" }),
    actions: h("div", { class: "actions" }),
    hint: h("p", { class: "hint", id: "action-hint" }),
    message: messageArea("action-message"),
    buttons: {},
  };
  for (const action of page.actions) {
    parts.buttons[action.name] = h("button", {
      type: "button", class: action.cls, id: "action-" + action.name,
      "aria-describedby": "action-hint",
      onclick: () => onAction(action),
    }, action.label);
    parts.actions.appendChild(parts.buttons[action.name]);
  }
  return parts;
}

/** A job's page: built once, rendered again as the state changes. */
class DetailView {
  /**
   * @param {KindPage} page
   * @param {string} id
   * @param {HTMLElement} main where it is rendered
   */
  constructor(page, id, main) {
    this.page = page;
    this.id = id;
    this.key = page.kind + ":" + id;
    /** @type {RunTarget} */
    this.target = { counter: 0 };
    this.parts = makeParts(page, (action) => act(action, this.current(), this.parts, this.target, () => this.update()));
    this.head = h("div", { class: "detail-head" });
    this.description = h("div", { class: "description" });
    this.driftNote = h("p", { class: "message notice", id: "drift-note", role: "status", hidden: true });
    this.logsTitle = h("h2", { id: "logs-title" }, "Logs");
    this.logsBox = h("div");
    this.viewerBox = h("div");
    this.history = new HistoryPanel(page.kind, id);
    this.charts = new RunChartsPanel(page.kind, id);
    /** @type {LogViewer | null} */
    this.viewer = null;
    /** @type {string | undefined | null} the description shown */
    this.shownDescription = null;
    main.replaceChildren(
      h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Dashboard"), " › ", page.crumb),
      this.head, this.driftNote, this.description,
      h("div", { class: "grid" }, this.parts.info, this.parts.side),
      h("div", { class: "card panel viewer-logs" }, this.logsTitle, this.logsBox),
      this.viewerBox, this.charts.el, this.history.el);
  }

  /** The job as the Environment lists it now, if it does. */
  current() {
    return jobsById(this.page.kind)[this.id];
  }

  update() {
    const job = this.current();
    const { env, cluster } = state;
    const { head, parts } = this;
    if (!env) return;
    if (!job) {
      head.replaceChildren(h("h1", null, "Not found"));
      parts.info.replaceChildren(h("p", null, "There is no " + this.page.noun + " with the ID ",
        h("code", null, this.id), ". ", h("a", { href: "#/" }, "Back to the dashboard.")));
      return;
    }
    document.title = job.name + " · " + (env.name || "svc");
    // In cluster mode the run history lists every node's runs and logs; this list is
    // what this node ran (and a run going on anywhere).
    this.logsTitle.textContent = cluster && cluster.enabled ? "Logs on this node" : "Logs";
    head.replaceChildren(h("h1", { id: "job-name" }, job.name), badge(statusOf(job), "job-status"));
    showDrift(this.driftNote, this.page.kind, this.id);
    if (job.description !== this.shownDescription) {
      // Operator-written configuration, documented as HTML: shown as HTML. The page's
      // Content-Security-Policy still refuses any script in it.
      this.description.innerHTML = job.description || "";
      this.shownDescription = job.description;
    }
    this.page.render(job, commonFacts(job), parts);
    this.logsBox.replaceChildren(logLinks(this.page.kind, job, this.viewer ? this.viewer.counter : 0));
    this.history.jobUpdated(job);
    this.charts.jobUpdated(job);
    applyRights(parts.buttons, parts.hint);
  }

  /** @param {Route} r the log asked for, if any */
  route(r) {
    const wanted = r.counter || 0;
    if (this.viewer && this.viewer.counter === wanted) return;
    this.destroy();
    this.viewer = null;
    this.viewerBox.replaceChildren();
    if (wanted) {
      const job = this.current();
      this.viewer = new LogViewer(this.page.kind, this.id, wanted, !!job && wanted > maxCounter(job));
      this.viewerBox.appendChild(this.viewer.el);
    }
    this.update();
    if (this.viewer && r.scroll) this.viewer.el.scrollIntoView({ block: "start" });
  }

  /**
   * @param {string} name
   * @param {any} data
   */
  onEvent(name, data) {
    this.history.onEvent(name, data);
    this.charts.onEvent(name, data);
  }

  destroy() {
    if (this.viewer) this.viewer.close();
  }
}

/**
 * A job's page, rendered into `main`.
 * @param {KindPage} page
 * @param {string} id
 * @param {HTMLElement} main
 * @returns {View}
 */
export function detailView(page, id, main) {
  return new DetailView(page, id, main);
}
