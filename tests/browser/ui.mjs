// End-to-end scenarios of the svc web UI in headless Chromium, driven by playwright-core.
//
// Usage: node ui.mjs <scenario>...   (tests/tests/browser.rs runs it against a real
// svc-controller started by the test harness; see that file for the configuration).
//
// Environment:
//   SVC_BASE_URL     http://127.0.0.1:<port> of the service (required)
//   SVC_SECRET       the main secret (required)
//   SVC_NAME         the configured server name (required)
//   SVC_SCREENSHOTS  directory for the screenshots (optional)
//   SVC_CHROMIUM     browser binary (default /usr/bin/chromium)
//   SVC_USER, SVC_PASSWORD  a user of user.conf and its password (the login scenario)
//
// One Chromium serves every scenario; each scenario gets a context of its own (its own
// cookies, storage and cache, as a fresh profile would) and at most 90 seconds: a bound
// against a hang, far above the 1 to 5 seconds a scenario takes, because the tests run
// beside others on a loaded machine. Any console error
// on the page (a Content-Security-Policy violation included) fails the scenario, but
// for the failed loads of the statuses a scenario expects (see expectStatus). The
// process exits 1 when a scenario failed.

import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";

const BASE = required("SVC_BASE_URL");
const SECRET = required("SVC_SECRET");
const NAME = required("SVC_NAME");
const SCREENSHOTS = process.env.SVC_SCREENSHOTS || "";
const CHROMIUM = process.env.SVC_CHROMIUM || "/usr/bin/chromium";
const USER = process.env.SVC_USER || "";
const PASSWORD = process.env.SVC_PASSWORD || "";
// The accounts of the role scenarios (each with SVC_PASSWORD).
const VIEWER = process.env.SVC_VIEWER || "";
const OPERATOR = process.env.SVC_OPERATOR || "";
const ADMIN = process.env.SVC_ADMIN || "";
// Bounds against a hang, not expectations of speed: a step takes well under a second on
// an idle machine, and ten times more beside the heaviest tests on two cores.
const SCENARIO_TIMEOUT_MS = 90000;
const STEP = { timeout: 45000 };
// Statuses whose failed loads Chromium logs as console errors and the running scenario
// asks for (a 401 of a wrong secret, a 412 of a paused job...); reset per scenario.
const USUAL_STATUSES = ["401", "404", "409", "412"];
let expectedStatuses = new Set(USUAL_STATUSES);

// The running scenario asks for an answer with `status`: its failed load is no error.
function expectStatus(status) {
  expectedStatuses.add(String(status));
}

function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`environment variable ${name} is required`);
    process.exit(2);
  }
  return value;
}

async function typeSecret(page, secret) {
  await page.getByLabel("Secret").fill(secret);
}

// Waits until the UI follows a run's log (its URL matches `pattern`) after a Run now; when
// it never does, says what the action's message and the page's address were instead, so
// that a refusal or a request that got no answer is told apart from a slow page.
async function waitForRunLog(page, pattern) {
  try {
    await page.waitForURL(pattern, STEP);
  } catch (err) {
    const message = await page.evaluate(() =>
      document.querySelector("#action-message")?.textContent ?? "(absent)").catch(() => "(unreadable)");
    throw new Error(`the UI never followed a run log matching ${pattern}: it is at ` +
      `${page.url()}, the action's message reads ${JSON.stringify(message)} (${err.message})`);
  }
}

async function openJob(page, id) {
  await page.goto(`${BASE}/svc/#/job/${id}`);
  await page.locator("#job-name").waitFor(STEP);
}

async function logText(page) {
  return (await page.locator("#log").textContent()) || "";
}

async function statusText(page, selector) {
  return ((await page.locator(selector).textContent()) || "").trim();
}

async function waitForText(page, selector, pattern, what) {
  try {
    await page.waitForFunction(
      ([sel, source, flags]) => {
        const el = document.querySelector(sel);
        return !!el && new RegExp(source, flags).test(el.textContent || "");
      },
      [selector, pattern.source, pattern.flags],
      STEP,
    );
  } catch (err) {
    const now = await page.locator(selector).textContent().catch(() => "(absent)");
    const context = await page.evaluate(() => ["#viewer-mode", "#viewer-status", "#action-message"]
      .map((sel) => `${sel}: ${document.querySelector(sel)?.textContent ?? "(absent)"}`).join("; "));
    throw new Error(`${what}: ${selector} never matched ${pattern}; it reads ` +
      `${JSON.stringify(now)} (${context})`);
  }
}

