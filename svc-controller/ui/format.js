// @ts-check
/**
 * Times, spans, sizes and statuses as the UI writes them.
 */

/** @typedef {import("./state.js").Job} Job */

const ZERO_TIME = "0001-01-01T00:00:00Z";

/** The words of a job's and a log's statuses. */
export const STATUS_TEXT = /** @type {Record<string, string>} */ ({
  started: "running",
  success: "success",
  failed: "failed",
  fail: "failed",
  paused: "paused",
  never: "never ran",
});

export function nowSecs() {
  return Math.floor(Date.now() / 1000);
}

/**
 * True for a time that never came (absent, or the zero time of the API). The type
 * check learns only the false case from it: then `time` is a string.
 * @param {string | undefined} time
 * @returns {time is undefined}
 */
export function isNever(time) {
  return !time || time === ZERO_TIME || time.startsWith("0001-01-01");
}

/** @param {number} n */
function pad(n) {
  return (n < 10 ? "0" : "") + n;
}

/**
 * "2024-05-01 13:05:09" in the viewer's zone.
 * @param {string} time
 */
export function absTime(time) {
  const d = new Date(time);
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

/**
 * "3h 5m", "12s": a non-negative number of seconds.
 * @param {number} seconds
 */
export function span(seconds) {
  const total = Math.max(0, Math.round(seconds));
  const d = Math.floor(total / 86400);
  const hh = Math.floor(total % 86400 / 3600);
  const m = Math.floor(total % 3600 / 60);
  const s = total % 60;
  if (d) return d + "d " + hh + "h";
  if (hh) return hh + "h " + m + "m";
  if (m) return m + "m " + pad(s) + "s";
  return s + "s";
}

/** @param {string | undefined} time */
export function ago(time) {
  if (isNever(time)) return "never";
  const secs = (Date.now() - new Date(time).getTime()) / 1000;
  if (secs < 5) return "just now";
  return span(secs) + " ago";
}

/**
 * Interval in nanoseconds as 1h30m, 90s, 250ms.
 * @param {number | undefined} ns
 */
export function duration(ns) {
  if (!ns) return "";
  const ms = ns / 1e6;
  if (ms < 1000) return ms + "ms";
  const secs = Math.round(ms / 1000);
  const hh = Math.floor(secs / 3600);
  const m = Math.floor(secs % 3600 / 60);
  const s = secs % 60;
  return (hh ? hh + "h" : "") + (m ? m + "m" : "") + (s ? s + "s" : "");
}

/**
 * A job's schedule (with its zone unless UTC) or interval; "" for neither.
 * @param {Job} job
 */
export function timing(job) {
  if (job.schedule) {
    return job.timezone && job.timezone !== "UTC" ? job.schedule + " (" + job.timezone + ")" : job.schedule;
  }
  if (job.interval) return "every " + duration(job.interval);
  return "";
}

/** @param {Job} job */
export function statusOf(job) {
  return job.status || "never";
}

/**
 * What a countdown to `next` reads now.
 * @param {string} next
 * @param {string} status the job's
 */
export function countdownText(next, status) {
  const secs = (new Date(next).getTime() - Date.now()) / 1000;
  if (status === "paused") return "paused";
  if (secs <= 0) return status === "started" ? "running now" : "due now";
  return "in " + span(secs);
}

/**
 * A run's length from milliseconds: 850 ms, 4.2 s, 3m 05s.
 * @param {number | undefined} ms
 */
export function runDuration(ms) {
  if (typeof ms !== "number") return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return span(ms / 1000);
}

/**
 * A size in bytes, in KiB, MiB or GiB.
 * @param {number} n
 */
export function bytesText(n) {
  if (n < 1048576) return Math.round(n / 1024) + " KiB";
  if (n < 1073741824) return (n / 1048576).toFixed(1) + " MiB";
  return (n / 1073741824).toFixed(2) + " GiB";
}
