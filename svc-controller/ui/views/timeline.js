// @ts-check
/**
 * The dashboard's timeline of the next 24 hours: a lane per timer job (Job and JobHttp,
 * paused ones left out) with a mark per run due. An interval job's runs are stepped
 * from its next run by its interval (from the Environment); a schedule's slots come
 * from GET /svc/api/upcoming, asked again when the schedules change or every 5 minutes.
 * A lane shows at most 48 marks; a busier job's lane says so with a band. A sentence
 * and a list beside it are its text alternative.
 */

import { frame, svg } from "../charts.js";
import { h } from "../dom.js";
import { absTime, isNever, span, timing } from "../format.js";
import { sortedJobs } from "../jobs.js";
import { api } from "../session.js";
import { state } from "../state.js";

/** @typedef {import("../state.js").Job} Job */

const HOURS = 24;
const MAX_MARKS = 48;
const MAX_LANES = 40;
const UPCOMING_MAX_AGE_MS = 300000;

/**
 * A job's lane.
 * @typedef {object} Lane
 * @property {string} name
 * @property {string} href its page
 * @property {string} every "every 1h" or its schedule
 * @property {number[]} slots ms since the epoch, in order, at most MAX_MARKS
 * @property {boolean} more more runs are due in the window than the marks
 */

/**
 * The runs of an interval job due from `from` to `until`: its next run, then a whole
 * number of intervals later; at most `max`, and whether more are due.
 * @param {number} next its next run, ms since the epoch
 * @param {number} every its interval, ms
 * @param {number} from
 * @param {number} until
 * @param {number} max
 */
export function intervalSlots(next, every, from, until, max) {
  /** @type {number[]} */
  const slots = [];
  if (!(every > 0) || !isFinite(next)) return { slots, more: false };
  // A due time already past: the timer is about to fire it, and then steps on.
  let t = next < from ? next + Math.ceil((from - next) / every) * every : next;
  for (; t <= until; t += every) {
    if (slots.length === max) return { slots, more: true };
    slots.push(t);
  }
  return { slots, more: false };
}

export class Timeline {
  constructor() {
    /** @type {Record<string, {slots: string[], more: boolean}>} "<kind>/<id>" from /svc/api/upcoming */
    this.upcoming = {};
    /** The schedules the last answer was for, and when it came. */
    this.asked = "";
    this.fetchedAt = 0;
    this.summary = h("p", { class: "chart-summary", id: "timeline-summary" });
    this.picture = h("div", { class: "timeline-box" });
    this.list = h("ul", { class: "timeline-list" });
    this.el = h("section", { class: "card panel timeline-panel", id: "timeline", "aria-labelledby": "timeline-title" },
      h("h2", { id: "timeline-title" }, "Next 24 hours"), this.summary, this.picture,
      h("details", null, h("summary", null, "Runs due, as a list"), this.list));
  }

  /** Every timer job that is not paused, Jobs first, each kind by name. */
  timerJobs() {
    const env = state.env;
    if (!env) return [];
    /** @type {{kind: string, job: Job}[]} */
    const out = [];
    for (const [kind, source] of /** @type {const} */ ([["job", env.jobs], ["http", env.http_jobs]])) {
      for (const job of sortedJobs(source)) {
        if (job.status === "paused" || !(job.schedule || job.interval)) continue;
        out.push({ kind, job });
      }
    }
    return out;
  }

  /** Renders with what is known, and asks for the schedules' slots when stale. */
  update() {
    const jobs = this.timerJobs();
    const schedules = jobs.filter((j) => j.job.schedule).map((j) => j.kind + "/" + j.job.id + "=" + j.job.schedule).join(";");
    if (schedules && (schedules !== this.asked || Date.now() - this.fetchedAt > UPCOMING_MAX_AGE_MS)) {
      this.asked = schedules;
      this.fetchedAt = Date.now();
      this.fetch();
    }
    this.render(jobs);
  }

  async fetch() {
    const result = await api("GET", "/svc/api/upcoming?hours=" + HOURS);
    if (!result.ok || !result.data) return;
    /** @type {Record<string, {slots: string[], more: boolean}>} */
    const found = {};
    for (const job of result.data.jobs || []) {
      found[(job.kind === "job" ? "job" : "http") + "/" + job.id] = { slots: job.slots || [], more: !!job.more };
    }
    this.upcoming = found;
    this.render(this.timerJobs());
  }

  /**
   * The lanes of the jobs, from `from` to `until`.
   * @param {{kind: string, job: Job}[]} jobs
   * @param {number} from
   * @param {number} until
   * @returns {Lane[]}
   */
  lanes(jobs, from, until) {
    return jobs.map(({ kind, job }) => {
      const href = "#/" + kind + "/" + encodeURIComponent(job.id);
      const every = timing(job);
      if (job.schedule) {
        const known = this.upcoming[kind + "/" + job.id] || { slots: [], more: false };
        const slots = known.slots.map((t) => Date.parse(t)).filter((t) => t >= from && t <= until);
        return { name: job.name, href, every, slots, more: known.more };
      }
      const next = isNever(job.next_run) ? NaN : Date.parse(job.next_run);
      const { slots, more } = intervalSlots(next, (job.interval || 0) / 1e6, from, until, MAX_MARKS);
      return { name: job.name, href, every, slots, more };
    });
  }

