// @ts-check
/**
 * svc API calls from the browser, shared by the dashboard and the login page: one fetch
 * turned into the service's wrapper, {ok, status, message, data}, whatever happens (an
 * answer that is not JSON, or no answer at all). Never throws.
 */

/**
 * The service's answer wrapper. `status` 0: no answer; -1: refused by the page itself,
 * before any request (`message` says why).
 * @typedef {object} ApiResult
 * @property {boolean} ok
 * @property {number} status
 * @property {string} message
 * @property {any} data the answer's `data`, as the endpoint documents it
 */

/**
 * fetch(method, url) with `body` and `headers`; resolves to {ok, status, message, data}.
 * @param {string} method
 * @param {string} url
 * @param {string | null} [body]
 * @param {Record<string, string>} [headers]
 * @returns {Promise<ApiResult>}
 */
export async function call(method, url, body, headers) {
  /** @type {Response} */
  let res;
  try {
    res = await fetch(url, {
      method,
      body,
      headers: headers || {},
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, status: 0, message: "cannot reach the service (" + message + ")", data: null };
  }
  try {
    const json = await res.json();
    return { ok: res.ok, status: res.status, message: json.message || "", data: json.data };
  } catch (err) {
    return { ok: res.ok, status: res.status, message: res.statusText, data: null };
  }
}
