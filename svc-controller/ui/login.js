/*
 * svc login page: posts the name and password to /svc/api/login and, on success, goes
 * to the page asked for (the `next` query parameter, kept below /svc by the server).
 * No inline script: the page's Content-Security-Policy forbids it.
 */
(function () {
  "use strict";

  var form = document.getElementById("login-form");
  var nameInput = document.getElementById("login-name");
  var passwordInput = document.getElementById("login-password");
  var submit = document.getElementById("login-submit");
  var errorLine = document.getElementById("login-error");

  /** The page to go to afterwards; a fragment the browser kept across the redirect
   * (#/job/x) is added back. */
  function nextPage() {
    var next = new URLSearchParams(location.search).get("next") || "/svc/";
    if (location.hash && next.indexOf("#") < 0) next += location.hash;
    return next;
  }

  function showError(text) {
    errorLine.className = "message error";
    errorLine.textContent = text;
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (!nameInput.value || !passwordInput.value) {
      showError("Type your name and your password.");
      (nameInput.value ? passwordInput : nameInput).focus();
      return;
    }
    var body = new URLSearchParams();
    body.set("name", nameInput.value);
    body.set("password", passwordInput.value);
    body.set("next", nextPage());
    submit.disabled = true;
    errorLine.className = "message";
    errorLine.textContent = "";
    SvcApi.call("POST", "/svc/api/login", body.toString(), {
      "Content-Type": "application/x-www-form-urlencoded",
    }).then(function (result) {
      submit.disabled = false;
      if (result.ok) {
        location.replace((result.data && result.data.next) || "/svc/");
        return;
      }
      if (result.status === 401) {
        showError("Invalid name or password.");
        passwordInput.value = "";
        passwordInput.focus();
      } else if (result.status === 404) {
        location.replace(nextPage());
      } else {
        showError("Cannot log in: " + (result.message || "error " + result.status) + ".");
      }
    });
  });
})();