// Logs in as `user` from the login page the dashboard sends to, back on `hash`.
async function loginAs(page, user, hash) {
  assert.ok(user && PASSWORD, "the account and SVC_PASSWORD are required");
  await page.goto(`${BASE}/svc/${hash}`);
  await page.waitForURL(/\/svc\/login\?next=/, STEP);
  await page.getByLabel("Name").fill(user);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL(/\/svc\/#/, STEP);
  await waitForText(page, "#session-user", new RegExp(`^${user}$`), "the user is shown");
}

async function shoot(page, name, fullPage = false) {
  if (!SCREENSHOTS) return;
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, name), fullPage });
}

// Checks that the page fits a 390 px phone and a 1280 px screen, with a screenshot of
// each as <name>-<width>.png; the window is left at 1280 px.
async function shootAtWidths(page, name) {
  for (const width of [390, 1280]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
    await assertFits(page, `${name} at ${width} px`);
    await shoot(page, `${name}-${width}.png`, true);
  }
}

// Run now for job `id`, signed with the main secret as the UI signs it (not through the
// page: the page must learn of the run by itself).
async function runNowSigned(id) {
  const body = `_svc_epoch=${Math.floor(Date.now() / 1000)}&id=${encodeURIComponent(id)}` +
    `&_svc_nonce=${crypto.randomBytes(8).toString("hex")}`;
  const signature = crypto.createHmac("sha256", SECRET).update(body).digest("hex");
  const res = await fetch(`${BASE}/svc/api/job_exec/trigger`, {
    method: "POST",
    body,
    headers: { "Content-Type": "application/x-www-form-urlencoded", "X-Svc-Sign": signature },
  });
  assert.equal(res.status, 200, `run now of ${id}: ${await res.text()}`);
}

