// @ts-check
/**
 * #/ : the dashboard, every Job and JobHttp with its status, last and next run,
 * schedule and a sparkline of its last runs (recent.js), filtered by name and status;
 * the timeline of the next 24 hours above them (views/timeline.js), and the Cluster
 * panel above all in cluster mode.
 */

import { driftMark } from "../cluster.js";
import { cell, empty, h, table } from "../dom.js";
import { statusOf, timing } from "../format.js";
import { sortedJobs } from "../jobs.js";
import { forget, sparkCell, stopSparks, watchSparks } from "../recent.js";
import { state } from "../state.js";
import { badge, countdown, timeCell } from "../widgets.js";
import { clusterPanel } from "./cluster.js";
import { Timeline } from "./timeline.js";

/** @typedef {import("../state.js").Job} Job */
/** @typedef {import("../state.js").View} View */

const STATUS_CHOICES = [["", "All"], ["started", "Running"], ["success", "Success"], ["failed", "Failed"],
  ["paused", "Paused"], ["never", "Never ran"]];

/**
 * True when the job passes the dashboard's filters.
 * @param {Job} job
 */
function matches(job) {
  const { filters } = state;
  const text = filters.text.trim().toLowerCase();
  if (text && !job.name.toLowerCase().includes(text) && !job.id.toLowerCase().includes(text)) {
    return false;
  }
  return !filters.status || statusOf(job) === filters.status ||
    (filters.status === "failed" && job.status === "fail");
}

/** @param {Job} job */
function jobRow(job) {
  const trigger = job.path
    ? [h("code", null, job.path), h("span", { class: "sub" }, job.auth_kind)]
    : h("span", { class: "muted" }, "timer only");
  return h("tr", { "data-job": job.id },
    cell("Name", h("span", null, h("a", { href: "#/job/" + encodeURIComponent(job.id) }, job.name),
      driftMark("job", job.id)), "name"),
    cell("Status", badge(statusOf(job))),
    cell("Last run", timeCell(job.last_run)),
    cell("Next run", countdown(job)),
    cell("Recent runs", sparkCell("job", job.id, job.name), "spark-cell"),
    cell("Interval / schedule", timing(job) || h("span", { class: "muted" }, "none")),
    cell("Trigger", trigger));
}

/** @param {Job} job */
function httpRow(job) {
  return h("tr", { "data-http": job.id },
    cell("Name", h("span", null, h("a", { href: "#/http/" + encodeURIComponent(job.id) }, job.name),
      driftMark("http", job.id)), "name"),
    cell("Status", badge(statusOf(job))),
    cell("Last run", timeCell(job.last_run)),
    cell("Next run", countdown(job)),
    cell("Recent runs", sparkCell("http", job.id, job.name), "spark-cell"),
    cell("Interval / schedule", timing(job)),
    cell("Request", [h("code", null, job.http_method || "GET"), " ",
      h("span", { class: "sub" }, job.http_url)]));
}

/**
 * The filters' controls; each change calls `update`.
 * @param {() => void} update
 */
function filterControls(update) {
  const { filters } = state;
  const textInput = h("input", {
    type: "search", id: "filter-name", placeholder: "name contains…", value: filters.text,
    oninput: () => { filters.text = textInput.value; update(); },
  });
  const statusSelect = h("select", {
    id: "filter-status",
    onchange: () => { filters.status = statusSelect.value; update(); },
  }, STATUS_CHOICES.map(([value, label]) => h("option", { value, selected: filters.status === value }, label)));
  return { textInput, statusSelect };
}

/**
 * The dashboard, rendered into `main`.
 * @param {HTMLElement} main
 * @returns {View}
 */
export function dashboardView(main) {
  const env = state.env;
  document.title = (env && env.name ? env.name : "svc") + " · dashboard";
  const { textInput, statusSelect } = filterControls(() => update());
  const count = h("span", { class: "count", "aria-live": "polite" });
  const timeline = new Timeline();
  const jobsBox = h("div", { class: "card table-wrap" });
  const httpBox = h("div", { class: "card table-wrap" });
  const clusterBox = h("section", { class: "card panel cluster-panel", id: "cluster-panel",
    "aria-labelledby": "cluster-heading", hidden: true });
  main.replaceChildren(
    h("h1", { class: "visually-hidden" }, "Dashboard"),
    clusterBox,
    h("div", { class: "filters", role: "search" },
      h("label", { for: "filter-name" }, "Filter by name", textInput),
      h("label", { for: "filter-status" }, "Status", statusSelect),
      count),
    timeline.el,
    h("h2", { id: "jobs-heading" }, "Jobs"), jobsBox,
    h("h2", { id: "http-heading" }, "HTTP jobs"), httpBox);

  let firstReady = true;

  function update() {
    clusterPanel(clusterBox);
    if (!state.env) return;
    watchSparks();
    timeline.update();
    const jobs = sortedJobs(state.env.jobs);
    const http = sortedJobs(state.env.http_jobs);
    const shownJobs = jobs.filter(matches);
    const shownHttp = http.filter(matches);
    count.textContent = (shownJobs.length + shownHttp.length) + " of " + (jobs.length + http.length) + " shown";
    jobsBox.replaceChildren(jobs.length ? table("Jobs", ["Name", "Status", "Last run", "Next run",
      "Recent runs", "Interval / schedule", "Trigger"], shownJobs.map(jobRow)) : empty("No jobs are configured."));
    httpBox.replaceChildren(http.length ? table("HTTP jobs", ["Name", "Status", "Last run", "Next run",
      "Recent runs", "Interval / schedule", "Request"], shownHttp.map(httpRow)) : empty("No HTTP jobs are configured."));
  }
  /**
   * A run that ended redraws its job's sparkline; a stream that starts again (it may
   * have missed some) redraws them all.
   * @param {string} name
   * @param {any} data
   */
  function onEvent(name, data) {
    if (name === "run_ended" && data && data.job_id) forget(data.kind, data.job_id);
    else if (name === "resync" || (name === "ready" && !firstReady)) forget();
    if (name === "ready") firstReady = false;
  }
  return { key: "dashboard", update, route() {}, destroy: stopSparks, onEvent };
}
