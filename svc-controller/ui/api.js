/*
 * svc API calls from the browser, shared by the dashboard and the login page: one fetch
 * turned into the service's wrapper, {ok, status, message, data}, whatever happens (an
 * answer that is not JSON, or no answer at all). Never throws.
 *
 * Exposes SvcApi = { call } as a global.
 */
(function (root) {
  "use strict";

  /** fetch(method, url) with `body` and `headers`; resolves to {ok, status, message, data}. */
  function call(method, url, body, headers) {
    return fetch(url, {
      method: method,
      body: body,
      headers: headers || {},
      credentials: "same-origin",
      cache: "no-store",
    }).then(function (res) {
      return res.json().then(function (json) {
        return { ok: res.ok, status: res.status, message: json.message || "", data: json.data };
      }, function () {
        return { ok: res.ok, status: res.status, message: res.statusText, data: null };
      });
    }, function (err) {
      return { ok: false, status: 0, message: "cannot reach the service (" + err.message + ")", data: null };
    });
  }

  root.SvcApi = { call: call };
})(this);
