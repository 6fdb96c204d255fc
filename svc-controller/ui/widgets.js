// @ts-check
/**
 * Status badges, times and countdowns, and the tick that keeps the last two current.
 */

import { h } from "./dom.js";
import { STATUS_TEXT, absTime, ago, countdownText, isNever, statusOf } from "./format.js";

/** @typedef {import("./state.js").Job} Job */

/**
 * A job's or log's status as a badge (a spinner while it runs).
 * @param {string} status
 * @param {string} [id]
 */
export function badge(status, id) {
  return h("span", { class: "badge " + status, id },
    status === "started" ? h("span", { class: "spinner", "aria-hidden": "true" }) : null,
    STATUS_TEXT[status] || status);
}

/**
 * A past time as "5m 02s ago", the full time as its tooltip; kept current by tick().
 * @param {string | undefined} time
 */
export function timeCell(time) {
  if (isNever(time)) return h("span", { class: "muted" }, "never");
  return h("time", { datetime: time, title: absTime(time), "data-ago": time }, ago(time));
}

/**
 * A job's next run as a countdown, kept current by tick().
 * @param {Job} job
 */
export function countdown(job) {
  if (isNever(job.next_run)) return h("span", { class: "muted" }, job.path ? "on trigger" : "—");
  return h("time", {
    class: "countdown",
    datetime: job.next_run,
    title: absTime(job.next_run),
    "data-next": job.next_run,
    "data-status": statusOf(job),
  }, countdownText(job.next_run, statusOf(job)));
}

/** Brings every countdown and "ago" of the page up to date (each second). */
export function tick() {
  document.querySelectorAll("[data-next]").forEach((el) => {
    const next = el.getAttribute("data-next") || "";
    el.textContent = countdownText(next, el.getAttribute("data-status") || "");
    el.classList.toggle("due", new Date(next).getTime() <= Date.now());
  });
  document.querySelectorAll("[data-ago]").forEach((el) => {
    el.textContent = ago(el.getAttribute("data-ago") || "");
  });
}
