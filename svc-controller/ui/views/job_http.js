// @ts-check
/**
 * What a JobHttp (an HTTP request on a schedule) adds to its page: its request (method,
 * URL, type, headers, timeout), and Run now, Pause and Resume (POSTs with the ID in the
 * query to /svc/api/job_http/…). Its logs show below as the calls end.
 */

import { runNow, runNowBlocker, signedQuery } from "../actions.js";
import { facts, h } from "../dom.js";
import { duration } from "../format.js";

/** @typedef {import("./detail.js").KindPage} KindPage */
/** @typedef {import("./detail.js").Parts} Parts */
/** @typedef {import("../dom.js").Fact} Fact */
/** @typedef {import("../state.js").Job} Job */

/** @param {Job} job */
function request(job) {
  const headers = job.http_headers && job.http_headers.length
    ? h("ul", { class: "headers", id: "http-headers" }, job.http_headers.map((x) => h("li", null, x)))
    : h("span", { class: "muted" }, "none");
  return facts([
    ["Method", h("code", null, job.http_method || "GET")],
    ["URL", h("code", { id: "http-url" }, job.http_url)],
    ["Request type", job.http_request_type || "query"],
    ["Headers", headers],
    ["Timeout", duration(job.http_timeout) || "default"],
    ["Insecure TLS", job.http_insecure ? "accepted" : "no"],
  ]);
}

/**
 * @param {Job} job
 * @param {Fact[]} common
 * @param {Parts} p
 */
function render(job, common, p) {
  p.info.replaceChildren(h("h2", null, "Schedule"), facts(common.concat([
    ["Logs kept", String(job.log_retention)],
  ])));
  p.side.replaceChildren(h("h2", null, "Request"), request(job),
    h("h2", null, "Actions"), p.actions, p.hint, p.message.el);
  const blocker = runNowBlocker(job);
  p.buttons.run.disabled = !!blocker;
  p.buttons.pause.disabled = job.status === "paused";
  p.buttons.resume.disabled = job.status !== "paused";
  p.buttons.cancel.disabled = !(job.logs || []).some((log) => log.status === "started");
  p.hint.textContent = blocker || "Run now, pause, resume and cancel are signed with the main secret.";
}

/** @type {KindPage} */
export const httpPage = {
  kind: "http",
  noun: "HTTP job",
  crumb: "HTTP job",
  actions: [
    {
      name: "run",
      label: "Run now",
      cls: "primary",
      send: (job) => runNow(job, "http"),
      success: () => "Run accepted: the call's log follows below.",
    },
    {
      name: "pause",
      label: "Pause",
      cls: "",
      send: (job) => signedQuery("/svc/api/job_http/pause", job.id),
      success: () => "Paused: timer ticks are skipped.",
    },
    {
      name: "resume",
      label: "Resume",
      cls: "",
      send: (job) => signedQuery("/svc/api/job_http/resume", job.id),
      success: () => "Resumed.",
    },
    {
      name: "cancel",
      label: "Cancel call",
      cls: "danger",
      send: (job) => signedQuery("/svc/api/job_http/cancel", job.id),
      success: () => "Cancel sent: the call is being ended.",
    },
  ],
  render,
};