  /** @param {{kind: string, job: Job}[]} jobs */
  render(jobs) {
    const from = Date.now();
    const until = from + HOURS * 3600000;
    const all = this.lanes(jobs, from, until);
    this.el.hidden = !all.length;
    if (!all.length) return;
    const lanes = all.slice(0, MAX_LANES);
    const runs = all.reduce((n, lane) => n + lane.slots.length, 0);
    const first = all.filter((l) => l.slots.length).sort((a, b) => a.slots[0] - b.slots[0])[0];
    this.summary.textContent = all.length + (all.length === 1 ? " timer job" : " timer jobs") + ", " +
      runs + (all.some((l) => l.more) ? "+" : "") + " runs due in the next " + HOURS + " hours" +
      (first ? "; next: " + first.name + " at " + absTime(new Date(first.slots[0]).toISOString()) +
        " (in " + span((first.slots[0] - from) / 1000) + ")" : "") +
      (all.length > lanes.length ? "; the first " + lanes.length + " are drawn" : "") + ".";
    const width = this.picture.getBoundingClientRect().width || 640;
    this.picture.replaceChildren(draw(lanes, from, until, width));
    this.list.replaceChildren(...all.map((lane) => h("li", { "data-lane": lane.name },
      h("a", { href: lane.href }, lane.name), " (" + lane.every + "): ",
      lane.slots.length ? lane.slots.length + (lane.more ? "+" : "") + " runs, first " +
        absTime(new Date(lane.slots[0]).toISOString()) : "none due")));
  }
}

/**
 * The picture: hours along the top, a lane per job, a mark per run due.
 * @param {Lane[]} lanes
 * @param {number} from
 * @param {number} until
 * @param {number} width
 */
function draw(lanes, from, until, width) {
  width = Math.max(300, Math.round(width));
  const laneHeight = 20;
  const top = 22;
  const height = top + lanes.length * laneHeight + 4;
  const label = Math.min(160, Math.round(width * 0.3));
  const box = { left: label + 4, right: width - 6 };
  const x = (/** @type {number} */ t) => box.left + (box.right - box.left) * ((t - from) / (until - from));
  const chart = frame("timeline-chart", width, height,
    "Runs due in the next " + HOURS + " hours, one lane per timer job");
  const stepHours = width < 560 ? 6 : 3;
  const first = new Date(from);
  first.setMinutes(0, 0, 0);
  first.setHours(first.getHours() + 1);
  while (first.getHours() % stepHours) first.setHours(first.getHours() + 1);
  for (let t = first.getTime(); t < until; t += stepHours * 3600000) {
    const d = new Date(t);
    chart.appendChild(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: top - 4, y2: height - 2 }));
    // Left out where it would cover "now".
    if (x(t) - box.left < 44) continue;
    chart.appendChild(svg("text", { class: "axis", x: x(t), y: 12, "text-anchor": "middle" },
      String(d.getHours()).padStart(2, "0") + ":00"));
  }
  chart.appendChild(svg("text", { class: "axis", x: box.left, y: 12 }, "now"));
  const chars = Math.max(4, Math.floor((label - 6) / 7));
  lanes.forEach((lane, i) => {
    const mid = top + i * laneHeight + laneHeight / 2;
    const name = lane.name.length > chars ? lane.name.slice(0, chars - 1) + "…" : lane.name;
    const g = svg("g", { class: "lane", "data-lane": lane.name },
      svg("a", { href: lane.href }, svg("text", { class: "lane-name", x: 2, y: mid + 4 }, svg("title", null, lane.name), name)),
      svg("line", { class: "lane-line", x1: box.left, x2: box.right, y1: mid, y2: mid }));
    if (lane.more && lane.slots.length) {
      g.appendChild(svg("rect", { class: "dense", x: x(lane.slots[lane.slots.length - 1]), y: mid - 3,
        width: Math.max(0, box.right - x(lane.slots[lane.slots.length - 1])), height: 6 },
      svg("title", null, lane.name + ": more runs due than drawn (" + lane.every + ")")));
    }
    for (const t of lane.slots) {
      const at = x(t);
      g.appendChild(svg("path", { class: "slot", "data-at": new Date(t).toISOString(),
        d: `M${at.toFixed(1)} ${mid - 6}l4 6l-4 6l-4 -6Z` },
      svg("title", null, lane.name + " · " + absTime(new Date(t).toISOString()) + " (in " + span((t - from) / 1000) + ")")));
    }
    chart.appendChild(g);
  });
  return chart;
}
