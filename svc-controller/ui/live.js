// @ts-check
/**
 * Keeping the Environment current: fetched again on each event of /svc/api/events
 * (server-sent events), and every 10 seconds when that stream is missing (every 5
 * minutes while it is there, as a safety net).
 */

import { explain } from "./actions.js";
import { byId } from "./dom.js";
import { absTime } from "./format.js";
import { api } from "./session.js";
import { state } from "./state.js";

const ENV_REFRESH_MS = 10000;
// While the event stream is healthy, a poll is only a safety net.
const LIVE_REFRESH_MS = 300000;
// One Environment fetch for a burst of events (a run's end and the next's begin), and
// at most one a second: on a busy server every run sends two events, and each fetch is
// the whole Environment.
const EVENT_REFRESH_GAP_MS = 1000;
const EVENTS = ["run_started", "run_ended", "queued", "paused", "resumed", "reloaded", "resync"];

/** Fetches the Environment, then renders the view; a failure shows in the banner. */
export async function refresh() {
  const result = await api("GET", "/svc/api/environment");
  const banner = byId("connection");
  if (!result.ok) {
    banner.hidden = false;
    banner.textContent = "Cannot load the Environment: " + explain(result);
    return;
  }
  banner.hidden = true;
  const env = /** @type {import("./state.js").Env} */ (result.data);
  state.env = env;
  byId("server-name").textContent = env.name || "svc";
  byId("server-version").textContent = env.version ? "v" + env.version : "";
  byId("footer-status").textContent =
    "Updated " + absTime(new Date().toISOString()) + " · " + refreshNote() +
    (env.is_development ? " · development server" : "");
  if (state.view) state.view.update();
}

function refreshNote() {
  return state.live ? "live updates" : "refreshed every 10 seconds";
}

/** The next fetch of the Environment: soon without the event stream, rarely with it. */
export function schedulePoll() {
  clearTimeout(state.pollTimer);
  state.pollTimer = setTimeout(() => {
    refresh().then(schedulePoll, schedulePoll);
  }, state.live ? LIVE_REFRESH_MS : ENV_REFRESH_MS);
}

/** @param {boolean} on */
function setLive(on) {
  if (state.live === on) return;
  state.live = on;
  document.body.setAttribute("data-live", on ? "events" : "polling");
  schedulePoll();
}

function refreshOnEvent() {
  if (state.refreshSoon !== undefined) return;
  const wait = Math.max(150, state.lastEventRefresh + EVENT_REFRESH_GAP_MS - Date.now());
  state.refreshSoon = setTimeout(() => {
    state.refreshSoon = undefined;
    state.lastEventRefresh = Date.now();
    refresh();
  }, wait);
}

/** Follows /svc/api/events; the polling stays the fallback. */
export function initLiveUpdates() {
  document.body.setAttribute("data-live", "polling");
  if (typeof EventSource === "undefined") return;
  const source = new EventSource("/svc/api/events");
  /**
   * @param {string} name
   * @param {(data: any) => void} fn
   */
  const on = (name, fn) => {
    source.addEventListener(name, (ev) => {
      let data = null;
      try { data = ev instanceof MessageEvent && ev.data ? JSON.parse(ev.data) : null; } catch (e) { data = null; }
      fn(data);
      if (state.view && state.view.onEvent) state.view.onEvent(name, data);
    });
  };
  on("ready", () => { setLive(true); refreshOnEvent(); });
  EVENTS.forEach((name) => on(name, refreshOnEvent));
  // The stream ends; the browser reconnects by itself and `ready` comes again.
  on("shutdown", () => setLive(false));
  on("timeout", () => {});
  source.onerror = () => {
    setLive(false);
    if (source.readyState === EventSource.CLOSED) {
      // Refused (an error status, too many streams): poll, and try again later.
      source.close();
      setTimeout(initLiveUpdates, 60000);
    }
  };
}
