// @ts-check
/**
 * Jobs of the Environment: lookups, order, and their runs' numbers.
 */

import { state } from "./state.js";

/** @typedef {import("./state.js").Job} Job */
/** @typedef {import("./state.js").Kind} Kind */

/**
 * The jobs of one kind by ID (the Environment lists them by name).
 * @param {Kind} kind
 * @returns {Record<string, Job>}
 */
export function jobsById(kind) {
  /** @type {Record<string, Job>} */
  const map = {};
  const env = state.env;
  const source = env ? (kind === "http" ? env.http_jobs : env.jobs) : null;
  for (const job of Object.values(source || {})) map[job.id] = job;
  return map;
}

/**
 * Jobs in the order of their names.
 * @param {Record<string, Job> | undefined} source
 * @returns {Job[]}
 */
export function sortedJobs(source) {
  const jobs = source || {};
  return Object.keys(jobs).sort().map((name) => jobs[name]);
}

/**
 * The highest counter of the job's listed logs, 0 for none.
 * @param {Job} job
 */
export function maxCounter(job) {
  return (job.logs || []).reduce((max, log) => Math.max(max, log.counter), 0);
}

/**
 * Counter of the run going on now: the log listed as `started` (the Environment lists
 * a running log), else, from an older server, the one after the newest listed.
 * @param {Job} job
 */
export function runningCounter(job) {
  if (job.status !== "started") return 0;
  const live = (job.logs || []).filter((log) => log.status === "started");
  return live.length ? live[live.length - 1].counter : maxCounter(job) + 1;
}

/**
 * The webhook address of a Job's trigger path.
 * @param {string} path
 */
export function triggerPath(path) {
  return "/svc/api/job/run/" + path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/");
}
