// @ts-check
/**
 * The pictures of a job's last 100 runs on its page (charts.js draws them): duration
 * and status per run, and CPU time and peak memory where the runs measured them, each
 * with a sentence beside it as its text alternative. Fetched from the run history
 * (GET /svc/api/job_exec/runs, /svc/api/job_http/runs), again when a run of the job ends.
 */

import { explain } from "../actions.js";
import { durationChart, legend, runsSummary, usageChart } from "../charts.js";
import { empty, h } from "../dom.js";
import { bytesText, runDuration } from "../format.js";
import { api } from "../session.js";

/** @typedef {import("./history.js").Run} Run */
/** @typedef {import("../state.js").Job} Job */
/** @typedef {import("../state.js").Kind} Kind */

const CHART_RUNS = 100;

export class RunChartsPanel {
  /**
   * @param {Kind} kind
   * @param {string} id the job's
   */
  constructor(kind, id) {
    this.kind = kind;
    this.id = id;
    this.url = (kind === "job" ? "/svc/api/job_exec/runs" : "/svc/api/job_http/runs") +
      "?id=" + encodeURIComponent(id) + "&limit=" + CHART_RUNS;
    /** @type {Run[]} oldest first */
    this.runs = [];
    this.loaded = false;
    this.loading = false;
    /** @type {Set<number>} counters of the logs this node lists */
    this.logs = new Set();
    this.note = h("p", { class: "hint", "aria-live": "polite" });
    this.box = h("div", { class: "charts" });
    this.el = h("section", { class: "card panel charts-panel", id: "run-charts", "aria-labelledby": "run-charts-title" },
      h("h2", { id: "run-charts-title" }, "Recent runs"), this.box, this.note);
    this.load();
  }

  /** Where a run's mark leads: its log, when it can be read. */
  link(/** @type {Run} */ run) {
    if (!this.logs.has(run.counter) && !run.log) return null;
    return "#/" + this.kind + "/" + encodeURIComponent(this.id) + "/log/" + run.counter;
  }

  render() {
    if (!this.runs.length) {
      this.box.replaceChildren(empty(this.loaded ? "No finished runs yet." : "Loading…"));
      return;
    }
    const width = this.box.getBoundingClientRect().width || 640;
    const summary = runsSummary(this.runs);
    const runs = this.runs;
    const parts = [
      h("p", { class: "chart-summary", id: "runs-chart-summary", "data-runs": runs.length }, summary.text),
      legend(runs),
      durationChart(runs, { width, label: "Duration of the last " + runs.length + " runs, by status",
        link: (run) => this.link(run) }),
    ];
    const measured = runs.filter((run) => run.usage);
    if (measured.length) {
      const cpu = measured.map((run) => run.usage ? run.usage.cpu_user_ms + run.usage.cpu_system_ms : 0);
      const mem = measured.map((run) => run.usage ? run.usage.peak_memory_bytes : 0);
      parts.push(h("h3", { class: "chart-title" }, "CPU time and peak memory"),
        h("p", { class: "chart-summary", id: "usage-chart-summary" },
          measured.length + " of " + runs.length + " runs measured: CPU time up to " +
          runDuration(Math.max(...cpu)) + ", peak memory up to " + bytesText(Math.max(...mem)) + "."),
        usageChart(runs, { width, label: "CPU time (bars) and peak memory (points) of the last " +
          runs.length + " runs" }));
    }
    this.box.replaceChildren(...parts);
  }

  async load() {
    if (this.loading) return;
    this.loading = true;
    const result = await api("GET", this.url);
    this.loading = false;
    this.loaded = true;
    if (!result.ok) {
      this.note.textContent = "Cannot load the runs: " + explain(result);
    } else {
      this.note.textContent = "";
      this.runs = /** @type {Run[]} */ (result.data || []).slice().reverse();
    }
    this.render();
  }

  /** @param {Job} job as the Environment lists it now */
  jobUpdated(job) {
    const logs = (job.logs || []).map((log) => log.counter);
    if (logs.length === this.logs.size && logs.every((c) => this.logs.has(c))) return;
    this.logs = new Set(logs);
    this.render();
  }

  /**
   * @param {string} name the live event's
   * @param {any} data
   */
  onEvent(name, data) {
    const sameJob = data && data.job_id === this.id && data.kind === (this.kind === "job" ? "job" : "job_http");
    if ((name === "run_ended" && sameJob) || name === "resync") this.load();
  }
}
