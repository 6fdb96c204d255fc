// @ts-check
/**
 * svc login page: posts the name and password to /svc/api/login and, on success, goes
 * to the page asked for (the `next` query parameter, kept below /svc by the server).
 * No inline script: the page's Content-Security-Policy forbids it.
 */

import { call } from "./api.js";

/**
 * The element with this id, of this type; throws when the page lacks it.
 * @template {HTMLElement} T
 * @param {string} id
 * @param {new () => T} type
 * @returns {T}
 */
function byId(id, type) {
  const el = document.getElementById(id);
  if (!(el instanceof type)) throw new Error("the login page lacks #" + id);
  return el;
}

const form = byId("login-form", HTMLFormElement);
const nameInput = byId("login-name", HTMLInputElement);
const passwordInput = byId("login-password", HTMLInputElement);
const submit = byId("login-submit", HTMLButtonElement);
const errorLine = byId("login-error", HTMLElement);

/** The page to go to afterwards; a fragment the browser kept across the redirect
 * (#/job/x) is added back. */
function nextPage() {
  let next = new URLSearchParams(location.search).get("next") || "/svc/";
  if (location.hash && !next.includes("#")) next += location.hash;
  return next;
}

/** @param {string} text */
function showError(text) {
  errorLine.className = "message error";
  errorLine.textContent = text;
}

/** @param {SubmitEvent} ev */
async function logIn(ev) {
  ev.preventDefault();
  if (!nameInput.value || !passwordInput.value) {
    showError("Type your name and your password.");
    (nameInput.value ? passwordInput : nameInput).focus();
    return;
  }
  const body = new URLSearchParams();
  body.set("name", nameInput.value);
  body.set("password", passwordInput.value);
  body.set("next", nextPage());
  submit.disabled = true;
  errorLine.className = "message";
  errorLine.textContent = "";
  const result = await call("POST", "/svc/api/login", body.toString(), {
    "Content-Type": "application/x-www-form-urlencoded",
  });
  submit.disabled = false;
  if (result.ok) {
    location.replace((result.data && result.data.next) || "/svc/");
  } else if (result.status === 401) {
    showError("Invalid name or password.");
    passwordInput.value = "";
    passwordInput.focus();
  } else if (result.status === 404) {
    location.replace(nextPage());
  } else {
    showError("Cannot log in: " + (result.message || "error " + result.status) + ".");
  }
}

form.addEventListener("submit", logIn);
