// @ts-check
/**
 * What a Job (commands run by a runner) adds to its page: its trigger path, its
 * commands, and Run now, Pause, Resume and Cancel (form POSTs to /svc/api/job_exec/…).
 * Run now follows the new run's log.
 */

import { runNow, runNowBlocker, signedForm } from "../actions.js";
import { facts, h } from "../dom.js";
import { duration } from "../format.js";
import { maxCounter, runningCounter, triggerPath } from "../jobs.js";

/** @typedef {import("./detail.js").KindPage} KindPage */
/** @typedef {import("./detail.js").Parts} Parts */
/** @typedef {import("../dom.js").Fact} Fact */
/** @typedef {import("../state.js").Job} Job */

/**
 * @param {Job} job
 * @param {Fact[]} common
 * @param {Parts} p
 */
function render(job, common, p) {
  p.info.replaceChildren(h("h2", null, "Schedule and trigger"), facts(common.concat([
    ["Path", job.path ? h("code", null, "POST " + triggerPath(job.path)) : "none (timer only)"],
    ["Auth kind", job.path ? job.auth_kind : ""],
    ["Signature header", job.path && job.auth_kind === "hmac-sha256" ? h("code", null, job.header_sign) : ""],
    ["Time limit", job.timeout ? duration(job.timeout) : "none"],
    ["Logs kept", String(job.log_retention)],
  ])));
  p.side.replaceChildren(h("h2", null, "Commands"),
    h("pre", { class: "commands" }, (job.commands || []).map((c) => "$ " + c + "\n").join("")),
    h("h2", null, "Actions"), p.actions, p.hint, p.message.el);
  const blocker = runNowBlocker(job);
  p.buttons.run.disabled = !!blocker;
  p.buttons.pause.disabled = job.status === "paused";
  p.buttons.resume.disabled = job.status !== "paused";
  p.buttons.cancel.disabled = job.status !== "started";
  p.hint.textContent = blocker ||
    "Run now sends a request signed with the main secret; the run's log says it was started by hand.";
}

/** @type {KindPage} */
export const jobPage = {
  kind: "job",
  noun: "job",
  crumb: "Job",
  actions: [
    {
      name: "run",
      label: "Run now",
      cls: "primary",
      async send(job, target) {
        // The service names the run it started; the guess is for a run that was only
        // queued (or an older service).
        target.counter = Math.max(maxCounter(job), runningCounter(job)) + 1;
        const result = await runNow(job, "job");
        const started = result.ok && result.data && result.data.run_counter;
        if (typeof started === "number") target.counter = started;
        return result;
      },
      success(job, target) {
        location.hash = "#/job/" + encodeURIComponent(job.id) + "/log/" + target.counter;
        return "Run accepted: following log #" + target.counter + ".";
      },
    },
    {
      name: "pause",
      label: "Pause",
      cls: "",
      send: (job) => signedForm("/svc/api/job_exec/pause", job.id),
      success: () => "Paused: timer ticks are skipped and triggers are refused.",
    },
    {
      name: "resume",
      label: "Resume",
      cls: "",
      send: (job) => signedForm("/svc/api/job_exec/resume", job.id),
      success: () => "Resumed.",
    },
    {
      name: "cancel",
      label: "Cancel run",
      cls: "danger",
      send: (job) => signedForm("/svc/api/job_exec/cancel", job.id),
      success: () => "Cancel sent: the run is being stopped.",
    },
  ],
  render,
};
