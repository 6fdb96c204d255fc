// @ts-check
/**
 * Cluster mode: GET /svc/api/cluster, read at load and every 15 seconds while cluster
 * mode is on (a node without it is asked once), and the warning a job carries when its
 * definition here differs from another live node's.
 */

import { explain } from "./actions.js";
import { h } from "./dom.js";
import { api } from "./session.js";
import { state } from "./state.js";

/** @typedef {import("./state.js").Differ} Differ */
/** @typedef {import("./state.js").Kind} Kind */

const CLUSTER_REFRESH_MS = 15000;
// The dashboard's kinds as the cluster spells them.
const CLUSTER_KIND = { job: "job", http: "job_http" };

/** Reads GET /svc/api/cluster, then again every CLUSTER_REFRESH_MS while cluster mode is
 * on (a node gets or loses it only by a restart, which reloads the page's data anyway). */
export async function refreshCluster() {
  const result = await api("GET", "/svc/api/cluster");
  if (result.ok) {
    state.cluster = result.data || { enabled: false };
    state.clusterError = "";
  } else if ((state.cluster && state.cluster.enabled) || result.status === 503) {
    // Only a cluster node answers 503 here; any other failure before the first
    // answer (the service unreachable: the banner says so) is tried again quietly.
    state.clusterError = explain(result);
  }
  /** @type {Record<string, Differ>} */
  const index = {};
  const cluster = state.cluster;
  if (cluster && cluster.enabled) {
    for (const d of cluster.differ || []) {
      if (d.here) index[d.kind + "/" + d.id] = d;
    }
  }
  state.driftIndex = index;
  if (state.view) state.view.update();
  if (cluster && cluster.enabled === false && !state.clusterError) return;
  setTimeout(refreshCluster, CLUSTER_REFRESH_MS);
}

/**
 * The nodes whose definition of the job (an entry of cluster.differ) is not this node's.
 * @param {Differ} d
 * @returns {string[]}
 */
export function otherHolders(d) {
  return (d.definitions || []).filter((def) => def.hash !== d.here).flatMap((def) => def.nodes || []);
}

/**
 * The cluster's entry of a job whose definition here differs, or null.
 * @param {Kind} kind
 * @param {string} id
 */
export function driftOf(kind, id) {
  return state.driftIndex[CLUSTER_KIND[kind] + "/" + id] || null;
}

/**
 * The warning a job's row carries when its definition differs on other nodes.
 * @param {Kind} kind
 * @param {string} id
 */
export function driftMark(kind, id) {
  const d = driftOf(kind, id);
  if (!d) return null;
  const others = otherHolders(d).join(", ");
  return h("span", {
    class: "drift",
    "data-drift": id,
    title: "The definition of this job differs on " + others + ": a run does what the node that claims it defines.",
  }, h("span", { "aria-hidden": "true" }, "⚠ "), "differs on " + others);
}

/**
 * A definition's hash, shortened, the whole one as its tooltip.
 * @param {string | undefined} hash
 */
export function shortHash(hash) {
  return h("code", { title: hash }, String(hash || "").slice(0, 12));
}
