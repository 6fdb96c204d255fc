// @ts-check
/**
 * The dashboard's sparklines: each job's last 20 runs, fetched from the run history
 * only for the rows on screen (an IntersectionObserver says which), at most 4 requests
 * at a time, kept until a live event says the job ran again (`forget`), so a page of
 * many jobs costs one request per job seen, not one per job per refresh.
 */

import { sparkline, runsSummary } from "./charts.js";
import { h } from "./dom.js";
import { api } from "./session.js";

/** @typedef {import("./views/history.js").Run} Run */
/** @typedef {import("./state.js").Kind} Kind */

export const SPARK_RUNS = 20;
const IN_FLIGHT = 4;

/** @type {Map<string, Run[]>} "<kind>/<id>" → its last runs, oldest first */
const cache = new Map();
/** @type {string[]} keys waiting for a request, in the order they came into view */
const waiting = [];
/** @type {Set<string>} keys asked for (waiting or in flight) */
const asked = new Set();
let inFlight = 0;
/** @type {IntersectionObserver | null} */
let observer = null;

/**
 * @param {Kind} kind
 * @param {string} id
 */
function keyOf(kind, id) {
  return kind + "/" + id;
}

/**
 * The cell of a job's sparkline: drawn now when its runs are known, else drawn once
 * they are fetched, after the row comes into view.
 * @param {Kind} kind
 * @param {string} id
 * @param {string} name the job's, for the label
 */
export function sparkCell(kind, id, name) {
  const key = keyOf(kind, id);
  const el = h("span", { class: "spark-box", "data-spark": key, "data-name": name });
  const runs = cache.get(key);
  if (runs) draw(el, runs);
  else if (observer) observer.observe(el);
  return el;
}

/**
 * @param {HTMLElement} el
 * @param {Run[]} runs
 */
function draw(el, runs) {
  const name = el.getAttribute("data-name") || "";
  const summary = runsSummary(runs).text;
  if (!runs.length) {
    el.replaceChildren(h("span", { class: "muted" }, "no runs"));
    return;
  }
  el.replaceChildren(sparkline(runs, "Last runs of " + name + ": " + summary),
    h("span", { class: "visually-hidden" }, summary));
}

/** Sends the next waiting requests, up to IN_FLIGHT at once. */
function pump() {
  while (inFlight < IN_FLIGHT && waiting.length) {
    const key = /** @type {string} */ (waiting.shift());
    inFlight += 1;
    fetchRuns(key).finally(() => {
      inFlight -= 1;
      asked.delete(key);
      pump();
    });
  }
}

/** @param {string} key */
async function fetchRuns(key) {
  const slash = key.indexOf("/");
  const kind = key.slice(0, slash);
  const id = key.slice(slash + 1);
  const url = (kind === "job" ? "/svc/api/job_exec/runs" : "/svc/api/job_http/runs") +
    "?id=" + encodeURIComponent(id) + "&limit=" + SPARK_RUNS;
  const result = await api("GET", url);
  if (!result.ok) return;
  const runs = /** @type {Run[]} */ (result.data || []).slice().reverse();
  cache.set(key, runs);
  document.querySelectorAll(`[data-spark="${CSS.escape(key)}"]`).forEach((el) => {
    if (el instanceof HTMLElement) draw(el, runs);
  });
}

/** Starts watching which rows are on screen; the dashboard calls it once it is built. */
export function watchSparks() {
  if (observer) observer.disconnect();
  observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting || !observer) continue;
      observer.unobserve(entry.target);
      const key = entry.target.getAttribute("data-spark") || "";
      if (!key || cache.has(key) || asked.has(key)) continue;
      asked.add(key);
      waiting.push(key);
    }
    pump();
  }, { rootMargin: "200px" });
}

/** Stops watching: the dashboard left the screen. */
export function stopSparks() {
  if (observer) observer.disconnect();
  observer = null;
  waiting.length = 0;
  asked.clear();
}

/**
 * Forgets a job's runs (a run of it ended: its row asks again when drawn next), or every
 * job's (the event stream started again and may have missed some).
 * @param {string} [eventKind] "job" or "job_http", as the live events say
 * @param {string} [id]
 */
export function forget(eventKind, id) {
  if (eventKind === undefined || id === undefined) {
    cache.clear();
    return;
  }
  cache.delete(keyOf(eventKind === "job" ? "job" : "http", id));
}
