// @ts-check
/**
 * A job's run history (GET /svc/api/job_exec/runs, /svc/api/job_http/runs): newest
 * first, filtered by status on the client, older pages on demand, the newest page again
 * when one of its runs ends.
 */

import { explain } from "../actions.js";
import { cell, empty, h, table } from "../dom.js";
import { absTime, bytesText, isNever, runDuration } from "../format.js";
import { api } from "../session.js";

/** @typedef {import("../dom.js").Child} Child */
/** @typedef {import("../state.js").Job} Job */
/** @typedef {import("../state.js").Kind} Kind */

/**
 * A run's resource usage, where it was measured.
 * @typedef {object} Usage
 * @property {number} cpu_user_ms
 * @property {number} cpu_system_ms
 * @property {number} peak_memory_bytes
 * @property {string} measured_by "cgroup" or the reaped processes'
 */

/**
 * One run of the history.
 * @typedef {object} Run
 * @property {number} counter
 * @property {string} status
 * @property {string} [trigger]
 * @property {string} [cause]
 * @property {string} [started_at]
 * @property {number} [duration_ms]
 * @property {number} [exit_code]
 * @property {number} [signal]
 * @property {number} [http_status]
 * @property {string} [reason] "oom" when killed at its memory limit
 * @property {Usage} [usage]
 * @property {number} [attempt]
 * @property {string} [node] cluster mode: the node that ran it
 * @property {boolean} [log] cluster mode: its log can be read
 */

const HISTORY_PAGE = 50;
const STATUS_CHOICES = [["", "All"], ["success", "Success"], ["fail", "Failed"], ["canceled", "Canceled"],
  ["timeout", "Timeout"], ["interrupted", "Interrupted"]];
// Each status with a sign of its own, so that the badge does not rely on colour.
const RUN_STATUS = /** @type {Record<string, {sign: string, text: string}>} */ ({
  success: { sign: "✓", text: "success" },
  fail: { sign: "✗", text: "failed" },
  canceled: { sign: "⊘", text: "canceled" },
  timeout: { sign: "◔", text: "timeout" },
  interrupted: { sign: "↯", text: "interrupted" },
  // Cluster mode: a run going on, on this node or another.
  running: { sign: "▶", text: "running" },
});

/** @param {string} status */
function runBadge(status) {
  const known = RUN_STATUS[status] || { sign: "?", text: status };
  return h("span", { class: "badge run-" + status, "data-status": status },
    h("span", { "aria-hidden": "true" }, known.sign), known.text);
}

/**
 * How a run's work ended: exit code, signal or HTTP status, after `oom` when the
 * kernel killed it at its memory limit.
 * @param {Run} run
 * @returns {Child}
 */
function runExit(run) {
  if (run.reason === "oom") {
    const how = runExit({ counter: run.counter, status: run.status, exit_code: run.exit_code, signal: run.signal });
    const oom = h("span", { class: "badge run-fail", title: "killed at its memory limit (limit_memory)" }, "oom");
    return [oom, " ", how];
  }
  if (typeof run.http_status === "number") return "HTTP " + run.http_status;
  if (typeof run.signal === "number") return "signal " + run.signal;
  if (typeof run.exit_code === "number") return "exit " + run.exit_code;
  return h("span", { class: "muted" }, "—");
}

/**
 * The CPU time of a run (user and system together; each in the tooltip).
 * @param {Run} run
 */
function runCpu(run) {
  const u = run.usage;
  if (!u) return h("span", { class: "muted", title: "not measured" }, "—");
  return h("span", { title: "user " + runDuration(u.cpu_user_ms) + ", system " + runDuration(u.cpu_system_ms) },
    runDuration(u.cpu_user_ms + u.cpu_system_ms));
}

/**
 * The peak memory of a run: of all its processes at once (measured by its cgroup) or
 * of its largest process (from the reaped processes' usage).
 * @param {Run} run
 */
function runMemory(run) {
  const u = run.usage;
  if (!u) return h("span", { class: "muted", title: "not measured" }, "—");
  const of = u.measured_by === "cgroup" ? "all of the run's processes at once" : "the run's largest process";
  return h("span", { title: "peak memory of " + of }, bytesText(u.peak_memory_bytes));
}

/**
 * One run's row.
 * @param {Run} run
 * @param {Kind} kind
 * @param {string} id the job's
 * @param {boolean} hasLog this node lists its log
 */
