// @ts-check
/**
 * Who acts: the secret typed in the top bar, or the session when the service has users
 * (login enabled), and the rights of its role.
 *
 * The secret lives in this page's memory only (its input field): never in any storage
 * that a script of the same origin could read later, and never sent: requests carry
 * HMAC-SHA-256 signatures (actions.js). When the service has users, the top bar shows
 * who is logged in and a Log out button, and any answer 401 "login required" sends the
 * browser to the login page, which comes back here afterwards. An operator's or
 * admin's actions then use the session and its CSRF token instead of the secret, which
 * is not asked for; a viewer sees the actions disabled with the reason.
 */

import { call } from "./api.js";
import { buttonById, byId, inputById, linkById } from "./dom.js";
import { state } from "./state.js";

/** @typedef {import("./api.js").ApiResult} ApiResult */

/** Where earlier versions kept the secret (see initSecret). */
const SECRET_KEY = "svc.secret";
export const LOGIN_REQUIRED = "login required";
const ROLE_RANK = /** @type {Record<string, number>} */ ({ viewer: 0, operator: 1, admin: 2 });

/** The secret typed in the top bar, "" for none. */
export function getSecret() {
  return inputById("secret").value;
}

/** Moves the focus to the secret's field. */
export function focusSecret() {
  inputById("secret").focus();
}

/** The top bar's secret field: Forget empties it; Enter sends nothing. */
export function initSecret() {
  // Earlier versions kept the secret in sessionStorage: remove what they left.
  try { sessionStorage.removeItem(SECRET_KEY); } catch (e) { /* storage disabled */ }
  buttonById("secret-clear").addEventListener("click", () => {
    const input = inputById("secret");
    input.value = "";
    input.focus();
  });
  byId("secret-form").addEventListener("submit", (ev) => ev.preventDefault());
}

/**
 * fetch returning {ok, status, message, data}; never throws. A 401 "login required"
 * (the session ended) also sends the browser to the login page.
 * @param {string} method
 * @param {string} url
 * @param {string | null} [body]
 * @param {Record<string, string>} [headers]
 * @returns {Promise<ApiResult>}
 */
export async function api(method, url, body, headers) {
  const result = await call(method, url, body, headers);
  if (result.status === 401 && result.message === LOGIN_REQUIRED) goToLogin();
  return result;
}

function goToLogin() {
  if (state.leaving) return;
  state.leaving = true;
  location.assign("/svc/login?next=" +
    encodeURIComponent(location.pathname + location.search + location.hash));
}

/** Shows the logged-in user and the Log out button when login is enabled. */
export async function initSession() {
  const logout = buttonById("logout");
  logout.addEventListener("click", async () => {
    logout.disabled = true;
    await api("POST", "/svc/api/logout");
    state.leaving = true;
    location.assign("/svc/login");
  });
  const result = await api("GET", "/svc/api/session");
  if (!result.ok || !result.data) return;
  const session = /** @type {import("./state.js").Session} */ (result.data);
  state.session = session;
  applySession();
  if (!session.login) return;
  if (!session.name) {
    // public_read: reading without a session; acting needs a login. The link gets
    // its target only here: without accounts the login page does not exist.
    const login = linkById("session-login");
    login.href = "/svc/login?next=" + encodeURIComponent(location.pathname + location.hash);
    login.hidden = false;
    return;
  }
  byId("session-user").textContent = session.name;
  byId("session-role").textContent = session.role || "";
  byId("session").hidden = false;
}

/** The top bar and the current view once the session is known: no secret field when
 * the session acts, the Audit link for an admin. */
function applySession() {
  byId("secret-form").hidden = !!(state.session && state.session.login);
  byId("nav-audit").hidden = !roleAtLeast("admin");
  if (state.view) state.view.update();
}

/** @param {string} role */
export function roleAtLeast(role) {
  const session = state.session;
  return !!(session && session.role && ROLE_RANK[session.role] >= ROLE_RANK[role]);
}

/** True when actions go with the session (login on, and a role that may act). */
export function sessionActs() {
  const session = state.session;
  return !!(session && session.login && session.csrf && roleAtLeast("operator"));
}

/** Why this page may not act, or "" when it may (with the session or the secret). */
export function actionBlocker() {
  const session = state.session;
  if (!session || !session.login) return "";
  if (!session.name) return "Log in as an operator or admin to run, pause, resume or cancel jobs.";
  if (roleAtLeast("operator")) return "";
  return "Your role (" + session.role + ") may not run, pause, resume or cancel jobs: " +
    "that needs the operator or admin role.";
}

/**
 * Disables the action buttons, with the reason as their tooltip, when the session may
 * not act; says how actions are authorised when it may.
 * @param {Record<string, HTMLButtonElement>} buttons
 * @param {HTMLElement} hint
 */
export function applyRights(buttons, hint) {
  const blocker = actionBlocker();
  for (const button of Object.values(buttons)) {
    if (blocker) {
      button.disabled = true;
      button.title = blocker;
    } else {
      button.removeAttribute("title");
    }
  }
  const session = state.session;
  if (blocker) hint.textContent = blocker;
  else if (session && sessionActs() && /main secret/.test(hint.textContent || "")) {
    hint.textContent = "Actions are done as " + session.name + " (" + session.role + ").";
  }
}
