/*
 * svc web UI: dashboard, job details, signed actions and the live log viewer.
 *
 * Plain JavaScript, no framework, nothing loaded from elsewhere. Routes live in the URL
 * fragment: #/ (dashboard), #/job/<id>[/log/<counter>], #/http/<id>[/log/<counter>].
 * The Environment is fetched again on each event of /svc/api/events (server-sent events;
 * see initLiveUpdates), and every 10 seconds when that stream is missing. A Job log is followed live with
 * server-sent events (/svc/api/job_exec/log/stream); when that is not possible the log
 * is fetched again every 5 seconds while its status is `started`.
 *
 * The secret typed in the top bar lives in this page's memory only (its input field):
 * never in any storage that a script of the same origin could read later, and never
 * sent: requests carry HMAC-SHA-256 signatures computed by hmac.js.
 *
 * When the service has users (login enabled), the top bar shows who is logged in and a
 * Log out button, and any answer 401 "login required" sends the browser to the login
 * page, which comes back here afterwards. An operator's or admin's actions then use the
 * session and its CSRF token (X-Svc-Csrf) instead of the secret, which is not asked for;
 * a viewer sees the actions disabled with the reason; an admin also gets the Audit view
 * (#/audit) with the Reload button.
 *
 * In cluster mode (GET /svc/api/cluster, read every 15 seconds) the dashboard shows a
 * Cluster panel (the nodes, and the jobs whose definitions differ between live nodes),
 * and a job whose definition here differs from another live node's carries a warning in
 * the lists and on its page. A node without cluster mode is asked once.
 */
