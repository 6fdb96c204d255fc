// @ts-check
/**
 * The dashboard's Cluster panel: the nodes, the jobs whose definitions differ between
 * live nodes, and those other nodes define and this one does not. Shown in cluster mode
 * only (or when the cluster cannot be read).
 */

import { shortHash } from "../cluster.js";
import { append, cell, h, table } from "../dom.js";
import { state } from "../state.js";
import { timeCell } from "../widgets.js";

/** @typedef {import("../state.js").Cluster} Cluster */
/** @typedef {import("../state.js").Missing} Missing */

/**
 * Link to a job of this node, or its ID alone.
 * @param {Missing} entry an entry of `differ` or `missing_here`
 */
function clusterJob(entry) {
  const kind = entry.kind === "job_http" ? "http" : "job";
  const env = state.env;
  const here = (kind === "job" ? env && env.jobs : env && env.http_jobs) || {};
  const defined = Object.values(here).some((job) => job.id === entry.id);
  const label = (kind === "job" ? "job " : "HTTP job ") + entry.id;
  return defined ? h("a", { href: "#/" + kind + "/" + encodeURIComponent(entry.id) }, label) : h("span", null, label);
}

/** @param {Cluster} data */
function nodeRows(data) {
  return (data.nodes || []).map((n) => h("tr", { "data-node": n.name },
    cell("Node", h("span", null, h("strong", null, n.name),
      n.name === data.node ? h("span", { class: "sub" }, "this node") : null), "name"),
    cell("State", h("span", { class: "badge " + (n.live ? "success" : "never") }, n.live ? "live" : "gone")),
    cell("Last heartbeat", timeCell(n.heartbeat)),
    cell("Started", timeCell(n.started)),
    cell("Max running", String(n.max_job_running))));
}

/** @param {Cluster} data */
function differItems(data) {
  const items = (data.differ || []).map((d) => h("li", { "data-differ": d.kind + "/" + d.id }, clusterJob(d), ": ",
    (d.definitions || []).map((def, i) => [i ? "; " : "", shortHash(def.hash), " on ", (def.nodes || []).join(", ")])));
  const total = data.differ_total || 0;
  if (total > items.length) items.push(h("li", { class: "muted" }, "and " + (total - items.length) + " more"));
  return items;
}

/** @param {Cluster} data */
function missingItems(data) {
  const items = (data.missing_here || []).map((m) => h("li", { "data-missing": m.kind + "/" + m.id },
    clusterJob(m), ": defined on ", (m.nodes || []).join(", "), ", not on this node"));
  const total = data.missing_here_total || 0;
  if (total > items.length) items.push(h("li", { class: "muted" }, "and " + (total - items.length) + " more"));
  return items;
}

/**
 * Fills the Cluster panel `box`, or hides it outside cluster mode.
 * @param {HTMLElement} box
 */
export function clusterPanel(box) {
  const cluster = state.cluster;
  const enabled = !!(cluster && cluster.enabled);
  box.hidden = !(enabled || state.clusterError);
  if (box.hidden) return;
  const data = cluster && enabled ? cluster : { enabled: false, nodes: [], differ: [], missing_here: [] };
  const nodes = data.nodes || [];
  const live = nodes.filter((n) => n.live).length;
  const differ = differItems(data);
  const missing = missingItems(data);
  // append, not replaceChildren: it skips the absent parts and flattens the lists.
  box.replaceChildren();
  append(box, [
    h("div", { class: "cluster-head" },
      h("h2", { id: "cluster-heading" }, "Cluster"),
      enabled ? h("span", { class: "muted" }, "this node: ", h("strong", null, data.node),
        " · " + live + " of " + nodes.length + " nodes live") : null),
    state.clusterError
      ? h("p", { class: "message error", id: "cluster-error" }, "Cannot read the cluster: " + state.clusterError)
      : null,
    nodes.length ? h("div", { class: "table-wrap" }, table("Cluster nodes",
      ["Node", "State", "Last heartbeat", "Started", "Max running"], nodeRows(data))) : null,
    differ.length
      ? [h("h3", null, "Definitions that differ between live nodes"),
        h("ul", { class: "drift-list", id: "cluster-differ" }, differ),
        h("p", { class: "hint" }, "A run of these jobs does what the node that claims it defines. " +
          "Make the files agree and reload the nodes; during a rolling change this is expected.")]
      : (enabled ? h("p", { class: "hint", id: "cluster-agree" }, "Every live node defines its jobs alike.") : null),
    missing.length
      ? [h("h3", null, "Jobs other live nodes define and this one does not"),
        h("ul", { class: "drift-list", id: "cluster-missing" }, missing)]
      : null]);
}
