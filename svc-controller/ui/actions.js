// @ts-check
/**
 * The requests that change something (run now, pause, resume, cancel, reload), with
 * the session's CSRF token or signed with the secret, and what their answers mean.
 */

import { hmacSha256Hex } from "./hmac.js";
import { nowSecs } from "./format.js";
import { LOGIN_REQUIRED, api, focusSecret, getSecret, sessionActs } from "./session.js";
import { state } from "./state.js";

/** @typedef {import("./api.js").ApiResult} ApiResult */
/** @typedef {import("./dom.js").MessageArea} MessageArea */
/** @typedef {import("./state.js").Job} Job */
/** @typedef {import("./state.js").Kind} Kind */

/**
 * A sentence for an answer that is not a success.
 * @param {ApiResult} result
 * @returns {string}
 */
export function explain(result) {
  const msg = result.message ? ": " + result.message : "";
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

/**
 * True (and says so in `message`) when an action needs the secret and none is typed.
 * @param {MessageArea} message
 */
export function needSecret(message) {
  if (sessionActs() || getSecret()) return false;
  message.set("error", "Type the secret in the top bar first: actions are signed with it.");
  focusSecret();
  return true;
}

/**
 * A refusal by the page itself, before any request.
 * @param {string} message
 * @returns {Promise<ApiResult>}
 */
export function refused(message) {
  return Promise.resolve({ ok: false, status: -1, message, data: null });
}

// Signed control requests are one-time, and two with the same body in the same second
// are one request: a field of the UI's own, random, makes each click its own request
// (the signature covers it; the service ignores it).
function nonce() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => (b + 256).toString(16).slice(1)).join("");
}

/**
 * A POST done with the session: its CSRF token in X-Svc-Csrf.
 * @param {string} url
 * @param {string | null} body
 */
function sessionPost(url, body) {
  /** @type {Record<string, string>} */
  const headers = { "X-Svc-Csrf": (state.session && state.session.csrf) || "" };
  if (body !== null) headers["Content-Type"] = "application/x-www-form-urlencoded";
  return api("POST", url, body, headers);
}

/**
 * A form POST of `id` (the Job endpoints), with the session or signed.
 * @param {string} path
 * @param {string} id
 */
export function signedForm(path, id) {
  if (sessionActs()) return sessionPost(path, "id=" + encodeURIComponent(id));
  const body = "_svc_epoch=" + nowSecs() + "&id=" + encodeURIComponent(id) + "&_svc_nonce=" + nonce();
  return api("POST", path, body, {
    "Content-Type": "application/x-www-form-urlencoded",
    "X-Svc-Sign": hmacSha256Hex(getSecret(), body),
  });
}

/**
 * A POST with `id` in the query (the JobHttp endpoints), with the session or signed.
 * @param {string} path
 * @param {string} id
 */
export function signedQuery(path, id) {
  if (sessionActs()) return sessionPost(path + "?id=" + encodeURIComponent(id), null);
  // With an epoch: the request is one-time and bounded in time (require_epoch).
  const query = "id=" + encodeURIComponent(id) + "&_svc_epoch=" + nowSecs() + "&_svc_nonce=" + nonce();
  return api("POST", path + "?" + query, null, {
    "X-Svc-Sign": hmacSha256Hex(getSecret(), query),
  });
}

/**
 * Why Run now cannot start the job, or "".
 * @param {Job} job
 */
export function runNowBlocker(job) {
  if (job.status === "paused") return "The job is paused: resume it to run it.";
  return "";
}

/**
 * Run now: a request signed with the main secret, for every Job and JobHttp (the run's
 * log says it was started by hand).
 * @param {Job} job
 * @param {Kind} kind
 */
export function runNow(job, kind) {
  const blocker = runNowBlocker(job);
  if (blocker) return refused(blocker);
  if (kind === "job") return signedForm("/svc/api/job_exec/trigger", job.id);
  return signedQuery("/svc/api/job_http/trigger", job.id);
}

/** POST /svc/api/reload: with an admin's session, else signed with the secret (the
 * service has no users). */
export function reloadRequest() {
  if (sessionActs()) return sessionPost("/svc/api/reload", "");
  if (!getSecret()) return refused("Type the secret in the top bar first: a reload is signed with it.");
  const body = "_svc_epoch=" + nowSecs() + "&_svc_nonce=" + nonce();
  return api("POST", "/svc/api/reload", body, {
    "Content-Type": "application/x-www-form-urlencoded",
    "X-Svc-Sign": hmacSha256Hex(getSecret(), body),
  });
}