(function () {
  "use strict";

  var ZERO_TIME = "0001-01-01T00:00:00Z";
  var ENV_REFRESH_MS = 10000;
  // While the event stream is healthy, a poll is only a safety net.
  var LIVE_REFRESH_MS = 300000;
  var LOG_POLL_MS = 5000;
  var WAIT_FOR_RUN_MS = 60000;
  // Where earlier versions kept the secret (see initSecret).
  var SECRET_KEY = "svc.secret";
  var LOGIN_REQUIRED = "login required";

  var main = document.getElementById("main");
  var secretInput = document.getElementById("secret");
  var banner = document.getElementById("connection");

  var env = null;
  var view = null;
  // GET /svc/api/session: {login, name, role, csrf}; null until it answers.
  var session = null;
  var ROLE_RANK = { viewer: 0, operator: 1, admin: 2 };
  var filters = { text: "", status: "" };
  // GET /svc/api/cluster's data: null until it answers; clusterError while it cannot be
  // read (the last answer is kept and shown with it).
  var cluster = null;
  var clusterError = "";
  // "<kind>/<id>" of each job whose definition here differs from another live node's:
  // its entry of cluster.differ, looked up once per job and render.
  var driftIndex = {};
  var CLUSTER_REFRESH_MS = 15000;
  // The dashboard's kinds as the cluster spells them.
  var CLUSTER_KIND = { job: "job", http: "job_http" };

  // ----- small helpers -------------------------------------------------------------

  /** Creates an element: h("a", {href: "#", class: "x"}, "text", child, ...). */
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        var value = attrs[key];
        if (value === null || value === undefined || value === false) return;
        if (key === "class") el.className = value;
        else if (key === "text") el.textContent = value;
        else if (key.slice(0, 2) === "on") el.addEventListener(key.slice(2), value);
        else if (value === true) el.setAttribute(key, "");
        else el.setAttribute(key, String(value));
      });
    }
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) child.forEach(function (c) { append(el, c); });
    else el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }

  function nowSecs() {
    return Math.floor(Date.now() / 1000);
  }

  function isNever(time) {
    return !time || time === ZERO_TIME || time.indexOf("0001-01-01") === 0;
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function absTime(time) {
    var d = new Date(time);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  /** "3h 5m", "12s": a non-negative number of seconds. */
  function span(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    var d = Math.floor(seconds / 86400), hh = Math.floor(seconds % 86400 / 3600);
    var m = Math.floor(seconds % 3600 / 60), s = seconds % 60;
    if (d) return d + "d " + hh + "h";
    if (hh) return hh + "h " + m + "m";
    if (m) return m + "m " + pad(s) + "s";
    return s + "s";
  }

  function ago(time) {
    if (isNever(time)) return "never";
    var secs = (Date.now() - new Date(time).getTime()) / 1000;
    if (secs < 5) return "just now";
    return span(secs) + " ago";
  }

  /** Interval in nanoseconds as 1h30m, 90s, 250ms. */
  function duration(ns) {
    if (!ns) return "";
    var ms = ns / 1e6;
    if (ms < 1000) return ms + "ms";
    var secs = Math.round(ms / 1000), out = "";
    var hh = Math.floor(secs / 3600), m = Math.floor(secs % 3600 / 60), s = secs % 60;
    if (hh) out += hh + "h";
    if (m) out += m + "m";
    if (s) out += s + "s";
    return out;
  }

  function timing(job) {
    if (job.schedule) {
      return job.timezone && job.timezone !== "UTC" ? job.schedule + " (" + job.timezone + ")" : job.schedule;
    }
    if (job.interval) return "every " + duration(job.interval);
    return "";
  }

  function statusOf(job) {
    return job.status || "never";
  }

  var STATUS_TEXT = {
    started: "running", success: "success", failed: "failed", fail: "failed",
    paused: "paused", never: "never ran",
  };

  function badge(status, id) {
    return h("span", { class: "badge " + status, id: id },
      status === "started" ? h("span", { class: "spinner", "aria-hidden": "true" }) : null,
      STATUS_TEXT[status] || status);
  }

  function timeCell(time) {
    if (isNever(time)) return h("span", { class: "muted" }, "never");
    return h("time", { datetime: time, title: absTime(time), "data-ago": time }, ago(time));
  }

  function countdown(job) {
    if (isNever(job.next_run)) return h("span", { class: "muted" }, job.path ? "on trigger" : "—");
    return h("time", {
      class: "countdown", datetime: job.next_run, title: absTime(job.next_run),
      "data-next": job.next_run, "data-status": statusOf(job),
    }, countdownText(job.next_run, statusOf(job)));
  }

  function countdownText(next, status) {
    var secs = (new Date(next).getTime() - Date.now()) / 1000;
    if (status === "paused") return "paused";
    if (secs <= 0) return status === "started" ? "running now" : "due now";
    return "in " + span(secs);
  }

  function tick() {
    document.querySelectorAll("[data-next]").forEach(function (el) {
      el.textContent = countdownText(el.getAttribute("data-next"), el.getAttribute("data-status"));
      var due = new Date(el.getAttribute("data-next")).getTime() <= Date.now();
      el.classList.toggle("due", due);
    });
    document.querySelectorAll("[data-ago]").forEach(function (el) {
      el.textContent = ago(el.getAttribute("data-ago"));
    });
  }

  function jobsById(kind) {
    var map = {};
    var source = env ? (kind === "http" ? env.http_jobs : env.jobs) : null;
    Object.keys(source || {}).forEach(function (name) {
      map[source[name].id] = source[name];
    });
    return map;
  }

  function sortedJobs(source) {
    return Object.keys(source || {}).sort().map(function (name) { return source[name]; });
  }

  function maxCounter(job) {
    return (job.logs || []).reduce(function (max, log) { return Math.max(max, log.counter); }, 0);
  }

  /** Counter of the run going on now: the log listed as `started` (the Environment lists
   * a running log), else, from an older server, the one after the newest listed. */
  function runningCounter(job) {
    if (job.status !== "started") return 0;
    var live = (job.logs || []).filter(function (log) { return log.status === "started"; });
    return live.length ? live[live.length - 1].counter : maxCounter(job) + 1;
  }

  // ----- secret and API calls --------------------------------------------------------

  function getSecret() {
    return secretInput.value;
  }

  function initSecret() {
    // Earlier versions kept the secret in sessionStorage: remove what they left.
    try { sessionStorage.removeItem(SECRET_KEY); } catch (e) { /* storage disabled */ }
    document.getElementById("secret-clear").addEventListener("click", function () {
      secretInput.value = "";
      secretInput.focus();
    });
    document.getElementById("secret-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
    });
  }

  /** fetch returning {ok, status, message, data}; never throws. A 401 "login required"
   * (the session ended) also sends the browser to the login page. */
  function api(method, url, body, headers) {
    return SvcApi.call(method, url, body, headers).then(function (result) {
      if (result.status === 401 && result.message === LOGIN_REQUIRED) goToLogin();
      return result;
    });
  }

  // ----- login -----------------------------------------------------------------------

  var leaving = false;

  function goToLogin() {
    if (leaving) return;
    leaving = true;
    location.assign("/svc/login?next=" +
      encodeURIComponent(location.pathname + location.search + location.hash));
  }

  /** Shows the logged-in user and the Log out button when login is enabled. */
  function initSession() {
    var box = document.getElementById("session");
    var logout = document.getElementById("logout");
    logout.addEventListener("click", function () {
      logout.disabled = true;
      api("POST", "/svc/api/logout").then(function () {
        leaving = true;
        location.assign("/svc/login");
      });
    });
    api("GET", "/svc/api/session").then(function (result) {
      if (!result.ok || !result.data) return;
      session = result.data;
      applySession();
      if (!session.login) return;
      if (!session.name) {
        // public_read: reading without a session; acting needs a login. The link gets
        // its target only here: without accounts the login page does not exist.
        var login = document.getElementById("session-login");
        login.href = "/svc/login?next=" + encodeURIComponent(location.pathname + location.hash);
        login.hidden = false;
        return;
      }
      document.getElementById("session-user").textContent = session.name;
      document.getElementById("session-role").textContent = session.role || "";
      box.hidden = false;
    });
  }

  // ----- rights ----------------------------------------------------------------------

  /** True when actions go with the session (login on, and a role that may act). */
  function sessionActs() {
    return !!(session && session.login && session.csrf && roleAtLeast("operator"));
  }

  function roleAtLeast(role) {
    return !!(session && session.role && ROLE_RANK[session.role] >= ROLE_RANK[role]);
  }

  /** Why this page may not act, or "" when it may (with the session or the secret). */
  function actionBlocker() {
    if (!session || !session.login) return "";
    if (!session.name) return "Log in as an operator or admin to run, pause, resume or cancel jobs.";
    if (roleAtLeast("operator")) return "";
    return "Your role (" + session.role + ") may not run, pause, resume or cancel jobs: " +
      "that needs the operator or admin role.";
  }

  /** The top bar and the current view once the session is known: no secret field when
   * the session acts, the Audit link for an admin. */
  function applySession() {
    document.getElementById("secret-form").hidden = !!(session && session.login);
    document.getElementById("nav-audit").hidden = !roleAtLeast("admin");
    if (view) view.update();
  }

  /** A POST done with the session: its CSRF token in X-Svc-Csrf. */
  function sessionPost(url, body) {
    var headers = { "X-Svc-Csrf": session.csrf };
    if (body !== null) headers["Content-Type"] = "application/x-www-form-urlencoded";
    return api("POST", url, body, headers);
  }

  function explain(result) {
    var msg = result.message ? ": " + result.message : "";
    switch (result.status) {
      case -1: return result.message;
      case 0: return "The service could not be reached" + msg + ".";
      case 401:
        if (result.message === LOGIN_REQUIRED) return "Your session has ended: log in again.";
        return "Wrong secret: the service refused the signature (401" + msg + ").";
      case 403: return "Not allowed (403" + msg + ").";
      case 422: return "The configuration was not reloaded (422" + msg + ").";
      case 404: return "Not found (404" + msg + ").";
      case 409: return "The job is not running (409" + msg + ").";
      case 412: return "The job is paused (412" + msg + "); resume it first.";
      case 429: return "The job is busy and a run is already queued (429" + msg + ").";
      default: return "The request failed (" + result.status + msg + ").";
    }
  }

  function needSecret(message) {
    if (sessionActs() || getSecret()) return false;
    message.set("error", "Type the secret in the top bar first: actions are signed with it.");
    secretInput.focus();
    return true;
  }

  // Signed control requests are one-time, and two with the same body in the same second
  // are one request: a field of the UI's own, random, makes each click its own request
  // (the signature covers it; the service ignores it).
  function nonce() {
    var bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return (b + 256).toString(16).slice(1); }).join("");
  }

  function signedForm(path, id) {
    if (sessionActs()) return sessionPost(path, "id=" + encodeURIComponent(id));
    var body = "_svc_epoch=" + nowSecs() + "&id=" + encodeURIComponent(id) + "&_svc_nonce=" + nonce();
    return api("POST", path, body, {
      "Content-Type": "application/x-www-form-urlencoded",
      "X-Svc-Sign": SvcHmac.hmacSha256Hex(getSecret(), body),
    });
  }

  function signedQuery(path, id) {
    if (sessionActs()) return sessionPost(path + "?id=" + encodeURIComponent(id), null);
    // With an epoch: the request is one-time and bounded in time (require_epoch).
    var query = "id=" + encodeURIComponent(id) + "&_svc_epoch=" + nowSecs() + "&_svc_nonce=" + nonce();
    return api("POST", path + "?" + query, null, {
      "X-Svc-Sign": SvcHmac.hmacSha256Hex(getSecret(), query),
    });
  }

  function triggerPath(path) {
    return "/svc/api/job/run/" + path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/");
  }

  // Run now: a request signed with the main secret, for every Job and JobHttp (the
  // run's log says it was started by hand).
  function runNow(job, kind) {
    if (kind === "job") return signedForm("/svc/api/job_exec/trigger", job.id);
    return signedQuery("/svc/api/job_http/trigger", job.id);
  }

  function runNowBlocker(job) {
    if (job.status === "paused") return "The job is paused: resume it to run it.";
    return "";
  }

  // ----- environment ---------------------------------------------------------------

  function refresh() {
    return api("GET", "/svc/api/environment").then(function (result) {
      if (!result.ok) {
        banner.hidden = false;
        banner.textContent = "Cannot load the Environment: " + explain(result);
        return;
      }
      banner.hidden = true;
      env = result.data;
      document.getElementById("server-name").textContent = env.name || "svc";
      document.getElementById("server-version").textContent = env.version ? "v" + env.version : "";
      document.getElementById("footer-status").textContent =
        "Updated " + absTime(new Date().toISOString()) + " · " + refreshNote() +
        (env.is_development ? " · development server" : "");
      if (view) view.update();
    });
  }

  // ----- message area ----------------------------------------------------------------

  function messageArea(id) {
    var el = h("div", { class: "message", id: id, role: "status", "aria-live": "polite" });
    return {
      el: el,
      set: function (kind, text) {
        el.className = "message " + kind;
        el.textContent = text;
      },
      clear: function () { el.className = "message"; el.textContent = ""; },
    };
  }

  // ----- cluster ---------------------------------------------------------------------

  /** Reads GET /svc/api/cluster, then again every CLUSTER_REFRESH_MS while cluster mode is
   * on (a node gets or loses it only by a restart, which reloads the page's data anyway). */
  function refreshCluster() {
    return api("GET", "/svc/api/cluster").then(function (result) {
      if (result.ok) {
        cluster = result.data || { enabled: false };
        clusterError = "";
      } else if ((cluster && cluster.enabled) || result.status === 503) {
        // Only a cluster node answers 503 here; any other failure before the first
        // answer (the service unreachable: the banner says so) is tried again quietly.
        clusterError = explain(result);
      }
      driftIndex = {};
      if (cluster && cluster.enabled) {
        (cluster.differ || []).forEach(function (d) {
          if (d.here) driftIndex[d.kind + "/" + d.id] = d;
        });
      }
      if (view) view.update();
      if (cluster && cluster.enabled === false && !clusterError) return;
      setTimeout(refreshCluster, CLUSTER_REFRESH_MS);
    });
  }

  /** The nodes whose definition of the job (an entry of cluster.differ) is not this node's. */
  function otherHolders(d) {
    var nodes = [];
    (d.definitions || []).forEach(function (def) {
      if (def.hash !== d.here) nodes = nodes.concat(def.nodes || []);
    });
    return nodes;
  }

  /** The cluster's entry of a job whose definition here differs, or null. */
  function driftOf(kind, id) {
    return driftIndex[CLUSTER_KIND[kind] + "/" + id] || null;
  }

  /** The warning a job's row carries when its definition differs on other nodes. */
  function driftMark(kind, id) {
    var d = driftOf(kind, id);
    if (!d) return null;
    var others = otherHolders(d).join(", ");
    return h("span", { class: "drift", "data-drift": id,
      title: "The definition of this job differs on " + others + ": a run does what the node that claims it defines." },
    h("span", { "aria-hidden": "true" }, "⚠ "), "differs on " + others);
  }

  function shortHash(hash) {
    return h("code", { title: hash }, String(hash || "").slice(0, 12));
  }

  /** Link to a job of this node, or its ID alone. */
  function clusterJob(entry) {
    var kind = entry.kind === "job_http" ? "http" : "job";
    var here = (kind === "job" ? env && env.jobs : env && env.http_jobs) || {};
    var defined = Object.keys(here).some(function (name) { return here[name].id === entry.id; });
    var label = (kind === "job" ? "job " : "HTTP job ") + entry.id;
    return defined ? h("a", { href: "#/" + kind + "/" + encodeURIComponent(entry.id) }, label) : h("span", null, label);
  }

  /** The dashboard's Cluster panel: nodes, then the jobs whose definitions differ. */
  function clusterPanel(box) {
    box.hidden = !((cluster && cluster.enabled) || clusterError);
    if (box.hidden) return;
    var data = cluster && cluster.enabled ? cluster : { nodes: [], differ: [], missing_here: [] };
    var nodes = data.nodes || [];
    var live = nodes.filter(function (n) { return n.live; }).length;
    var rows = nodes.map(function (n) {
      return h("tr", { "data-node": n.name },
        cell("Node", h("span", null, h("strong", null, n.name),
          n.name === data.node ? h("span", { class: "sub" }, "this node") : null), "name"),
        cell("State", h("span", { class: "badge " + (n.live ? "success" : "never") }, n.live ? "live" : "gone")),
        cell("Last heartbeat", timeCell(n.heartbeat)),
        cell("Started", timeCell(n.started)),
        cell("Max running", String(n.max_job_running)));
    });
    var differ = (data.differ || []).map(function (d) {
      return h("li", { "data-differ": d.kind + "/" + d.id }, clusterJob(d), ": ",
        (d.definitions || []).map(function (def, i) {
          return [i ? "; " : "", shortHash(def.hash), " on ", (def.nodes || []).join(", ")];
        }));
    });
    if (data.differ_total > differ.length) {
      differ.push(h("li", { class: "muted" }, "and " + (data.differ_total - differ.length) + " more"));
    }
    var missing = (data.missing_here || []).map(function (m) {
      return h("li", { "data-missing": m.kind + "/" + m.id }, clusterJob(m), ": defined on ",
        (m.nodes || []).join(", "), ", not on this node");
    });
    if (data.missing_here_total > missing.length) {
      missing.push(h("li", { class: "muted" }, "and " + (data.missing_here_total - missing.length) + " more"));
    }
    // append, not replaceChildren: it skips the absent parts and flattens the lists.
    box.replaceChildren();
    append(box, [
      h("div", { class: "cluster-head" },
        h("h2", { id: "cluster-heading" }, "Cluster"),
        cluster && cluster.enabled ? h("span", { class: "muted" }, "this node: ", h("strong", null, data.node),
          " · " + live + " of " + nodes.length + " nodes live") : null),
      clusterError ? h("p", { class: "message error", id: "cluster-error" }, "Cannot read the cluster: " + clusterError) : null,
      nodes.length ? h("div", { class: "table-wrap" }, table("Cluster nodes",
        ["Node", "State", "Last heartbeat", "Started", "Max running"], rows)) : null,
      differ.length
        ? [h("h3", null, "Definitions that differ between live nodes"),
          h("ul", { class: "drift-list", id: "cluster-differ" }, differ),
          h("p", { class: "hint" }, "A run of these jobs does what the node that claims it defines. " +
            "Make the files agree and reload the nodes; during a rolling change this is expected.")]
        : (cluster && cluster.enabled ? h("p", { class: "hint", id: "cluster-agree" },
          "Every live node defines its jobs alike.") : null),
      missing.length
        ? [h("h3", null, "Jobs other live nodes define and this one does not"),
          h("ul", { class: "drift-list", id: "cluster-missing" }, missing)]
        : null]);
  }

  // ----- dashboard -------------------------------------------------------------------

  function matches(job) {
    var text = filters.text.trim().toLowerCase();
    if (text && job.name.toLowerCase().indexOf(text) < 0 && job.id.toLowerCase().indexOf(text) < 0) {
      return false;
    }
    return !filters.status || statusOf(job) === filters.status ||
      (filters.status === "failed" && job.status === "fail");
  }

  function dashboardView() {
    document.title = (env && env.name ? env.name : "svc") + " · dashboard";
    var textInput = h("input", {
      type: "search", id: "filter-name", placeholder: "name contains…", value: filters.text,
      oninput: function () { filters.text = textInput.value; update(); },
    });
    var statusSelect = h("select", {
      id: "filter-status",
      onchange: function () { filters.status = statusSelect.value; update(); },
    },
    [["", "All"], ["started", "Running"], ["success", "Success"], ["failed", "Failed"],
      ["paused", "Paused"], ["never", "Never ran"]].map(function (pair) {
      return h("option", { value: pair[0], selected: filters.status === pair[0] }, pair[1]);
    }));
    var count = h("span", { class: "count", "aria-live": "polite" });
    var jobsBox = h("div", { class: "card table-wrap" });
    var httpBox = h("div", { class: "card table-wrap" });
    var clusterBox = h("section", { class: "card panel cluster-panel", id: "cluster-panel",
      "aria-labelledby": "cluster-heading", hidden: true });
    main.replaceChildren(
      h("h1", { class: "visually-hidden" }, "Dashboard"),
      clusterBox,
      h("div", { class: "filters", role: "search" },
        h("label", { for: "filter-name" }, "Filter by name", textInput),
        h("label", { for: "filter-status" }, "Status", statusSelect),
        count),
      h("h2", { id: "jobs-heading" }, "Jobs"), jobsBox,
      h("h2", { id: "http-heading" }, "HTTP jobs"), httpBox);

    function update() {
      clusterPanel(clusterBox);
      if (!env) return;
      var jobs = sortedJobs(env.jobs), http = sortedJobs(env.http_jobs);
      var shownJobs = jobs.filter(matches), shownHttp = http.filter(matches);
      count.textContent = (shownJobs.length + shownHttp.length) + " of " +
        (jobs.length + http.length) + " shown";
      jobsBox.replaceChildren(jobs.length ? table("Jobs", ["Name", "Status", "Last run", "Next run",
        "Interval / schedule", "Trigger"], shownJobs.map(jobRow)) : empty("No jobs are configured."));
      httpBox.replaceChildren(http.length ? table("HTTP jobs", ["Name", "Status", "Last run", "Next run",
        "Interval / schedule", "Request"], shownHttp.map(httpRow)) : empty("No HTTP jobs are configured."));
    }
    return { key: "dashboard", update: update, route: function () {}, destroy: function () {} };
  }

  function empty(text) {
    return h("p", { class: "empty" }, text);
  }

  function table(caption, heads, rows) {
    return h("table", { class: "responsive" },
      h("caption", { class: "visually-hidden" }, caption),
      h("thead", null, h("tr", null, heads.map(function (t) { return h("th", { scope: "col" }, t); }))),
      h("tbody", null, rows.length ? rows :
        h("tr", null, h("td", { colspan: heads.length, class: "empty" }, "Nothing matches the filter."))));
  }

  function cell(label, content, cls) {
    return h("td", { "data-label": label, class: cls }, content);
  }

  function jobRow(job) {
    var trigger = job.path
      ? [h("code", null, job.path), h("span", { class: "sub" }, job.auth_kind)]
      : h("span", { class: "muted" }, "timer only");
    return h("tr", { "data-job": job.id },
      cell("Name", h("span", null, h("a", { href: "#/job/" + encodeURIComponent(job.id) }, job.name),
        driftMark("job", job.id)), "name"),
      cell("Status", badge(statusOf(job))),
      cell("Last run", timeCell(job.last_run)),
      cell("Next run", countdown(job)),
      cell("Interval / schedule", timing(job) || h("span", { class: "muted" }, "none")),
      cell("Trigger", trigger));
  }

  function httpRow(job) {
    return h("tr", { "data-http": job.id },
      cell("Name", h("span", null, h("a", { href: "#/http/" + encodeURIComponent(job.id) }, job.name),
        driftMark("http", job.id)), "name"),
      cell("Status", badge(statusOf(job))),
      cell("Last run", timeCell(job.last_run)),
      cell("Next run", countdown(job)),
      cell("Interval / schedule", timing(job)),
      cell("Request", [h("code", null, job.http_method || "GET"), " ",
        h("span", { class: "sub" }, job.http_url)]));
  }

  // ----- job and JobHttp details -----------------------------------------------------

  function facts(pairs) {
    var dl = h("dl", { class: "facts" });
    pairs.forEach(function (pair) {
      if (pair[1] === null || pair[1] === undefined || pair[1] === "") return;
      append(dl, [h("dt", null, pair[0]), h("dd", null, pair[1])]);
    });
    return dl;
  }

  function logLinks(kind, job, current) {
    var logs = (job.logs || []).slice().sort(function (a, b) { return b.counter - a.counter; });
    var running = kind === "job" ? runningCounter(job) : 0;
    var items = [];
    if (running && !logs.some(function (l) { return l.counter === running; })) {
      logs.unshift({ counter: running, status: "started" });
    }
    logs.forEach(function (log) {
      var label = "#" + log.counter + " " + (STATUS_TEXT[log.status] || log.status);
      items.push(h("li", null, h("a", {
        href: "#/" + kind + "/" + encodeURIComponent(job.id) + "/log/" + log.counter,
        class: log.status, "aria-current": log.counter === current ? "true" : null,
        "data-counter": log.counter,
      }, log.status === "started" ? h("span", { class: "spinner", "aria-hidden": "true" }) : null, label)));
    });
    if (!items.length) return empty("No logs yet.");
    return h("ul", { class: "logs", "aria-label": "Logs, newest first" }, items);
  }

  function detailView(kind, id) {
    var message = messageArea("action-message");
    var head = h("div", { class: "detail-head" });
    var description = h("div", { class: "description" });
    var driftNote = h("p", { class: "message notice", id: "drift-note", role: "status", hidden: true });
    var info = h("div", { class: "card panel" });
    var side = h("div", { class: "card panel" });
    var logsBox = h("div");
    var viewerBox = h("div");
    var buttons = {};
    var hint = h("p", { class: "hint", id: "action-hint" });
    var lastDescription = null;
    var viewer = null;
    var counter = 0;

    function current() {
      return jobsById(kind)[id];
    }

    function act(name, fn, success) {
      var job = current();
      if (!job || needSecret(message)) return;
      message.set("", name + "…");
      buttons[name].disabled = true;
      fn(job).then(function (result) {
        if (result.ok && result.data && result.data.skipped) {
          // 200, but nothing started (on_busy = skip): say why, and stay.
          message.set("notice", "Not run: " + (result.data.reason || result.message) + ".");
        } else if (result.ok) {
          message.set("ok", success(job, result));
        } else {
          message.set("error", explain(result));
        }
        return refresh();
      }).then(update, update);
    }

    var actions = h("div", { class: "actions" });
    function button(name, label, cls, fn, success) {
      buttons[name] = h("button", {
        type: "button", class: cls, id: "action-" + name,
        "aria-describedby": "action-hint",
        onclick: function () { act(name, fn, success); },
      }, label);
      actions.appendChild(buttons[name]);
    }

    button("run", "Run now", "primary", function (job) {
      var blocker = runNowBlocker(job);
      if (blocker) return Promise.resolve({ ok: false, status: -1, message: blocker });
      counter = Math.max(maxCounter(job), runningCounter(job)) + 1;
      return runNow(job, kind);
    }, function (job) {
      if (kind !== "job") return "Run accepted: the call's log follows below.";
      location.hash = "#/job/" + encodeURIComponent(job.id) + "/log/" + counter;
      return "Run accepted: following log #" + counter + ".";
    });
    if (kind === "job") {
      button("pause", "Pause", "", function (job) {
        return signedForm("/svc/api/job_exec/pause", job.id);
      }, function () { return "Paused: timer ticks are skipped and triggers are refused."; });
      button("resume", "Resume", "", function (job) {
        return signedForm("/svc/api/job_exec/resume", job.id);
      }, function () { return "Resumed."; });
      button("cancel", "Cancel run", "danger", function (job) {
        return signedForm("/svc/api/job_exec/cancel", job.id);
      }, function () { return "Cancel sent: the run is being stopped."; });
    } else {
      button("pause", "Pause", "", function (job) {
        return signedQuery("/svc/api/job_http/pause", job.id);
      }, function () { return "Paused: timer ticks are skipped."; });
      button("resume", "Resume", "", function (job) {
        return signedQuery("/svc/api/job_http/resume", job.id);
      }, function () { return "Resumed."; });
    }

    var history = historyPanel(kind, id);
    var logsTitle = h("h2", { id: "logs-title" }, "Logs");
    main.replaceChildren(
      h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Dashboard"), " › ",
        kind === "job" ? "Job" : "HTTP job"),
      head, driftNote, description,
      h("div", { class: "grid" }, info, side),
      h("div", { class: "card panel viewer-logs" }, logsTitle, logsBox),
      viewerBox, history.el);

    function update() {
      var job = current();
      if (!env) return;
      if (!job) {
        head.replaceChildren(h("h1", null, "Not found"));
        info.replaceChildren(h("p", null, "There is no " + (kind === "job" ? "job" : "HTTP job") +
          " with the ID ", h("code", null, id), ". ", h("a", { href: "#/" }, "Back to the dashboard.")));
        return;
      }
      document.title = job.name + " · " + (env.name || "svc");
      // In cluster mode the run history lists every node's runs and logs; this list is
      // what this node ran (and a run going on anywhere).
      logsTitle.textContent = cluster && cluster.enabled ? "Logs on this node" : "Logs";
      head.replaceChildren(h("h1", { id: "job-name" }, job.name), badge(statusOf(job), "job-status"));
      var drift = driftOf(kind, id);
      driftNote.hidden = !drift;
      driftNote.replaceChildren();
      if (drift) {
        append(driftNote, ["⚠ This job's definition differs on " + otherHolders(drift).join(", ") +
          " (this node's is ", shortHash(drift.here), "). A run does what the node that claims it defines."]);
      }
      if (job.description !== lastDescription) {
        // Operator-written configuration, documented as HTML: shown as HTML. The page's
        // Content-Security-Policy still refuses any script in it.
        description.innerHTML = job.description || "";
        lastDescription = job.description;
      }
      var common = [
        ["ID", h("code", null, job.id)],
        ["Status", STATUS_TEXT[statusOf(job)] || job.status],
        ["Last run", timeCell(job.last_run)],
        ["Next run", isNever(job.next_run) ? countdown(job) : h("span", null, countdown(job), " ",
          h("span", { class: "muted", id: "next-run-local" }, "(" + absTime(job.next_run) + " your time)"))],
        ["Interval / schedule", timing(job) || "none"],
      ];
      if (kind === "job") {
        info.replaceChildren(h("h2", null, "Schedule and trigger"), facts(common.concat([
          ["Path", job.path ? h("code", null, "POST " + triggerPath(job.path)) : "none (timer only)"],
          ["Auth kind", job.path ? job.auth_kind : ""],
          ["Signature header", job.path && job.auth_kind === "hmac-sha256" ? h("code", null, job.header_sign) : ""],
          ["Time limit", job.timeout ? duration(job.timeout) : "none"],
          ["Logs kept", String(job.log_retention)],
        ])));
        side.replaceChildren(h("h2", null, "Commands"),
          h("pre", { class: "commands" }, (job.commands || []).map(function (c) { return "$ " + c + "\n"; }).join("")),
          h("h2", null, "Actions"), actions, hint, message.el);
        var blocker = runNowBlocker(job);
        buttons.run.disabled = !!blocker;
        buttons.pause.disabled = job.status === "paused";
        buttons.resume.disabled = job.status !== "paused";
        buttons.cancel.disabled = job.status !== "started";
        hint.textContent = blocker ||
          "Run now sends a request signed with the main secret; the run's log says it was started by hand.";
      } else {
        var headers = job.http_headers && job.http_headers.length
          ? h("ul", { class: "headers", id: "http-headers" }, job.http_headers.map(function (x) { return h("li", null, x); }))
          : h("span", { class: "muted" }, "none");
        info.replaceChildren(h("h2", null, "Schedule"), facts(common.concat([
          ["Logs kept", String(job.log_retention)],
        ])));
        side.replaceChildren(h("h2", null, "Request"), facts([
          ["Method", h("code", null, job.http_method || "GET")],
          ["URL", h("code", { id: "http-url" }, job.http_url)],
          ["Request type", job.http_request_type || "query"],
          ["Headers", headers],
          ["Timeout", duration(job.http_timeout) || "default"],
          ["Insecure TLS", job.http_insecure ? "accepted" : "no"],
        ]), h("h2", null, "Actions"), actions, hint, message.el);
        var blocker = runNowBlocker(job);
        buttons.run.disabled = !!blocker;
        buttons.pause.disabled = job.status === "paused";
        buttons.resume.disabled = job.status !== "paused";
        hint.textContent = blocker ||
          "Run now, pause and resume are signed with the main secret.";
      }
      logsBox.replaceChildren(logLinks(kind, job, viewer ? viewer.counter : 0));
      if (viewer) viewer.jobUpdated(job);
      history.jobUpdated(job);
      applyRights(buttons, hint);
    }

    function route(r) {
      var wanted = r.counter || 0;
      if (viewer && viewer.counter === wanted) return;
      if (viewer) viewer.close();
      viewer = null;
      viewerBox.replaceChildren();
      if (wanted) {
        var job = current();
        var waiting = !!job && (wanted > maxCounter(job));
        viewer = logViewer(kind, id, wanted, waiting);
        viewerBox.appendChild(viewer.el);
      }
      update();
      if (viewer && r.scroll) viewer.el.scrollIntoView({ block: "start" });
    }

    return {
      key: kind + ":" + id,
      update: update,
      route: route,
      onEvent: history.onEvent,
      destroy: function () { if (viewer) viewer.close(); },
    };
  }

  // ----- log viewer ------------------------------------------------------------------

  function base64Bytes(text) {
    var bin = atob(text);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  var LINE_TIME = /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (.*)$/;

  function logViewer(kind, id, counter, waiting) {
    var pre = h("pre", { class: "log", id: "log", tabindex: "0", "aria-label": "Log content", "aria-live": "off" });
    var statusBox = h("span", { id: "viewer-status" });
    var mode = h("span", { class: "viewer-mode", id: "viewer-mode" });
    var jump = h("button", { type: "button", class: "small", hidden: true,
      onclick: function () { follow = true; jump.hidden = true; scroll(); } }, "Jump to the end");
    var download = h("a", { href: "#", id: "log-download", download: id + "." + counter + ".log",
      onclick: function () { prepareDownload(); } }, "Download");
    var el = h("section", { class: "card viewer", "aria-labelledby": "viewer-title" },
      h("div", { class: "viewer-head" },
        h("h2", { id: "viewer-title" }, "Log #" + counter),
        statusBox, mode, h("span", { class: "viewer-mode" }, "times in UTC"), h("span", { class: "spacer" }), jump, download),
      pre);

    var chunks = [];
    var received = 0;
    var decoder = new TextDecoder("utf-8");
    var partial = "";
    var partialNode = document.createTextNode("");
    pre.appendChild(partialNode);
    var follow = true;
    var closed = false;
    var status = "";
    var source = null;
    var timer = null;
    var blobUrl = null;
    var waitUntil = Date.now() + WAIT_FOR_RUN_MS;

    pre.addEventListener("scroll", function () {
      var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      follow = atBottom;
      jump.hidden = atBottom;
    });

    function scroll() {
      if (follow) pre.scrollTop = pre.scrollHeight;
    }

    function setStatus(s, text) {
      status = s;
      statusBox.replaceChildren(badge(s === "fail" ? "failed" : s));
      if (text !== undefined) mode.textContent = text;
    }

    function lineNode(line) {
      var frag = document.createDocumentFragment();
      var m = LINE_TIME.exec(line);
      var text = m ? m[2] : line;
      if (m) frag.appendChild(h("span", { class: "t" }, m[1] + " "));
      var cls = /^(===|\$ |---)/.test(text) ? (/finished: fail|cancel/i.test(text) && /^===/.test(text) ? "svc bad" : "svc") : null;
      frag.appendChild(cls ? h("span", { class: cls }, text) : document.createTextNode(text));
      frag.appendChild(document.createTextNode("\n"));
      return frag;
    }

    function addText(text) {
      var all = partial + text;
      var lines = all.split("\n");
      partial = lines.pop();
      var frag = document.createDocumentFragment();
      lines.forEach(function (line) { frag.appendChild(lineNode(line)); });
      pre.insertBefore(frag, partialNode);
      partialNode.nodeValue = partial;
    }

    function addBytes(bytes, final) {
      chunks.push(bytes);
      received += bytes.length;
      addText(decoder.decode(bytes, { stream: !final }));
      scroll();
    }

    function reset() {
      chunks = [];
      received = 0;
      decoder = new TextDecoder("utf-8");
      partial = "";
      pre.replaceChildren(partialNode);
      partialNode.nodeValue = "";
    }

    function finish(s) {
      addText(decoder.decode());
      if (partial) { addText("\n"); }
      setStatus(s, "");
      scroll();
      refresh();
    }

    function prepareDownload() {
      if (blobUrl) URL.revokeObjectURL(blobUrl);
      blobUrl = URL.createObjectURL(new Blob(chunks, { type: "text/plain" }));
      download.href = blobUrl;
    }

    // Live: server-sent events. Kind "job" only.
    function stream() {
      if (closed) return;
      if (typeof EventSource === "undefined" || kind !== "job") { poll(); return; }
      var opened = false;
      source = new EventSource("/svc/api/job_exec/log/stream?id=" + encodeURIComponent(id) + "&counter=" + counter);
      source.addEventListener("meta", function () {
        opened = true;
        reset();
        setStatus("started", "live");
      });
      source.addEventListener("chunk", function (ev) {
        var data = JSON.parse(ev.data);
        if (data.offset !== received) return;
        addBytes(base64Bytes(data.content), false);
      });
      source.addEventListener("end", function (ev) {
        var data = JSON.parse(ev.data);
        source.close();
        finish(data.status);
      });
      source.addEventListener("gone", function () {
        source.close();
        setStatus("never", "the log was removed");
      });
      source.addEventListener("timeout", function () {
        source.close();
        poll();
      });
      source.onerror = function () {
        // Before the first event (404, no server-sent events on the way): poll instead.
        // After it the browser reconnects by itself and the stream starts over.
        if (!opened || source.readyState === EventSource.CLOSED) {
          source.close();
          if (!closed) poll();
        }
      };
    }

    // Fallback and JobHttp logs: the log endpoint, again every 5 s while started.
    function poll() {
      if (closed) return;
      var url = (kind === "job" ? "/svc/api/job_exec/log" : "/svc/api/job_http/log") +
        "?id=" + encodeURIComponent(id) + "&counter=" + counter;
      api("GET", url).then(function (result) {
        if (closed) return;
        if (result.status === 404 && waiting && Date.now() < waitUntil) {
          mode.textContent = "waiting for the run to start…";
          timer = setTimeout(poll, 700);
          return;
        }
        if (!result.ok) {
          setStatus("never", explain(result));
          return;
        }
        var log = result.data;
        reset();
        addBytes(base64Bytes(log.content || ""), log.status !== "started");
        if (log.status === "started") {
          if (waiting && kind === "job") { waiting = false; stream(); return; }
          setStatus("started", "refreshed every 5 seconds");
          timer = setTimeout(poll, LOG_POLL_MS);
        } else {
          finish(log.status);
        }
      });
    }

    setStatus("started", waiting ? "waiting for the run to start…" : "loading…");
    if (waiting && kind === "job") poll();
    else stream();

    return {
      el: el,
      counter: counter,
      jobUpdated: function () {},
      close: function () {
        closed = true;
        if (source) source.close();
        if (timer) clearTimeout(timer);
        if (blobUrl) URL.revokeObjectURL(blobUrl);
      },
      status: function () { return status; },
    };
  }

  // ----- run history -----------------------------------------------------------------

  var HISTORY_PAGE = 50;
  // Each status with a sign of its own, so that the badge does not rely on colour.
  var RUN_STATUS = {
    success: { sign: "✓", text: "success" },
    fail: { sign: "✗", text: "failed" },
    canceled: { sign: "⊘", text: "canceled" },
    timeout: { sign: "◔", text: "timeout" },
    interrupted: { sign: "↯", text: "interrupted" },
    // Cluster mode: a run going on, on this node or another.
    running: { sign: "▶", text: "running" },
  };

  function runBadge(status) {
    var known = RUN_STATUS[status] || { sign: "?", text: status };
    return h("span", { class: "badge run-" + status, "data-status": status },
      h("span", { "aria-hidden": "true" }, known.sign), known.text);
  }

  /** A run's length from milliseconds: 850 ms, 4.2 s, 3m 05s. */
  function runDuration(ms) {
    if (typeof ms !== "number") return "";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    return span(ms / 1000);
  }

  /** How a run's work ended: exit code, signal or HTTP status, after `oom` when the
   * kernel killed it at its memory limit. */
  function runExit(run) {
    if (run.reason === "oom") {
      var how = runExit({ exit_code: run.exit_code, signal: run.signal });
      return [h("span", { class: "badge run-fail", title: "killed at its memory limit (limit_memory)" }, "oom"), " ", how];
    }
    if (typeof run.http_status === "number") return "HTTP " + run.http_status;
    if (typeof run.signal === "number") return "signal " + run.signal;
    if (typeof run.exit_code === "number") return "exit " + run.exit_code;
    return h("span", { class: "muted" }, "—");
  }

  /** A size in bytes, in KiB, MiB or GiB. */
  function bytesText(n) {
    if (n < 1048576) return Math.round(n / 1024) + " KiB";
    if (n < 1073741824) return (n / 1048576).toFixed(1) + " MiB";
    return (n / 1073741824).toFixed(2) + " GiB";
  }

  /** The CPU time of a run (user and system together; each in the tooltip). */
  function runCpu(run) {
    var u = run.usage;
    if (!u) return h("span", { class: "muted", title: "not measured" }, "—");
    return h("span", { title: "user " + runDuration(u.cpu_user_ms) + ", system " + runDuration(u.cpu_system_ms) },
      runDuration(u.cpu_user_ms + u.cpu_system_ms));
  }

  /** The peak memory of a run: of all its processes at once (measured by its cgroup) or
   * of its largest process (from the reaped processes' usage). */
  function runMemory(run) {
    var u = run.usage;
    if (!u) return h("span", { class: "muted", title: "not measured" }, "—");
    var of = u.measured_by === "cgroup" ? "all of the run's processes at once" : "the run's largest process";
    return h("span", { title: "peak memory of " + of }, bytesText(u.peak_memory_bytes));
  }

  /** The run history of one job (GET …/runs): newest first, filtered by status on the
   * client, older pages on demand, the newest page again when one of its runs ends. */
  function historyPanel(kind, id) {
    var url = (kind === "job" ? "/svc/api/job_exec/runs" : "/svc/api/job_http/runs") +
      "?id=" + encodeURIComponent(id) + "&limit=" + HISTORY_PAGE;
    var runs = [];
    var more = false;
    var loading = false;
    var logs = {};
    var wanted = "";
    var note = h("p", { class: "hint", id: "history-note", "aria-live": "polite" });
    var select = h("select", {
      id: "history-status",
      onchange: function () { wanted = select.value; render(); },
    }, [["", "All"], ["success", "Success"], ["fail", "Failed"], ["canceled", "Canceled"],
      ["timeout", "Timeout"], ["interrupted", "Interrupted"]].map(function (pair) {
      return h("option", { value: pair[0] }, pair[1]);
    }));
    var older = h("button", { type: "button", class: "small", id: "history-older",
      onclick: function () { load(true); } }, "Load older runs");
    var box = h("div", { class: "table-wrap history" });
    var el = h("section", { class: "card panel history-panel", "aria-labelledby": "history-title" },
      h("div", { class: "history-head" },
        h("h2", { id: "history-title" }, "Run history"),
        h("label", { for: "history-status", class: "inline" }, "Status", select)),
      box, h("div", { class: "history-foot" }, older, note));

    function row(run) {
      var started = isNever(run.started_at) ? h("span", { class: "muted" }, "—")
        : h("time", { datetime: run.started_at, title: run.started_at }, absTime(run.started_at));
      // `run.log`: cluster mode, where any node's log is read from the shared table.
      var log = logs[run.counter] || run.log
        ? h("a", { href: "#/" + kind + "/" + encodeURIComponent(id) + "/log/" + run.counter }, "log #" + run.counter)
        : h("span", { class: "muted", title: "removed by log_retention" }, "removed");
      return h("tr", { "data-run": run.counter, "data-status": run.status },
        cell("Run", ["#" + run.counter, run.node ? h("span", { class: "sub", title: "node that ran it" }, run.node) : null], "num"),
        cell("Status", runBadge(run.status)),
        cell("Trigger", [run.trigger, run.cause ? h("span", { class: "sub" }, run.cause) : null]),
        cell("Started", started),
        cell("Duration", runDuration(run.duration_ms), "num"),
        cell("Exit", runExit(run)),
        cell("CPU", runCpu(run), "num"),
        cell("Peak memory", runMemory(run), "num"),
        cell("Attempt", String(run.attempt || 1), "num"),
        cell("Log", log));
    }

    function render() {
      var shown = runs.filter(function (run) { return !wanted || run.status === wanted; });
      if (!runs.length) {
        box.replaceChildren(empty(loading ? "Loading…" : "No finished runs yet."));
      } else {
        box.replaceChildren(table("Run history", ["Run", "Status", "Trigger", "Started (your time)",
          "Duration", "Exit", "CPU", "Peak memory", "Attempt", "Log"], shown.map(row)));
      }
      older.hidden = !more;
      older.disabled = loading;
    }

    /** Merges a page into what is loaded, newest first, each counter once. */
    function merge(page) {
      var byCounter = {};
      runs.concat(page).forEach(function (run) { byCounter[run.counter] = run; });
      runs = Object.keys(byCounter).map(function (c) { return byCounter[c]; })
        .sort(function (a, b) { return b.counter - a.counter; });
    }

    function load(olderPage) {
      if (loading) return;
      loading = true;
      render();
      var before = olderPage && runs.length ? "&before=" + runs[runs.length - 1].counter : "";
      api("GET", url + before).then(function (result) {
        loading = false;
        if (!result.ok) {
          note.textContent = "Cannot load the run history: " + explain(result);
          render();
          return;
        }
        note.textContent = "";
        var page = result.data || [];
        merge(page);
        // Only an older page tells whether there are more: the newest page again
        // (after an event) does not change what lies beyond the oldest loaded run.
        if (olderPage || runs.length === page.length) more = page.length === HISTORY_PAGE;
        render();
      });
    }

    load(false);
    return {
      el: el,
      jobUpdated: function (job) {
        var next = {};
        (job.logs || []).forEach(function (log) { next[log.counter] = true; });
        logs = next;
        render();
      },
      onEvent: function (name, data) {
        var sameJob = data && data.job_id === id && data.kind === (kind === "job" ? "job" : "job_http");
        if ((name === "run_ended" && sameJob) || name === "resync" || name === "ready") load(false);
      },
    };
  }

  // ----- live updates ----------------------------------------------------------------

  // True while the event stream is open and has said `ready`.
  var live = false;
  var pollTimer = null;
  var refreshSoon = null;

  function refreshNote() {
    return live ? "live updates" : "refreshed every 10 seconds";
  }

  /** The next fetch of the Environment: soon without the event stream, rarely with it. */
  function schedulePoll() {
    if (pollTimer) clearTimeout(pollTimer);
    pollTimer = setTimeout(function () {
      refresh().then(schedulePoll, schedulePoll);
    }, live ? LIVE_REFRESH_MS : ENV_REFRESH_MS);
  }

  function setLive(on) {
    if (live === on) return;
    live = on;
    document.body.setAttribute("data-live", on ? "events" : "polling");
    schedulePoll();
  }

  /** One Environment fetch for a burst of events (a run's end and the next's begin), and
   * at most one a second: on a busy server every run sends two events, and each fetch
   * is the whole Environment. */
  var EVENT_REFRESH_GAP_MS = 1000;
  var lastEventRefresh = 0;
  function refreshOnEvent() {
    if (refreshSoon) return;
    var wait = Math.max(150, lastEventRefresh + EVENT_REFRESH_GAP_MS - Date.now());
    refreshSoon = setTimeout(function () {
      refreshSoon = null;
      lastEventRefresh = Date.now();
      refresh();
    }, wait);
  }

  /** Follows /svc/api/events; the polling of the spec stays the fallback. */
  function initLiveUpdates() {
    document.body.setAttribute("data-live", "polling");
    if (typeof EventSource === "undefined") return;
    var source = new EventSource("/svc/api/events");
    function on(name, fn) {
      source.addEventListener(name, function (ev) {
        var data = null;
        try { data = ev.data ? JSON.parse(ev.data) : null; } catch (e) { data = null; }
        fn(data);
        if (view && view.onEvent) view.onEvent(name, data);
      });
    }
    on("ready", function () { setLive(true); refreshOnEvent(); });
    ["run_started", "run_ended", "queued", "paused", "resumed", "reloaded", "resync"]
      .forEach(function (name) { on(name, refreshOnEvent); });
    // The stream ends; the browser reconnects by itself and `ready` comes again.
    on("shutdown", function () { setLive(false); });
    on("timeout", function () {});
    source.onerror = function () {
      setLive(false);
      if (source.readyState === EventSource.CLOSED) {
        // Refused (an error status, too many streams): poll, and try again later.
        source.close();
        setTimeout(initLiveUpdates, 60000);
      }
    };
  }

  /** Disables the action buttons, with the reason as their tooltip, when the session may
   * not act; says how actions are authorised when it may. */
  function applyRights(buttons, hint) {
    var blocker = actionBlocker();
    Object.keys(buttons).forEach(function (name) {
      if (blocker) {
        buttons[name].disabled = true;
        buttons[name].title = blocker;
      } else {
        buttons[name].removeAttribute("title");
      }
    });
    if (blocker) hint.textContent = blocker;
    else if (sessionActs() && /main secret/.test(hint.textContent)) {
      hint.textContent = "Actions are done as " + session.name + " (" + session.role + ").";
    }
  }

  // ----- audit -----------------------------------------------------------------------

  var AUDIT_PAGE = 50;

  function actorText(actor) {
    if (!actor) return "";
    switch (actor.kind) {
      case "account": return actor.name;
      case "signed": return "signed request";
      case "webhook": return "webhook" + (actor.delivery ? " " + actor.delivery : "");
      case "signal": return "SIGHUP";
      default: return "anonymous";
    }
  }

  function auditRow(entry) {
    var job = entry.job
      ? h("a", { href: (entry.job.kind === "job_http" ? "#/http/" : "#/job/") + encodeURIComponent(entry.job.id) },
        entry.job.id)
      : h("span", { class: "muted" }, "—");
    var result = entry.result === "ok" ? "ok"
      : entry.result + (entry.status ? " " + entry.status : "") + (entry.reason ? ": " + entry.reason : "");
    return h("tr", { "data-seq": String(entry.seq) },
      cell("Time", h("time", { datetime: entry.time }, absTime(entry.time))),
      cell("Who", actorText(entry.actor)),
      cell("Action", entry.action.replace("_", " ")),
      cell("Job", job),
      // Cluster mode: the node that recorded it, under the address.
      cell("Address", [entry.address || h("span", { class: "muted" }, "—"),
        entry.node ? h("span", { class: "sub", title: "node that recorded it" }, entry.node) : null]),
      cell("Result", h("span", { class: "audit-" + entry.result }, result)));
  }

  /** POST /svc/api/reload: with an admin's session, else signed with the secret (the
   * service has no users). */
  function reloadRequest() {
    if (sessionActs()) return sessionPost("/svc/api/reload", "");
    if (!getSecret()) {
      return Promise.resolve({ ok: false, status: -1,
        message: "Type the secret in the top bar first: a reload is signed with it." });
    }
    var body = "_svc_epoch=" + nowSecs() + "&_svc_nonce=" + nonce();
    return api("POST", "/svc/api/reload", body, {
      "Content-Type": "application/x-www-form-urlencoded",
      "X-Svc-Sign": SvcHmac.hmacSha256Hex(getSecret(), body),
    });
  }

  /** #/audit (admins): the audit log, newest first, a page at a time, and Reload. */
  function auditView() {
    document.title = "Audit · " + (env && env.name ? env.name : "svc");
    var message = messageArea("audit-message");
    var body = h("tbody");
    var more = h("button", { type: "button", id: "audit-more", hidden: true }, "Older entries");
    var reload = h("button", { type: "button", id: "reload", class: "primary" }, "Reload configuration");
    var next = null;
    var loading = false;

    function load(reset) {
      if (loading) return;
      loading = true;
      var url = "/svc/api/audit?limit=" + AUDIT_PAGE + (!reset && next ? "&before=" + next : "");
      api("GET", url).then(function (result) {
        loading = false;
        if (!result.ok) { message.set("error", explain(result)); return; }
        if (reset) body.replaceChildren();
        (result.data.entries || []).forEach(function (entry) { body.appendChild(auditRow(entry)); });
        if (!body.firstChild) {
          body.appendChild(h("tr", null, h("td", { colspan: 6, class: "empty" }, "Nothing recorded yet.")));
        }
        next = result.data.next_before;
        more.hidden = !next;
      });
    }

    more.addEventListener("click", function () { load(false); });
    reload.addEventListener("click", function () {
      reload.disabled = true;
      message.set("", "Reloading…");
      reloadRequest().then(function (result) {
        reload.disabled = false;
        if (result.ok) message.set("ok", "Configuration reloaded.");
        else message.set("error", explain(result));
        load(true);
        refresh();
      });
    });

    main.replaceChildren(
      h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Dashboard"), " › Audit"),
      h("div", { class: "detail-head" }, h("h1", null, "Audit log"), reload),
      h("p", { class: "hint" }, "Every action, refused ones included, newest first. " +
        "Reload takes the configuration files again, as SIGHUP does."),
      message.el,
      h("div", { class: "card table-wrap" },
        h("table", { class: "responsive", id: "audit-table" },
          h("caption", { class: "visually-hidden" }, "Audit log"),
          h("thead", null, h("tr", null, ["Time", "Who", "Action", "Job", "Address", "Result"].map(function (t) {
            return h("th", { scope: "col" }, t);
          }))),
          body)),
      more);
    load(true);
    return { key: "audit", update: function () {}, route: function () {}, destroy: function () {} };
  }

  // ----- routing ---------------------------------------------------------------------

  function parseRoute() {
    var parts = (location.hash || "#/").replace(/^#\/?/, "").split("/").map(function (p) {
      try { return decodeURIComponent(p); } catch (e) { return p; }
    });
    if (parts[0] === "audit") return { key: "audit" };
    if ((parts[0] === "job" || parts[0] === "http") && parts[1]) {
      var counter = parts[2] === "log" ? parseInt(parts[3], 10) || 0 : 0;
      return { key: parts[0] + ":" + parts[1], kind: parts[0], id: parts[1], counter: counter };
    }
    return { key: "dashboard" };
  }

  function onRoute() {
    var r = parseRoute();
    document.getElementById("nav-dashboard").setAttribute("aria-current", r.key === "dashboard" ? "page" : "false");
    document.getElementById("nav-audit").setAttribute("aria-current", r.key === "audit" ? "page" : "false");
    if (view && view.key === r.key) {
      r.scroll = true;
      view.route(r);
      return;
    }
    if (view) view.destroy();
    view = r.key === "dashboard" ? dashboardView()
      : r.key === "audit" ? auditView() : detailView(r.kind, r.id);
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
})();