// Fails unless the page is at most as wide as its window; names what sticks out.
async function assertFits(page, what) {
  const found = await page.evaluate(() => {
    const width = window.innerWidth;
    const wide = [];
    for (const el of document.querySelectorAll("body *")) {
      const box = el.getBoundingClientRect();
      if (box.right > width + 0.5 && box.width > 0) {
        wide.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}` +
          `${el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : ""}` +
          ` (${Math.round(box.right)} px)`);
      }
    }
    return { scroll: document.documentElement.scrollWidth, width, wide: wide.slice(0, 8) };
  });
  assert.ok(found.scroll <= found.width,
    `${what}: the page is ${found.scroll} px wide in a ${found.width} px window; ` +
    `sticking out: ${found.wide.join(", ")}`);
}

// The documentation pages, as the index lists them.
async function docPages(page) {
  await page.goto(`${BASE}/svc/doc/`);
  await page.locator(".doc-nav a").first().waitFor(STEP);
  const links = await page.locator(".doc-nav a").evaluateAll((as) =>
    as.map((a) => new URL(a.href).pathname));
  assert.ok(links.length >= 5, `documentation pages listed: ${links}`);
  return [...new Set(links)];
}

const scenarios = {
  // Cluster mode (tests/tests/browser.rs starts two nodes on one PostgreSQL whose
  // definitions of `shared` differ, and `only-b` on the other node alone): the dashboard's
  // Cluster panel lists both nodes and the drift, `shared` carries a warning in the list
  // and on its page, `mine` none; it all fits 390 and 1280 px.
  async cluster(page) {
    await page.goto(`${BASE}/svc`);
    await page.locator("#cluster-panel:not([hidden])").waitFor(STEP);
    await waitForText(page, '#cluster-panel tr[data-node="drift-b"]', /live/, "the other node is live");
    assert.equal(await page.locator("#cluster-panel tr[data-node]").count(), 2, "both nodes listed");
    assert.match(await statusText(page, '#cluster-panel tr[data-node="drift-a"]'), /this node/);
    await waitForText(page, '#cluster-differ li[data-differ="job/shared"]', /on drift-b/,
      "the differing job names the other node");
    await waitForText(page, '#cluster-missing li[data-missing="job/only-b"]', /drift-b/,
      "the job only the other node defines");
    await page.locator('tr[data-job="shared"] [data-drift]').waitFor(STEP);
    assert.match(await statusText(page, 'tr[data-job="shared"] [data-drift]'), /differs on drift-b/);
    assert.equal(await page.locator('tr[data-job="mine"] [data-drift]').count(), 0, "mine agrees");
    await shootAtWidths(page, "cluster");
    await openJob(page, "shared");
    await waitForText(page, "#drift-note", /differs on drift-b/, "the job's page warns");
    await shootAtWidths(page, "cluster-job");
    await openJob(page, "mine");
    assert.equal(await page.locator("#drift-note").isHidden(), true, "no warning on mine");
  },

  // The dashboard lists every configured Job and JobHttp, with name, version, countdowns
  // and working filters; the page's own HMAC code gives the RFC 4231 answers.
  async dashboard(page) {
    await page.goto(`${BASE}/svc`);
    await page.locator('tr[data-job="tick"]').waitFor(STEP);
    for (const id of ["tick", "build", "long", "patch"]) {
      assert.equal(await page.locator(`tr[data-job="${id}"]`).count(), 1, `job ${id} listed`);
    }
    assert.equal(await page.locator('tr[data-http="ping"]').count(), 1, "JobHttp ping listed");
    assert.equal(await statusText(page, "#server-name"), NAME);
    assert.match(await statusText(page, "#server-version"), /^v\d+\.\d+\.\d+/);
    await waitForText(page, 'tr[data-job="tick"]', /success/, "the interval job ran at start");
    const countdown = await statusText(page, 'tr[data-job="tick"] .countdown');
    assert.match(countdown, /^in \d+m \d\ds$/, "next run as a countdown");
    assert.match(await statusText(page, 'tr[data-job="tick"]'), /every 1h/);
    assert.match(await statusText(page, 'tr[data-job="build"]'), /never/);
    assert.match(await statusText(page, 'tr[data-job="build"]'), /\/build/);

    await page.getByLabel("Filter by name").fill("lon");
    assert.equal(await page.locator("tr[data-job]").count(), 1, "name filter");
    assert.equal(await page.locator('tr[data-job="long"]').count(), 1);
    await page.getByLabel("Filter by name").fill("");
    await page.getByLabel("Status").selectOption("success");
    assert.equal(await page.locator('tr[data-job="tick"]').count(), 1, "status filter keeps tick");
    assert.equal(await page.locator('tr[data-job="build"]').count(), 0, "status filter hides build");
    await page.getByLabel("Status").selectOption("");

    // The module the page signs with, loaded as the page loads it (RFC 4231 case 2).
    const vector = await page.evaluate(async () =>
      (await import("/svc/assets/hmac.js")).hmacSha256Hex("Jefe", "what do ya want for nothing?"));
    assert.equal(vector, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    await page.locator("#filter-name").blur();
    await shoot(page, "dashboard.png");
  },

  // Run now on a webhook job: the new log is shown while the run goes on (line 1 before
  // line 5 exists), over server-sent events, and ends as success.
  async run(page) {
    await openJob(page, "build");
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Run now" }).click();
    await waitForRunLog(page, /#\/job\/build\/log\/\d+$/);
    await waitForText(page, "#log", /line 1/, "first output line");
    const early = await logText(page);
    assert.ok(!/line 5/.test(early), `line 5 must not exist yet when line 1 shows: ${early}`);
    // The first poll may find the log with line 1 in it already; the stream takes over
    // from there.
    await waitForText(page, "#viewer-mode", /^live$/, "followed with server-sent events");
    // The run writes line 5 once this file exists (see browser.rs, Gate): it ends while
    // the page follows it live.
    fs.writeFileSync(required("SVC_RUN_GATE"), "");
    await waitForText(page, "#viewer-status", /success/, "the run ends");
    const text = await logText(page);
    assert.match(text, /line 5/);
    assert.match(text, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d /m, "lines keep their timestamps");
    await waitForText(page, "#job-status", /success/, "the job's status follows");

    const [download] = await Promise.all([
      page.waitForEvent("download", STEP),
      page.locator("#log-download").click(),
    ]);
    const saved = fs.readFileSync(await download.path(), "utf8");
    assert.match(saved, /line 5/, "the download holds the raw log");
    await page.locator("#log").evaluate((el) => { el.scrollTop = el.scrollHeight; });
    await page.locator(".viewer").evaluate((el) => el.scrollIntoView({ block: "end" }));
    await page.mouse.move(0, 0);
    await shoot(page, "log-viewer.png");
  },

  // A wrong secret is refused with a clear message, and changes nothing.
  async "wrong-secret"(page) {
    await openJob(page, "build");
    await page.getByRole("button", { name: "Pause" }).click();
    await waitForText(page, "#action-message", /secret/i, "asks for the secret first");
    await typeSecret(page, "not-the-secret");
    await page.getByRole("button", { name: "Pause" }).click();
    await waitForText(page, "#action-message", /Wrong secret.*401/, "pause with a wrong secret");
    await page.getByRole("button", { name: "Run now" }).click();
    await waitForText(page, "#action-message", /Wrong secret.*401/, "run with a wrong secret");
    assert.doesNotMatch(await statusText(page, "#job-status"), /paused/);
  },

  // Pause: the job shows paused and Run now is disabled. (The test then sends a signed
  // trigger itself and expects 412.)
  async pause(page) {
    await openJob(page, "build");
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Pause" }).click();
    await waitForText(page, "#job-status", /paused/, "pause");
    await waitForText(page, "#action-message", /Paused/, "pause confirmed");
    // The secret is kept in the page's memory only, in no storage of the origin.
    const stored = await page.evaluate(() =>
      JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)]));
    assert.ok(!stored.includes(SECRET), "the secret is in no web storage: " + stored);
    assert.ok(await page.getByRole("button", { name: "Run now" }).isDisabled());
    assert.ok(await page.getByRole("button", { name: "Pause" }).isDisabled());
  },

  async resume(page) {
    await openJob(page, "build");
    await waitForText(page, "#job-status", /paused/, "still paused");
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Resume" }).click();
    await waitForText(page, "#job-status", /success/, "resume gives back the last status");
    assert.ok(await page.getByRole("button", { name: "Run now" }).isEnabled());
  },

  // Cancel ends a long run; its log ends as failed and says it was cancelled.
  async cancel(page) {
    await openJob(page, "long");
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Run now" }).click();
    await waitForText(page, "#log", /\$ sleep 30/, "the long run started");
    const cancel = page.getByRole("button", { name: "Cancel run" });
    await page.waitForFunction(() => !document.querySelector("#action-cancel").disabled, null, STEP);
    await cancel.click();
    await waitForText(page, "#viewer-status", /failed/, "the cancelled run ends as failed");
    assert.match(await logText(page), /cancel/i);
  },

  // Run now on a running job with on_busy = skip: the service answers 200 saying it
  // started nothing; the page says so and stays on the running log (no run to follow),
  // then cancels the run.
  async "busy-skip"(page) {
    await openJob(page, "solo");
    await typeSecret(page, SECRET);
    const run = page.getByRole("button", { name: "Run now" });
    await run.click();
    await waitForRunLog(page, /#\/job\/solo\/log\/1$/);
    await waitForText(page, "#log", /\$ sleep 30/, "the first run started");
    await waitForText(page, "#action-message", /Run accepted: following log #1/, "the first run");
    // At once, within the same second as likely as not: each click is a request of its
    // own (the UI adds a nonce), never refused as a repeat of the first.
    await run.click();
    await waitForText(page, "#action-message", /^Not run: .*on_busy = skip/, "the second is skipped");
    assert.doesNotMatch(await statusText(page, "#action-message"), /following/);
    assert.match(page.url(), /#\/job\/solo\/log\/1$/, "still on the running log");
    assert.equal(await page.locator('.logs a[data-counter="2"]').count(), 0, "no log #2 listed");
    await waitForText(page, "#viewer-status", /running|started/, "the first run goes on");
    await page.waitForFunction(() => !document.querySelector("#action-cancel").disabled, null, STEP);
    await page.getByRole("button", { name: "Cancel run" }).click();
    await waitForText(page, "#viewer-status", /failed/, "the run is cancelled");
  },

  // Run now works for every job: a patchhost job, a job without a path (its log says it
  // was started by hand), and a JobHttp.
  async "run-now-everywhere"(page) {
    // A job whose webhooks come from sourcehut (no shared secret to sign with) runs by
    // hand all the same.
    await openJob(page, "patch");
    assert.ok(await page.getByRole("button", { name: "Run now" }).isEnabled());
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Run now" }).click();
    await waitForRunLog(page, /#\/job\/patch\/log\/\d+$/);
    await waitForText(page, "#log", /started by hand/, "the patchhost job's log says who started it");
    await openJob(page, "tick");
    // The next run, also as a time in the viewer's zone.
    await waitForText(page, "#next-run-local", /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d your time/, "next run, local");
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Run now" }).click();
    await waitForRunLog(page, /#\/job\/tick\/log\/\d+$/);
    await waitForText(page, "#log", /started by hand/, "the log says who started the run");
    await page.goto(BASE + "/svc/#/http/ping");
    // `#job-name` is on the Job page this comes from too: wait for the JobHttp's own
    // headers, or the click may land on the page being left.
    await page.locator("#http-headers").waitFor(STEP);
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Run now" }).click();
    await waitForText(page, "#action-message", /Run accepted/, "the JobHttp call is accepted");
  },

  // Login (a service with user.conf): the dashboard sends to the login page, a wrong
  // password shows the error, the right one comes back to the page asked for, with the
  // user's name in the top bar; Log out ends the session.
  async login(page) {
    assert.ok(USER && PASSWORD, "SVC_USER and SVC_PASSWORD are required");
    await page.goto(`${BASE}/svc/#/job/tick`);
    await page.waitForURL(/\/svc\/login\?next=/, STEP);
    await page.locator("#login-form").waitFor(STEP);
    assert.equal(await page.locator("#main").count(), 1);
    assert.equal(await page.locator("#job-name").count(), 0, "no dashboard before login");

    await page.getByLabel("Name").fill(USER);
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Log in" }).click();
    await waitForText(page, "#login-error", /Invalid name or password/, "a wrong password");
    assert.match(page.url(), /\/svc\/login/, "still on the login page");
    assert.equal(await page.getByLabel("Password").inputValue(), "", "the password is cleared");

    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.waitForURL(/\/svc\/#\/job\/tick$/, STEP);
    await page.locator("#job-name").waitFor(STEP);
    assert.equal(await statusText(page, "#job-name"), "tick");
    await waitForText(page, "#session-user", new RegExp(`^${USER}$`), "the user is shown");
    assert.ok(await page.getByRole("button", { name: "Log out" }).isVisible());
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === "svc_session");
    assert.ok(session, "a session cookie");
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, "Strict");
    assert.equal(session.path, "/svc");

    await page.getByRole("button", { name: "Log out" }).click();
    await page.waitForURL(/\/svc\/login/, STEP);
    await page.goto(`${BASE}/svc/`);
    await page.waitForURL(/\/svc\/login\?next=/, STEP);
    await page.locator("#login-form").waitFor(STEP);
  },

  // A viewer reads, and sees every action disabled with the reason; no secret field
  // (there is nothing to sign), no Audit link.
  async viewer(page) {
    await loginAs(page, VIEWER, "#/job/tick");
    await page.locator("#job-name").waitFor(STEP);
    await waitForText(page, "#session-role", /^viewer$/, "the role is shown");
    assert.equal(await page.locator("#secret").isVisible(), false, "no secret field");
    assert.equal(await page.locator("#nav-audit").isVisible(), false, "no Audit link");
    for (const name of ["Run now", "Pause", "Cancel run"]) {
      const button = page.getByRole("button", { name });
      await page.waitForFunction((label) => {
        const el = [...document.querySelectorAll(".actions button")].find((b) => b.textContent === label);
        return !!el && el.disabled && /viewer/.test(el.title);
      }, name, STEP);
      assert.match(await button.getAttribute("title"), /needs the operator or admin role/);
    }
    await waitForText(page, "#action-hint", /may not run, pause, resume or cancel/, "the hint says why");
    // The service refuses it too, not only the page: the pause the UI would send, sent
    // from the page with the viewer's session cookie and CSRF token, gets 403. (The test
    // then finds the refusal in the audit log.)
    expectStatus(403);
    const refused = await page.evaluate(async () => {
      const session = await (await fetch("/svc/api/session", { credentials: "same-origin" })).json();
      const csrf = (session.data && session.data.csrf) || "";
      const res = await fetch("/svc/api/job_exec/pause", {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-Svc-Csrf": csrf, "Content-Type": "application/x-www-form-urlencoded" },
        body: "id=tick",
      });
      return { csrf, status: res.status, body: await res.text() };
    });
    assert.equal(refused.csrf.length, 64, "the session has a CSRF token");
    assert.equal(refused.status, 403, `a viewer's pause: ${refused.body}`);
    assert.match(refused.body, /the role viewer may not pause/, "refused for the role, not the token");
    await page.goto(`${BASE}/svc/#/http/ping`);
    await page.locator("#job-name").waitFor(STEP);
    assert.equal(await page.getByRole("button", { name: "Pause" }).isDisabled(), true);
    // What a viewer sees of a job, on a phone and on a screen.
    await page.goto(`${BASE}/svc/#/job/tick`);
    await page.locator("#job-name").waitFor(STEP);
    await shootAtWidths(page, "viewer-job");
  },

  // An operator pauses, resumes and runs a job with the session, never asked for the
  // secret; no Audit link.
  async operator(page) {
    await loginAs(page, OPERATOR, "#/job/tick");
    await page.locator("#job-name").waitFor(STEP);
    await waitForText(page, "#session-role", /^operator$/, "the role is shown");
    assert.equal(await page.locator("#secret").isVisible(), false, "no secret field");
    assert.equal(await page.locator("#nav-audit").isVisible(), false, "no Audit link");
    await waitForText(page, "#action-hint", /Actions are done as /, "the hint names the user");
    await page.getByRole("button", { name: "Pause" }).click();
    await waitForText(page, "#job-status", /paused/, "paused with the session");
    await page.getByRole("button", { name: "Resume" }).click();
    await waitForText(page, "#action-message", /Resumed/, "resumed with the session");
    await page.getByRole("button", { name: "Run now" }).click();
    await waitForRunLog(page, /#\/job\/tick\/log\/\d+$/);
    await waitForText(page, "#log", /started by hand/, "the run the operator started");
  },

  // An admin has the Audit view: the operator's actions with who, job and result, and
  // Reload.
  async admin(page) {
    await loginAs(page, ADMIN, "#/");
    await waitForText(page, "#session-role", /^admin$/, "the role is shown");
    await page.locator("#nav-audit").click();
    await page.waitForURL(/#\/audit$/, STEP);
    await page.locator("#audit-table tbody tr").first().waitFor(STEP);
    const table = await statusText(page, "#audit-table");
    assert.match(table, new RegExp(`${OPERATOR}\\s*pause\\s*tick`), "the operator's pause is listed");
    assert.match(table, /run now/);
    assert.match(table, /login/);
    await page.getByRole("button", { name: "Reload configuration" }).click();
    await waitForText(page, "#audit-message", /Configuration reloaded/, "the reload");
    await waitForText(page, "#audit-table tbody tr:first-child", new RegExp(`${ADMIN}\\s*reload`),
      "the reload is the newest entry");
    await shootAtWidths(page, "audit");
  },

  // JobHttp detail: request, redacted headers, logs, pause and resume.
  async jobhttp(page) {
    await page.goto(`${BASE}/svc/#/http/ping`);
    await page.locator("#http-headers").waitFor(STEP);
    const headers = await statusText(page, "#http-headers");
    assert.match(headers, /Authorization: \[redacted\]/);
    assert.match(headers, /X-Trace: visible-value/);
    const body = (await page.locator("body").textContent()) || "";
    assert.ok(!body.includes("very-secret-token"), "no secret header value on the page");
    assert.match(body, /POST/);
    assert.match(body, /json/);
    await page.locator(".logs a").first().waitFor(STEP);
    await page.locator(".logs a").first().click();
    await waitForText(page, "#log", /JobHttp ping/, "the JobHttp log");
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Pause" }).click();
    await waitForText(page, "#job-status", /paused/, "JobHttp pause");
    await page.getByRole("button", { name: "Resume" }).click();
    await waitForText(page, "#job-status", /running/, "JobHttp resume shows started");
  },

  // Cancel of a JobHttp call going on (the `stall` call hangs on a server that never
  // answers): the button is enabled while the call runs, and the call ends as canceled.
  async "jobhttp-cancel"(page) {
    await page.goto(`${BASE}/svc/#/http/stall`);
    await page.waitForFunction(() => (document.querySelector("#job-name")?.textContent || "").includes("stall"), null, STEP);
    await page.waitForFunction(() => !document.querySelector("#action-cancel").disabled, null, STEP);
    await typeSecret(page, SECRET);
    await page.getByRole("button", { name: "Cancel call" }).click();
    await waitForText(page, "#action-message", /Cancel sent/, "the cancel is accepted");
    await page.waitForFunction(() => document.querySelector("#action-cancel").disabled, null, STEP);
    await page.locator('tr[data-run][data-status="canceled"]').first().waitFor(STEP);
  },

  // The run history of a job: one row per run with a badge per status (a sign and a word,
  // not colour alone), its trigger, exit and log; the status filter keeps only the runs
  // asked for. (The test ran `flaky` to success, failure, timeout and cancel first.)
  async history(page) {
    await openJob(page, "flaky");
    await page.locator("#history-title").waitFor(STEP);
    await page.locator("tr[data-run]").nth(3).waitFor(STEP);
    const rows = await page.locator("tr[data-run]").evaluateAll((trs) => trs.map((tr) => ({
      counter: tr.getAttribute("data-run"),
      status: tr.getAttribute("data-status"),
      text: tr.textContent,
    })));
    assert.deepEqual(rows.map((r) => [r.counter, r.status]),
      [["4", "canceled"], ["3", "timeout"], ["2", "fail"], ["1", "success"]], JSON.stringify(rows));
    assert.match(rows[2].text, /✗\s*failed/, "a failure has its sign and word");
    assert.match(rows[2].text, /exit 3/, "the failure's exit code");
    assert.match(rows[3].text, /exit 0/);
    // What the run used: its CPU time and peak memory, from its usage.
    assert.match(rows[3].text, /\d+(\.\d)? (ms|s)\d+(\.\d)? (KiB|MiB)/, "CPU time and peak memory");
    assert.match(rows[0].text, /⊘\s*canceled/);
    assert.match(rows[1].text, /◔\s*timeout/);
    assert.match(rows[3].text, /webhook/, "the trigger");
    assert.match(rows[3].text, /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/, "the start in the viewer's zone");
    assert.equal(await page.locator('tr[data-run="1"] a[href$="/log/1"]').count(), 1, "a link to the log");

    await page.locator("#history-status").selectOption("fail");
    assert.deepEqual(await page.locator("tr[data-run]").evaluateAll((trs) =>
      trs.map((tr) => tr.getAttribute("data-run"))), ["2"], "the filter keeps the failure");
    await page.locator("#history-status").selectOption("timeout");
    assert.deepEqual(await page.locator("tr[data-run]").evaluateAll((trs) =>
      trs.map((tr) => tr.getAttribute("data-run"))), ["3"]);
    await page.locator("#history-status").selectOption("");
    assert.equal(await page.locator("tr[data-run]").count(), 4);
    assert.ok(await page.locator("#history-older").isHidden(), "no older page to load");
  },

  // Live: with the event stream open the page polls only every 5 minutes, so a run
  // started by the API (here, a signed run now sent by this script) can only show within
  // the step's 20 seconds through the stream; its row in the history shows up too.
  async live(page) {
    await page.goto(`${BASE}/svc/`);
    await page.locator('tr[data-job="tick"]').waitFor(STEP);
    await page.waitForFunction(() => document.body.getAttribute("data-live") === "events", null, STEP);
    await waitForText(page, "#footer-status", /live updates/, "the footer says the page is live");
    const before = await statusText(page, 'tr[data-job="quick"]');
    assert.match(before, /never/, before);
    await runNowSigned("quick");
    await waitForText(page, 'tr[data-job="quick"]', /success/, "the run shows without a reload");

    await openJob(page, "quick");
    await page.locator('tr[data-run="1"]').waitFor(STEP);
    await runNowSigned("quick");
    await page.locator('tr[data-run="2"]').waitFor(STEP);
    assert.equal(await page.locator("tr[data-run]").count(), 2, "the new run joins the history");
  },

  // The pictures of the runs (after `history`: flaky ran once each way, 1 to 4): on
  // the job page a mark per run, shaped by its status, with its tooltip and a link to
  // its log, the usage chart, and the sentence that says it all; on the dashboard a
  // sparkline per job and the timeline of the next 24 hours (tick every hour, nightly
  // on a schedule). Drawn for the window's width: each width is loaded afresh.
  async charts(page) {
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
      await openJob(page, "flaky");
      const marks = page.locator("#run-charts svg.runs-chart .mark");
      await marks.nth(3).waitFor({ ...STEP, state: "attached" });
      const found = await marks.evaluateAll((gs) => gs.map((g) => {
        const shape = g.querySelector(".shape");
        return {
          run: g.getAttribute("data-run"),
          status: g.getAttribute("data-status"),
          shape: `${shape?.tagName}:${shape?.getAttribute("data-shape")}`,
          title: g.querySelector("title")?.textContent || "",
          href: g.closest("a")?.getAttribute("href") || "",
        };
      }));
      assert.deepEqual(found.map((m) => [m.run, m.status]),
        [["1", "success"], ["2", "fail"], ["3", "timeout"], ["4", "canceled"]], JSON.stringify(found));
      assert.equal(new Set(found.map((m) => m.shape)).size, 4, `a shape per status: ${JSON.stringify(found)}`);
      assert.match(found[0].title, /^#1 ✓ success · \d+ ms · CPU \d/, found[0].title);
      assert.match(found[2].title, /^#3 ◔ timeout · [23]\.\d s/, found[2].title);
      assert.equal(found[1].href, "#/job/flaky/log/2", "a mark leads to its run's log");
      const chart = page.locator("#run-charts svg.runs-chart");
      assert.equal(await chart.getAttribute("role"), "img");
      assert.match(await chart.getAttribute("aria-label") || "", /last 4 runs/);
      const summary = await statusText(page, "#runs-chart-summary");
      assert.match(summary, /^Last 4 runs: 1 succeeded, 1 failed, 1 timed out, 1 canceled; median .+, slowest #3 [23]\.\d s\.$/,
        summary);
      assert.equal(await page.locator("#runs-chart-summary").getAttribute("data-runs"), "4");
      assert.equal(await page.locator("#run-charts .chart-legend li").count(), 4, "the key names each status");
      assert.ok(await page.locator("#run-charts svg.usage-chart .usage-mark").count() >= 2, "CPU and memory");
      await assertFits(page, `job charts at ${width} px`);
      if (SCREENSHOTS) await page.locator("#run-charts").screenshot({ path: path.join(SCREENSHOTS, `job-chart-${width}.png`) });

      await page.goto(`${BASE}/svc/`);
      // Rows are drawn again at each refresh: scrolled to by the page, not a handle.
      const scrollTo = (id) => page.evaluate((sel) => document.querySelector(sel)?.scrollIntoView({ block: "center" }),
        `tr[data-job="${id}"]`);
      await page.locator('tr[data-job="flaky"]').waitFor(STEP);
      await scrollTo("flaky");
      const spark = page.locator('tr[data-job="flaky"] svg.spark .mark');
      await spark.nth(3).waitFor({ ...STEP, state: "attached" });
      assert.equal(await spark.count(), 4, "min(20, runs) marks");
      assert.match(await statusText(page, 'tr[data-job="flaky"] .spark-box .visually-hidden'),
        /^Last 4 runs: 1 succeeded, 1 failed, 1 timed out, 1 canceled;/);
      await scrollTo("tick");
      await page.locator('tr[data-job="tick"] svg.spark .mark').first().waitFor({ ...STEP, state: "attached" });
      // The timeline: nightly's slots come from /svc/api/upcoming.
      await page.waitForFunction(() =>
        document.querySelectorAll('#timeline .lane[data-lane="nightly"] .slot').length === 4, null, STEP);
      const lanes = await page.locator("#timeline .lane").evaluateAll((gs) => gs.map((g) => ({
        name: g.getAttribute("data-lane"),
        at: [...g.querySelectorAll(".slot")].map((p) => Date.parse(p.getAttribute("data-at") || "")),
      })));
      assert.deepEqual(lanes.map((l) => l.name), ["nightly", "tick"], "a lane per timer job");
      const now = Date.now();
      for (const lane of lanes) {
        assert.ok(lane.at.every((t) => t >= now - 60000 && t <= now + 24 * 3600000), `${lane.name} within 24 h`);
      }
      const ticks = lanes[1].at.length;
      assert.ok(ticks >= 23 && ticks <= 25, `an hourly job is due about 24 times a day: ${ticks}`);
      const timeline = page.locator("#timeline svg.timeline-chart");
      assert.equal(await timeline.getAttribute("role"), "img");
      assert.match(await statusText(page, "#timeline-summary"), /^2 timer jobs, \d+ runs due in the next 24 hours; next: /);
      assert.equal(await page.locator("#timeline .timeline-list li").count(), 2);
      await assertFits(page, `dashboard with charts at ${width} px`);
      if (SCREENSHOTS) await page.locator("#timeline").screenshot({ path: path.join(SCREENSHOTS, `dashboard-timeline-${width}.png`) });
    }
    // A mark is a way to its log.
    await openJob(page, "flaky");
    await page.locator('#run-charts a[href$="/log/2"] .shape').click();
    await waitForText(page, "#viewer-status", /failed/, "the log of the failed run");
  },

  // Every page fits a 390 px phone (nothing wider than the window: tables and code
  // scroll in their own box) and a 1280 px screen; a screenshot of each at both.
  async layout(page) {
    const docs = await docPages(page);
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
      await page.goto(`${BASE}/svc/`);
      await page.locator('tr[data-job="tick"]').waitFor(STEP);
      await assertFits(page, `dashboard at ${width} px`);
      await shoot(page, `dashboard-${width}.png`);

      await page.goto(`${BASE}/svc/#/job/flaky/log/2`);
      await page.locator("tr[data-run]").first().waitFor(STEP);
      await waitForText(page, "#viewer-status", /failed/, "the log of run 2");
      await assertFits(page, `job page at ${width} px`);
      await shoot(page, `job-${width}.png`, true);

      for (const doc of docs) {
        await page.goto(`${BASE}${doc}`);
        await page.locator(".doc-body").waitFor(STEP);
        await assertFits(page, `${doc} at ${width} px`);
      }
      await page.goto(`${BASE}/svc/doc/api`);
      await page.locator(".doc-body").waitFor(STEP);
      await shoot(page, `docs-${width}.png`);
    }
  },

  // The login page fits a 390 px phone and a 1280 px screen.
  async "login-layout"(page) {
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
      await page.goto(`${BASE}/svc/login`);
      await page.locator("#login-form").waitFor(STEP);
      await assertFits(page, `login page at ${width} px`);
      await shoot(page, `login-${width}.png`);
    }
  },
};

async function runScenario(browser, name) {
  const scenario = scenarios[name];
  if (!scenario) throw new Error(`unknown scenario ${name}`);
  const context = await browser.newContext({
    acceptDownloads: true,
    viewport: { width: 1280, height: 800 },
  });
  const problems = [];
  expectedStatuses = new Set(USUAL_STATUSES);
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(STEP.timeout);
    page.on("console", (msg) => {
      // An answer the scenario asked for (a 401, 404...) is logged by Chromium as a
      // failed load.
      const status = /status of (\d{3})/.exec(msg.text());
      if (msg.type() === "error" && !(status && expectedStatuses.has(status[1]))) {
        problems.push(`console: ${msg.text()}`);
      }
    });
    page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
    let timer;
    const limit = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${SCENARIO_TIMEOUT_MS} ms`)),
        SCENARIO_TIMEOUT_MS);
    });
    try {
      await Promise.race([scenario(page), limit]);
    } finally {
      clearTimeout(timer);
    }
    assert.deepEqual(problems, [], "no console errors on the page");
  } finally {
    await context.close().catch(() => {});
  }
}

// Playwright gives the browser a temporary profile of its own and removes it on close.
const launchStarted = Date.now();
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
console.log(`# chromium started (${Date.now() - launchStarted} ms)`);

let failed = 0;
for (const name of process.argv.slice(2)) {
  const started = Date.now();
  try {
    await runScenario(browser, name);
    console.log(`ok - ${name} (${Date.now() - started} ms)`);
  } catch (err) {
    failed += 1;
    console.log(`not ok - ${name} (${Date.now() - started} ms)`);
    console.log(String(err && err.stack ? err.stack : err).replace(/^/gm, "    "));
  }
}
await browser.close().catch(() => {});
process.exit(failed ? 1 : 0);
