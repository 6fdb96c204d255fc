// @ts-check
/**
 * svc web UI: the dashboard's entry module (index.html loads it; it imports the rest).
 *
 * Plain JavaScript modules, no framework, no build step, nothing loaded from elsewhere.
 * Routes live in the URL fragment: #/ (views/dashboard.js), #/job/<id>[/log/<counter>]
 * (views/job.js), #/http/<id>[/log/<counter>] (views/job_http.js), both pages built by
 * views/detail.js with the log viewer of views/log.js and the run history of
 * views/history.js, and #/audit (views/audit.js, admins). What the views share lives in
 * state.js, the one module with mutable state.
 *
 * The Environment is kept current by live.js; the secret and the session by session.js
 * (signatures in actions.js, with hmac.js); cluster mode's data by cluster.js.
 */

import { refreshCluster } from "./cluster.js";
import { byId } from "./dom.js";
import { initLiveUpdates, refresh, schedulePoll } from "./live.js";
import { initSecret, initSession } from "./session.js";
import { state } from "./state.js";
import { auditView } from "./views/audit.js";
import { dashboardView } from "./views/dashboard.js";
import { detailView } from "./views/detail.js";
import { httpPage } from "./views/job_http.js";
import { jobPage } from "./views/job.js";
import { tick } from "./widgets.js";

/** @typedef {import("./state.js").Route} Route */
/** @typedef {import("./state.js").View} View */

/** @returns {Route} where the URL's fragment leads */
function parseRoute() {
  const parts = (location.hash || "#/").replace(/^#\/?/, "").split("/").map((p) => {
    try { return decodeURIComponent(p); } catch (e) { return p; }
  });
  if (parts[0] === "audit") return { key: "audit" };
  if ((parts[0] === "job" || parts[0] === "http") && parts[1]) {
    const counter = parts[2] === "log" ? parseInt(parts[3], 10) || 0 : 0;
    return { key: parts[0] + ":" + parts[1], kind: parts[0], id: parts[1], counter };
  }
  return { key: "dashboard" };
}

/**
 * The view a route shows, rendered into `main`.
 * @param {Route} r
 * @param {HTMLElement} main
 * @returns {View}
 */
function viewOf(r, main) {
  if (r.key === "audit") return auditView(main);
  if (r.kind && r.id) return detailView(r.kind === "job" ? jobPage : httpPage, r.id, main);
  return dashboardView(main);
}

/** Shows what the fragment asks for: the same view follows it, another replaces it. */
function onRoute() {
  const r = parseRoute();
  byId("nav-dashboard").setAttribute("aria-current", r.key === "dashboard" ? "page" : "false");
  byId("nav-audit").setAttribute("aria-current", r.key === "audit" ? "page" : "false");
  if (state.view && state.view.key === r.key) {
    r.scroll = true;
    state.view.route(r);
    return;
  }
  if (state.view) state.view.destroy();
  const main = byId("main");
  const view = viewOf(r, main);
  state.view = view;
  view.route(r);
  view.update();
  main.focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

initSecret();
initSession();
window.addEventListener("hashchange", onRoute);
onRoute();
refresh().then(schedulePoll, schedulePoll);
refreshCluster();
initLiveUpdates();
setInterval(tick, 1000);
