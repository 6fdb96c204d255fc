// @ts-check
/**
 * Pictures of the runs, drawn as inline SVG by hand (no library): a job's last runs
 * (duration per run, each mark coloured and shaped by its status, so that it reads
 * without colour), their CPU time and peak memory, and the dashboard's sparkline of a
 * job's last runs. Each picture has role="img" and an aria-label; `runsSummary` is the
 * sentence that goes beside it as its text alternative. The views fetch the data.
 */

import { bytesText, runDuration } from "./format.js";

/** @typedef {import("./views/history.js").Run} Run */

const NS = "http://www.w3.org/2000/svg";

/**
 * An SVG element: svg("circle", {cx: 1, r: 2}, child...); null attributes are left out.
 * @param {string} tag
 * @param {Record<string, string | number | null | undefined> | null} [attrs]
 * @param {...(Node | string | null | undefined)} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs, ...children) {
  const el = /** @type {SVGElement} */ (document.createElementNS(NS, tag));
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

/**
 * Each run status with its shape, sign and words: the sign and word are the history's
 * badges' (views/history.js); the shape tells the statuses apart without colour.
 * @type {Record<string, {shape: string, sign: string, text: string, done: string}>}
 */
export const RUN_MARKS = {
  success: { shape: "circle", sign: "✓", text: "success", done: "succeeded" },
  fail: { shape: "cross", sign: "✗", text: "failed", done: "failed" },
  timeout: { shape: "triangle", sign: "◔", text: "timeout", done: "timed out" },
  canceled: { shape: "square", sign: "⊘", text: "canceled", done: "canceled" },
  interrupted: { shape: "diamond", sign: "↯", text: "interrupted", done: "interrupted" },
  running: { shape: "ring", sign: "▶", text: "running", done: "running" },
};
const ORDER = Object.keys(RUN_MARKS);

/** @param {string} status */
function markOf(status) {
  return RUN_MARKS[status] || { shape: "dash", sign: "?", text: status, done: status };
}

/**
 * The mark of a status centred on (x, y), `r` from its centre to its edge.
 * @param {string} status
 * @param {number} x
 * @param {number} y
 * @param {number} r
 */
export function shape(status, x, y, r) {
  const kind = markOf(status).shape;
  const f = (/** @type {number} */ n) => n.toFixed(1);
  const attrs = { class: "shape shape-" + kind, "data-shape": kind };
  switch (kind) {
    case "circle": case "ring":
      return svg("circle", { ...attrs, cx: f(x), cy: f(y), r: f(r) });
    case "cross":
      return svg("path", { ...attrs, d: `M${f(x - r)} ${f(y - r)}L${f(x + r)} ${f(y + r)}` +
        `M${f(x + r)} ${f(y - r)}L${f(x - r)} ${f(y + r)}` });
    case "triangle":
      return svg("path", { ...attrs, d: `M${f(x)} ${f(y - r)}L${f(x + r)} ${f(y + r * 0.8)}` +
        `L${f(x - r)} ${f(y + r * 0.8)}Z` });
    case "square":
      return svg("rect", { ...attrs, x: f(x - r * 0.85), y: f(y - r * 0.85), width: f(r * 1.7), height: f(r * 1.7) });
    case "diamond":
      return svg("path", { ...attrs, d: `M${f(x)} ${f(y - r)}L${f(x + r)} ${f(y)}L${f(x)} ${f(y + r)}` +
        `L${f(x - r)} ${f(y)}Z` });
    default:
      return svg("path", { ...attrs, d: `M${f(x - r)} ${f(y)}L${f(x + r)} ${f(y)}` });
  }
}

/**
 * The median of numbers (undefined for none).
 * @param {number[]} values
 */
export function median(values) {
  if (!values.length) return undefined;
  const sorted = values.slice().sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Counts by status, median and slowest duration, and the sentence that says them:
 * "Last 4 runs: 1 succeeded, 1 failed, 1 timed out, 1 canceled; median 5 ms, slowest #3 2.0 s."
 * @param {Run[]} runs
 */
export function runsSummary(runs) {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const run of runs) counts[run.status] = (counts[run.status] || 0) + 1;
  const timed = runs.filter((run) => typeof run.duration_ms === "number");
  const mid = median(timed.map((run) => run.duration_ms || 0));
  const slowest = timed.reduce((/** @type {Run | null} */ top, run) =>
    !top || (run.duration_ms || 0) > (top.duration_ms || 0) ? run : top, null);
  const statuses = Object.keys(counts).sort((a, b) => rank(a) - rank(b));
  let text = runs.length === 1 ? "Last run: " : "Last " + runs.length + " runs: ";
  text += statuses.map((s) => counts[s] + " " + markOf(s).done).join(", ");
  if (mid !== undefined && slowest) {
    text += "; median " + runDuration(Math.round(mid)) + ", slowest #" + slowest.counter + " " +
      runDuration(slowest.duration_ms) + ".";
  } else {
    text += ".";
  }
  return { counts, median: mid, slowest, text: runs.length ? text : "No runs yet." };
}