function runRow(run, kind, id, hasLog) {
  const started = isNever(run.started_at) ? h("span", { class: "muted" }, "—")
    : h("time", { datetime: run.started_at, title: run.started_at }, absTime(run.started_at));
  // `run.log`: cluster mode, where any node's log is read from the shared table.
  const log = hasLog || run.log
    ? h("a", { href: "#/" + kind + "/" + encodeURIComponent(id) + "/log/" + run.counter }, "log #" + run.counter)
    : h("span", { class: "muted", title: "removed by log_retention" }, "removed");
  return h("tr", { "data-run": run.counter, "data-status": run.status },
    cell("Run", ["#" + run.counter,
      run.node ? h("span", { class: "sub", title: "node that ran it" }, run.node) : null], "num"),
    cell("Status", runBadge(run.status)),
    cell("Trigger", [run.trigger, run.cause ? h("span", { class: "sub" }, run.cause) : null]),
    cell("Started", started),
    cell("Duration", runDuration(run.duration_ms), "num"),
    cell("Exit", runExit(run)),
    cell("CPU", runCpu(run), "num"),
    cell("Peak memory", runMemory(run), "num"),
    cell("Attempt", String(run.attempt || 1), "num"),
    cell("Log", log));
}

export class HistoryPanel {
  /**
   * @param {Kind} kind
   * @param {string} id the job's
   */
  constructor(kind, id) {
    this.kind = kind;
    this.id = id;
    this.url = (kind === "job" ? "/svc/api/job_exec/runs" : "/svc/api/job_http/runs") +
      "?id=" + encodeURIComponent(id) + "&limit=" + HISTORY_PAGE;
    /** @type {Run[]} newest first */
    this.runs = [];
    /** Older runs than those loaded exist. */
    this.more = false;
    this.loading = false;
    /** @type {Set<number>} counters of the logs this node lists */
    this.logs = new Set();
    /** The status the list is filtered by, "" for all. */
    this.wanted = "";
    this.note = h("p", { class: "hint", id: "history-note", "aria-live": "polite" });
    this.select = h("select", { id: "history-status" },
      STATUS_CHOICES.map(([value, label]) => h("option", { value }, label)));
    this.older = h("button", { type: "button", class: "small", id: "history-older" }, "Load older runs");
    this.box = h("div", { class: "table-wrap history" });
    this.el = h("section", { class: "card panel history-panel", "aria-labelledby": "history-title" },
      h("div", { class: "history-head" },
        h("h2", { id: "history-title" }, "Run history"),
        h("label", { for: "history-status", class: "inline" }, "Status", this.select)),
      this.box, h("div", { class: "history-foot" }, this.older, this.note));
    this.select.addEventListener("change", () => {
      this.wanted = this.select.value;
      this.render();
    });
    this.older.addEventListener("click", () => this.load(true));
    this.load(false);
  }

  render() {
    const shown = this.runs.filter((run) => !this.wanted || run.status === this.wanted);
    if (!this.runs.length) {
      this.box.replaceChildren(empty(this.loading ? "Loading…" : "No finished runs yet."));
    } else {
      this.box.replaceChildren(table("Run history", ["Run", "Status", "Trigger", "Started (your time)",
        "Duration", "Exit", "CPU", "Peak memory", "Attempt", "Log"],
      shown.map((run) => runRow(run, this.kind, this.id, this.logs.has(run.counter)))));
    }
    this.older.hidden = !this.more;
    this.older.disabled = this.loading;
  }

  /**
   * Merges a page into what is loaded, newest first, each counter once.
   * @param {Run[]} page
   */
  merge(page) {
    /** @type {Map<number, Run>} */
    const byCounter = new Map();
    for (const run of this.runs.concat(page)) byCounter.set(run.counter, run);
    this.runs = Array.from(byCounter.values()).sort((a, b) => b.counter - a.counter);
  }

  /** @param {boolean} olderPage the page before the oldest loaded, else the newest */
  async load(olderPage) {
    if (this.loading) return;
    this.loading = true;
    this.render();
    const before = olderPage && this.runs.length ? "&before=" + this.runs[this.runs.length - 1].counter : "";
    const result = await api("GET", this.url + before);
    this.loading = false;
    if (!result.ok) {
      this.note.textContent = "Cannot load the run history: " + explain(result);
      this.render();
      return;
    }
    this.note.textContent = "";
    const page = /** @type {Run[]} */ (result.data || []);
    this.merge(page);
    // Only an older page tells whether there are more: the newest page again (after an
    // event) does not change what lies beyond the oldest loaded run.
    if (olderPage || this.runs.length === page.length) this.more = page.length === HISTORY_PAGE;
    this.render();
  }

  /** @param {Job} job as the Environment lists it now */
  jobUpdated(job) {
    this.logs = new Set((job.logs || []).map((log) => log.counter));
    this.render();
  }

  /**
   * @param {string} name the live event's
   * @param {any} data
   */
  onEvent(name, data) {
    const sameJob = data && data.job_id === this.id && data.kind === (this.kind === "job" ? "job" : "job_http");
    if ((name === "run_ended" && sameJob) || name === "resync" || name === "ready") this.load(false);
  }
}