/** @param {string} status */
function rank(status) {
  const at = ORDER.indexOf(status);
  return at < 0 ? ORDER.length : at;
}

/**
 * A run's tooltip: number, status, duration, CPU and memory where measured.
 * @param {Run} run
 */
export function runTitle(run) {
  const parts = ["#" + run.counter + " " + markOf(run.status).sign + " " + markOf(run.status).text,
    typeof run.duration_ms === "number" ? runDuration(run.duration_ms) : "no end yet"];
  if (run.usage) {
    parts.push("CPU " + runDuration(run.usage.cpu_user_ms + run.usage.cpu_system_ms),
      "peak memory " + bytesText(run.usage.peak_memory_bytes));
  }
  if (run.started_at) parts.push("started " + run.started_at);
  return parts.join(" · ");
}

/**
 * A round top for an axis at or above `value` (1, 2 or 5 times a power of ten).
 * @param {number} value
 */
export function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/**
 * The frame of a chart: role="img", its label, scaling with its viewBox.
 * @param {string} cls
 * @param {number} width
 * @param {number} height
 * @param {string} label
 */
export function frame(cls, width, height, label) {
  return svg("svg", { class: "chart " + cls, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": label, preserveAspectRatio: "xMinYMin meet", focusable: "false" });
}

/**
 * A value axis on the left: gridlines at 0, half and the top, each labelled.
 * @param {SVGElement} chart
 * @param {{left: number, right: number, top: number, bottom: number}} box
 * @param {number} top the value at the top
 * @param {(v: number) => string} text
 */
function valueAxis(chart, box, top, text) {
  for (const part of [0, 0.5, 1]) {
    const y = box.bottom - (box.bottom - box.top) * part;
    chart.appendChild(svg("line", { class: "grid", x1: box.left, x2: box.right, y1: y, y2: y }));
    chart.appendChild(svg("text", { class: "axis", x: box.left - 4, y: y + 4, "text-anchor": "end" },
      text(top * part)));
  }
}

/**
 * Marks along the runs' axis, oldest left: x of the i-th of n runs.
 * @param {{left: number, right: number}} box
 * @param {number} n
 */
function slotX(box, n) {
  const step = (box.right - box.left) / Math.max(n, 1);
  return { step, at: (/** @type {number} */ i) => box.left + step * (i + 0.5) };
}

/**
 * The chart of the runs' durations: a bar per run topped by its status's mark, each
 * with its tooltip and, when `link` names one, a link to its log.
 * @param {Run[]} runs oldest first
 * @param {{width: number, label: string, link: (run: Run) => string | null}} o
 */
export function durationChart(runs, o) {
  const width = Math.max(300, Math.round(o.width));
  const height = 170;
  const chart = frame("runs-chart", width, height, o.label);
  const box = { left: 52, right: width - 8, top: 10, bottom: height - 24 };
  const top = niceMax(Math.max(10, ...runs.map((run) => run.duration_ms || 0)));
  valueAxis(chart, box, top, (v) => runDuration(Math.round(v)));
  const { step, at } = slotX(box, runs.length);
  const r = Math.max(2.5, Math.min(5, step * 0.42));
  runs.forEach((run, i) => {
    const x = at(i);
    const y = box.bottom - (box.bottom - box.top) * ((run.duration_ms || 0) / top);
    const mark = svg("g", { class: "mark run-" + run.status, "data-status": run.status, "data-run": run.counter },
      svg("title", null, runTitle(run)),
      svg("line", { class: "bar", x1: x, x2: x, y1: box.bottom, y2: y }),
      shape(run.status, x, y, r));
    const href = o.link(run);
    chart.appendChild(href ? svg("a", { href, tabindex: "-1" }, mark) : mark);
  });
  if (runs.length) {
    chart.appendChild(svg("text", { class: "axis", x: box.left, y: height - 6 }, "#" + runs[0].counter));
    chart.appendChild(svg("text", { class: "axis", x: box.right, y: height - 6, "text-anchor": "end" },
      "#" + runs[runs.length - 1].counter));
  }
  return chart;
}

/**
 * What the runs used, where measured: CPU time as bars (left axis) and peak memory as a
 * line of points (its top in the corner), on the same run axis as `durationChart`.
 * @param {Run[]} runs oldest first
 * @param {{width: number, label: string}} o
 */
export function usageChart(runs, o) {
  const width = Math.max(300, Math.round(o.width));
  const height = 120;
  const chart = frame("usage-chart", width, height, o.label);
  const box = { left: 52, right: width - 8, top: 16, bottom: height - 10 };
  const cpu = (/** @type {Run} */ run) => run.usage ? run.usage.cpu_user_ms + run.usage.cpu_system_ms : 0;
  const topCpu = niceMax(Math.max(10, ...runs.map(cpu)));
  // Memory in whole powers of two: 1 MiB, 256 MiB.
  const topMem = Math.pow(2, Math.ceil(Math.log2(Math.max(1024,
    ...runs.map((run) => run.usage ? run.usage.peak_memory_bytes : 0)))));
  valueAxis(chart, box, topCpu, (v) => runDuration(Math.round(v)));
  chart.appendChild(svg("text", { class: "axis", x: box.right, y: 11, "text-anchor": "end" },
    "memory up to " + bytesText(topMem)));
  const { step, at } = slotX(box, runs.length);
  const barWidth = Math.max(1, Math.min(12, step * 0.6));
  const span = box.bottom - box.top;
  /** @type {string[]} */
  const points = [];
  runs.forEach((run, i) => {
    if (!run.usage) return;
    const x = at(i);
    const yCpu = box.bottom - span * (cpu(run) / topCpu);
    const yMem = box.bottom - span * (run.usage.peak_memory_bytes / topMem);
    points.push(x.toFixed(1) + "," + yMem.toFixed(1));
    chart.appendChild(svg("g", { class: "usage-mark", "data-run": run.counter },
      svg("title", null, runTitle(run)),
      svg("rect", { class: "cpu", x: (x - barWidth / 2).toFixed(1), y: yCpu.toFixed(1),
        width: barWidth.toFixed(1), height: Math.max(0.5, box.bottom - yCpu).toFixed(1) }),
      svg("circle", { class: "mem", cx: x.toFixed(1), cy: yMem.toFixed(1), r: 2.5 })));
  });
  if (points.length > 1) {
    chart.insertBefore(svg("polyline", { class: "mem-line", points: points.join(" ") }),
      chart.querySelector(".usage-mark"));
  }
  return chart;
}

/**
 * A job's last runs as a small strip for the dashboard: one status mark per run, higher
 * for a longer run (each strip on its own scale).
 * @param {Run[]} runs oldest first
 * @param {string} label
 */
export function sparkline(runs, label) {
  const width = 104;
  const height = 24;
  const chart = frame("spark", width, height, label);
  const box = { left: 2, right: width - 2, top: 5, bottom: height - 5 };
  chart.appendChild(svg("line", { class: "grid", x1: box.left, x2: box.right, y1: box.bottom + 3, y2: box.bottom + 3 }));
  const top = Math.max(1, ...runs.map((run) => run.duration_ms || 0));
  const { at } = slotX(box, Math.max(runs.length, 12));
  runs.forEach((run, i) => {
    const y = box.bottom - (box.bottom - box.top) * ((run.duration_ms || 0) / top);
    chart.appendChild(svg("g", { class: "mark run-" + run.status, "data-status": run.status, "data-run": run.counter },
      svg("title", null, runTitle(run)), shape(run.status, at(i), y, 3)));
  });
  return chart;
}

/**
 * The statuses present, each as its mark, sign and word: the key of the run chart.
 * @param {Run[]} runs
 */
export function legend(runs) {
  const present = ORDER.filter((s) => runs.some((run) => run.status === s));
  const ul = document.createElement("ul");
  ul.className = "chart-legend";
  for (const status of present) {
    const li = document.createElement("li");
    li.className = "run-" + status;
    li.appendChild(svg("svg", { viewBox: "0 0 12 12", width: 12, height: 12, "aria-hidden": "true" },
      svg("g", { class: "mark run-" + status }, shape(status, 6, 6, 4.5))));
    li.appendChild(document.createTextNode(" " + RUN_MARKS[status].sign + " " + RUN_MARKS[status].text));
    ul.appendChild(li);
  }
  return ul;
}
