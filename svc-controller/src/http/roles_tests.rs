//! People and rights through the router in-process: what each role may do with its
//! session (cookie and CSRF token) and what it is refused, the signed path unchanged,
//! `public_read`, `trusted_proxies`, and the audit log (every kind of actor, refusals,
//! rotation, pages). Reloads and SIGHUP need the daemon: `tests/tests/it/rights.rs`.

use serde_json::{Value, json};

use super::app_testkit::{
    Answer, Call, SECRET, Session, TestApp, fresh_epoch, login_form, sign, sign_with,
};
use crate::engine::testkit::settle;

/// A bcrypt hash (cost 4, cheap to check) of `password`, made by another tool.
const HASH: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";
const PASSWORD: &str = "password";
/// The GitHub-style job's own secret.
const HOOK_SECRET: &str = "hook-secret";

/// `vera` (viewer by default), `otto` (operator), `ada` (admin).
fn users_text() -> String {
    format!(
        "[user \"vera\"]\npassword = {HASH}\n\n\
         [user \"otto\"]\npassword = {HASH}\nrole = operator\n\n\
         [user \"ada\"]\npassword = {HASH}\nrole = admin\n"
    )
}

/// A schedule that is never due while a test runs (the harness starts no timer anyway).
const YEARLY: &str = "schedule = 0 0 1 1 *";

/// A timer job, a GitHub-style webhook job and a JobHttp.
fn jobs() -> String {
    format!(
        "[job \"hello\"]\n{YEARLY}\ncommand = echo hello\n\n\
         [job \"hook\"]\npath = /hook\nauth_kind = github\nsecret = {HOOK_SECRET}\n\
         command = echo hooked\n\n\
         [job.http \"ping\"]\n{YEARLY}\nhttp_url = http://127.0.0.1:9/\n"
    )
}

/// The service with the three users; `svc` lines added.
fn app(svc: &str) -> TestApp {
    TestApp::with_users(svc, &jobs(), &users_text())
}

/// A GET with the session's cookie, or without one.
async fn get_as(app: &TestApp, session: Option<&Session>, path: &str) -> Answer {
    with_cookie(app.get(path), session).send().await
}

fn with_cookie<'a>(call: Call<'a>, session: Option<&Session>) -> Call<'a> {
    match session {
        Some(session) => call.cookie(session),
        None => call,
    }
}

/// A Job action with a session and its own CSRF token.
async fn act(app: &TestApp, session: &Session, action: &str, id: &str) -> Answer {
    app.post(&format!("/svc/api/job_exec/{action}"))
        .session(session)
        .form(&format!("id={id}"))
        .send()
        .await
}

/// A POST without a body, with a session and its own CSRF token.
async fn post_with_session(app: &TestApp, session: &Session, path: &str) -> Answer {
    app.post(path).session(session).send().await
}

/// The job's status in the Environment, as `session` reads it.
async fn job_status(app: &TestApp, session: &Session, kind: &str, id: &str) -> String {
    let env = get_as(app, Some(session), "/svc/api/environment").await;
    env.expect(200);
    let jobs = if kind == "job_http" {
        "http_jobs"
    } else {
        "jobs"
    };
    let data = env.data();
    let found = data[jobs]
        .as_object()
        .and_then(|jobs| jobs.values().find(|job| job["id"] == id))
        .unwrap_or_else(|| panic!("no {kind} {id} in {}", env.text()));
    found["status"].as_str().unwrap_or_default().to_string()
}

/// The signed form body of a pause or resume of `id` and its signature.
fn signed_body(id: &str) -> (String, String) {
    let body = format!("_svc_epoch={}&id={id}", fresh_epoch());
    let signature = sign(&body);
    (body, signature)
}

/// Every entry of the audit log, newest first, read page by page as `session` (none:
/// without users).
async fn audit_entries(app: &TestApp, session: Option<&Session>, limit: usize) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut before: Option<u64> = None;
    loop {
        let path = match before {
            Some(before) => format!("/svc/api/audit?limit={limit}&before={before}"),
            None => format!("/svc/api/audit?limit={limit}"),
        };
        let page = get_as(app, session, &path).await;
        page.expect(200);
        let data = page.data();
        let got = data["entries"].as_array().expect("entries").clone();
        assert!(got.len() <= limit);
        entries.extend(got);
        match data["next_before"].as_u64() {
            Some(next) => before = Some(next),
            None => return entries,
        }
    }
}

/// The newest of `entries` that `matches`.
fn find(entries: &[Value], what: &str, matches: impl Fn(&Value) -> bool) -> Value {
    entries
        .iter()
        .find(|entry| matches(entry))
        .cloned()
        .unwrap_or_else(|| panic!("no audit entry for {what} in {entries:#?}"))
}

fn is(entry: &Value, action: &str, actor_kind: &str) -> bool {
    entry["action"] == action && entry["actor"]["kind"] == actor_kind
}

#[tokio::test(start_paused = true)]
async fn each_session_has_its_role_and_its_own_csrf_token() {
    let app = app("");
    let vera = app.login("vera", PASSWORD).await;
    let otto = app.login("otto", PASSWORD).await;
    let ada = app.login("ada", PASSWORD).await;
    for (session, role) in [(&vera, "viewer"), (&otto, "operator"), (&ada, "admin")] {
        let answer = get_as(&app, Some(session), "/svc/api/session").await;
        assert_eq!(answer.data()["role"], role, "{}", answer.text());
        assert_eq!(answer.header("cache-control"), "no-store");
    }
    assert_ne!(vera.csrf, otto.csrf);
}

#[tokio::test(start_paused = true)]
async fn a_viewer_reads_and_is_refused_every_action_with_what_it_needs() {
    let app = app("");
    let vera = app.login("vera", PASSWORD).await;
    for action in ["pause", "resume", "cancel", "trigger"] {
        let answer = act(&app, &vera, action, "hello").await;
        answer.expect(403);
        assert!(
            answer.message().starts_with("the role viewer may not ")
                && answer.message().ends_with("it needs operator or admin"),
            "{}",
            answer.text()
        );
    }
    let answer = post_with_session(&app, &vera, "/svc/api/job_http/pause?id=ping").await;
    answer.expect(403);
    // Never run, never paused: an empty status.
    assert_eq!(job_status(&app, &vera, "job_exec", "hello").await, "");
    assert_eq!(job_status(&app, &vera, "job_http", "ping").await, "");
}

/// An operator pauses, resumes, runs and cancels a Job.
async fn an_operator_acts_on_a_job(app: &mut TestApp, otto: &Session) {
    act(app, otto, "pause", "hello").await.expect(200);
    assert_eq!(job_status(app, otto, "job_exec", "hello").await, "paused");
    act(app, otto, "resume", "hello").await.expect(200);
    assert_ne!(job_status(app, otto, "job_exec", "hello").await, "paused");
    act(app, otto, "trigger", "hello").await.expect(200);
    let run = app.harness.runs.next().await;
    assert_eq!(run.id(), ("hello", 1));
    run.finish(true, "exit 0");
    settle().await;
    assert_eq!(job_status(app, otto, "job_exec", "hello").await, "success");
    // Nothing running: 200 and nothing changes, as with a signature.
    act(app, otto, "cancel", "hello").await.expect(200);
}

/// An operator runs, pauses and resumes a JobHttp.
async fn an_operator_acts_on_a_job_http(app: &mut TestApp, otto: &Session) {
    // Run now of a JobHttp: the call is made (and fails, as nothing listens on port 9).
    post_with_session(app, otto, "/svc/api/job_http/trigger?id=ping")
        .await
        .expect(200);
    let run = app.harness.runs.next().await;
    assert_eq!(run.id().0, "ping");
    run.finish(false, "connection refused");
    settle().await;
    let status = job_status(app, otto, "job_http", "ping").await;
    assert!(!status.is_empty() && status != "started", "{status}");
    post_with_session(app, otto, "/svc/api/job_http/pause?id=ping")
        .await
        .expect(200);
    assert_eq!(job_status(app, otto, "job_http", "ping").await, "paused");
    // (A resumed JobHttp calls at once, so its status may be `started` now.)
    post_with_session(app, otto, "/svc/api/job_http/resume?id=ping")
        .await
        .expect(200);
    assert_ne!(job_status(app, otto, "job_http", "ping").await, "paused");
}

#[tokio::test(start_paused = true)]
async fn an_operator_acts_on_jobs_but_may_not_reload_or_read_the_audit_log() {
    let mut app = app("");
    let otto = app.login("otto", PASSWORD).await;
    an_operator_acts_on_a_job(&mut app, &otto).await;
    an_operator_acts_on_a_job_http(&mut app, &otto).await;
    let refused = post_with_session(&app, &otto, "/svc/api/reload").await;
    refused.expect(403);
    assert_eq!(
        refused.message(),
        "the role operator may not reload the configuration: it needs admin"
    );
    let refused = get_as(&app, Some(&otto), "/svc/api/audit").await;
    refused.expect(403);
    assert!(
        refused.message().contains("read the audit log"),
        "{}",
        refused.text()
    );
}

#[tokio::test(start_paused = true)]
async fn an_admin_acts_and_reads_the_audit_log() {
    let app = app("");
    let ada = app.login("ada", PASSWORD).await;
    act(&app, &ada, "pause", "hello").await.expect(200);
    assert_eq!(job_status(&app, &ada, "job_exec", "hello").await, "paused");
    act(&app, &ada, "resume", "hello").await.expect(200);
    get_as(&app, Some(&ada), "/svc/api/audit").await.expect(200);
}

#[tokio::test(start_paused = true)]
async fn an_action_needs_its_sessions_csrf_token_or_a_signature() {
    let app = app("");
    let otto = app.login("otto", PASSWORD).await;
    let ada = app.login("ada", PASSWORD).await;
    // Missing, wrong, or another session's token: 403, and nothing changes.
    for csrf in [None, Some("0".repeat(64)), Some(ada.csrf.clone())] {
        let mut call = app.post("/svc/api/job_exec/pause").cookie(&otto);
        if let Some(csrf) = &csrf {
            call = call.header("x-svc-csrf", csrf);
        }
        let answer = call.form("id=hello").send().await;
        answer.expect(403);
        assert!(answer.message().contains("X-Svc-Csrf"), "{}", answer.text());
    }
    assert_ne!(job_status(&app, &otto, "job_exec", "hello").await, "paused");
    // Neither a session nor a signature: 401, as before sessions could act.
    app.post("/svc/api/job_exec/pause")
        .form("id=hello")
        .send()
        .await
        .expect(401);
}

#[tokio::test(start_paused = true)]
async fn the_signed_path_is_unchanged_with_or_without_a_session_cookie() {
    let app = app("");
    let vera = app.login("vera", PASSWORD).await;
    app.signed_form("/svc/api/job_exec/pause", "hello", fresh_epoch())
        .await
        .expect(200);
    assert_eq!(job_status(&app, &vera, "job_exec", "hello").await, "paused");
    let (body, signature) = signed_body("hello");
    app.post("/svc/api/job_exec/resume")
        .cookie(&vera)
        .header("x-svc-sign", &signature)
        .form(&body)
        .send()
        .await
        .expect(200);
    assert_ne!(job_status(&app, &vera, "job_exec", "hello").await, "paused");
}

#[tokio::test(start_paused = true)]
async fn after_a_logout_the_cookie_acts_no_more() {
    let app = app("");
    let otto = app.login("otto", PASSWORD).await;
    app.post("/svc/api/logout")
        .cookie(&otto)
        .send()
        .await
        .expect(200);
    act(&app, &otto, "pause", "hello").await.expect(401);
}

#[tokio::test(start_paused = true)]
async fn without_public_read_anonymous_reads_are_refused() {
    let app = app("");
    get_as(&app, None, "/svc/api/environment").await.expect(401);
    get_as(&app, None, "/svc/api/session").await.expect(401);
}

#[tokio::test(start_paused = true)]
async fn public_read_opens_reads_to_anonymous_users_and_nothing_else() {
    let app = app("public_read = true");
    let env = get_as(&app, None, "/svc/api/environment").await;
    env.expect(200);
    assert!(env.data()["jobs"].get("hello").is_some());
    get_as(&app, None, "/svc/api/job_http?id=ping")
        .await
        .expect(200);
    let page = get_as(&app, None, "/svc").await;
    page.expect(200);
    assert!(page.text().contains("<!DOCTYPE html>"));
    let session = get_as(&app, None, "/svc/api/session").await;
    session.expect(200);
    assert_eq!(session.data()["login"], true);
    assert_eq!(session.data()["name"], Value::Null);
    assert_eq!(session.data()["csrf"], Value::Null);
    // Actions still need a role or a signature; the audit log an admin.
    app.post("/svc/api/job_exec/pause")
        .form("id=hello")
        .send()
        .await
        .expect(401);
    app.post("/svc/api/reload").send().await.expect(401);
    let audit = get_as(&app, None, "/svc/api/audit").await;
    audit.expect(403);
    assert!(audit.message().contains("admin"), "{}", audit.text());
    let vera = app.login("vera", PASSWORD).await;
    assert_ne!(job_status(&app, &vera, "job_exec", "hello").await, "paused");
}

/// What a trusted proxy would add: the client and the proxy before it, over https.
const FORWARDED: [(&str, &str); 2] = [
    ("x-forwarded-for", "198.51.100.1, 203.0.113.7"),
    ("x-forwarded-proto", "https"),
];

/// Logs `ada` in from `peer` with [`FORWARDED`]; the `Set-Cookie` value and the address
/// the audit log gave the login.
async fn forwarded_login(app: &TestApp, peer: [u8; 4]) -> (String, Value) {
    let call = app
        .post("/svc/api/login")
        .peer(peer)
        .headers(&FORWARDED)
        .form(&login_form("ada", PASSWORD));
    let (answer, ada) = app.login_with("ada", call).await;
    let entries = audit_entries(app, Some(&ada), 1000).await;
    let entry = find(&entries, "the login", |e| is(e, "login", "account"));
    (
        answer.header("set-cookie").to_string(),
        entry["address"].clone(),
    )
}

#[tokio::test(start_paused = true)]
async fn forwarded_addresses_are_not_believed_without_trusted_proxies() {
    // The peer is the client, and its X-Forwarded-Proto is not believed.
    let app = app("");
    let (cookie, address) = forwarded_login(&app, [127, 0, 0, 1]).await;
    assert!(!cookie.contains("Secure"), "{cookie}");
    assert_eq!(address, "127.0.0.1");
}

#[tokio::test(start_paused = true)]
async fn forwarded_addresses_are_believed_only_from_trusted_proxies() {
    let app = app("trusted_proxies = 127.0.0.0/8\ntrusted_proxies = 203.0.113.7");
    // Behind a trusted proxy: the rightmost address that is not a proxy.
    let (cookie, address) = forwarded_login(&app, [127, 0, 0, 1]).await;
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert_eq!(address, "198.51.100.1");
    // The same for a signed action.
    let (body, signature) = signed_body("hello");
    app.post("/svc/api/job_exec/pause")
        .headers(&[
            ("x-svc-sign", signature.as_str()),
            ("x-forwarded-for", "192.0.2.44"),
        ])
        .form(&body)
        .send()
        .await
        .expect(200);
    // From a peer that is no proxy, the same headers are the client's own word.
    let (body, signature) = signed_body("hello");
    app.post("/svc/api/job_exec/resume")
        .peer([192, 0, 2, 9])
        .headers(&[("x-svc-sign", signature.as_str()), FORWARDED[0]])
        .form(&body)
        .send()
        .await
        .expect(200);
    let ada = app.login("ada", PASSWORD).await;
    let entries = audit_entries(&app, Some(&ada), 1000).await;
    let entry = find(&entries, "the signed pause", |e| is(e, "pause", "signed"));
    assert_eq!(entry["address"], "192.0.2.44");
    let entry = find(&entries, "the signed resume", |e| is(e, "resume", "signed"));
    assert_eq!(entry["address"], "192.0.2.9");
}

/// Failed logins, an operator's pause, refusals (a viewer's attempt, a bad signature, a
/// missing CSRF token), a signed resume, a webhook delivery and a logout. Returns
/// otto's session and the delivery's signature.
async fn actions_of_every_kind_of_actor(app: &TestApp) -> (Session, String) {
    let otto = app.login("otto", PASSWORD).await;
    // A failed login for an account, and for a name that is none.
    for name in ["otto", "nobody"] {
        let form = login_form(name, &format!("wrong-{PASSWORD}"));
        let answer = app.post("/svc/api/login").form(&form).send().await;
        answer.expect(401);
    }
    act(app, &otto, "pause", "hello").await.expect(200);
    let vera = app.login("vera", PASSWORD).await;
    act(app, &vera, "resume", "hello").await.expect(403);
    let (body, _) = signed_body("hello");
    app.post_form("/svc/api/job_exec/resume", &body, Some(&"0".repeat(64)))
        .await
        .expect(401);
    app.post("/svc/api/job_exec/resume")
        .cookie(&otto)
        .form("id=hello")
        .send()
        .await
        .expect(403);
    app.signed_form("/svc/api/job_exec/resume", "hello", fresh_epoch())
        .await
        .expect(200);
    // A webhook delivery, with its delivery ID.
    let body = r#"{"ref":"refs/heads/main","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}"#;
    let signature = format!("sha256={}", sign_with(HOOK_SECRET, body));
    let headers = [
        ("X-Hub-Signature-256", signature.as_str()),
        ("X-GitHub-Event", "push"),
        ("X-GitHub-Delivery", "delivery-42"),
    ];
    app.send("POST", "/svc/api/job/run/hook", &headers, body)
        .await
        .expect(200);
    app.post("/svc/api/logout")
        .cookie(&vera)
        .send()
        .await
        .expect(200);
    (otto, signature)
}

/// The entries of logins and of refusals that proved nothing.
fn check_login_and_unauthenticated_entries(entries: &[Value]) {
    let login_ok = find(entries, "otto's login", |e| {
        is(e, "login", "account") && e["actor"]["name"] == "otto"
    });
    assert_eq!(login_ok["result"], "ok");
    assert_eq!(login_ok["address"], "127.0.0.1");
    let failed = find(entries, "otto's failed login", |e| {
        is(e, "login_failed", "account")
    });
    assert_eq!(failed["actor"]["name"], "otto");
    assert_eq!(failed["status"], 401);
    // A failed login that names no account is counted, not audited: it names nobody
    // (and may be a password typed in the wrong box), and anyone can send it.
    assert!(
        !entries
            .iter()
            .any(|e| e["action"] == "login_failed" && e["actor"]["kind"] != "account"),
        "{entries:#?}"
    );
    assert!(!entries.iter().any(|e| e.to_string().contains("nobody")));
    // The bad signature proved nothing: counted, not audited (no refused action with
    // 401 is recorded; the only 401 is otto's failed login).
    assert!(
        !entries
            .iter()
            .any(|e| e["status"] == 401 && e["action"] != "login_failed"),
        "{entries:#?}"
    );
}

/// The entries of actions, allowed and refused, of accounts, signatures and webhooks.
fn check_action_entries(entries: &[Value]) {
    let paused = find(entries, "otto's pause", |e| is(e, "pause", "account"));
    assert_eq!(paused["actor"]["name"], "otto");
    assert_eq!(paused["job"], json!({"kind": "job_exec", "id": "hello"}));
    assert_eq!(paused["result"], "ok");
    assert_eq!(paused["status"], 200);
    let viewer = find(entries, "vera's refused resume", |e| {
        is(e, "resume", "account") && e["actor"]["name"] == "vera"
    });
    assert_eq!(viewer["result"], "refused");
    assert_eq!(viewer["status"], 403);
    let reason = |e: &Value| e["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason(&viewer).contains("viewer"));
    let no_csrf = find(entries, "the missing CSRF token", |e| {
        is(e, "resume", "account") && e["actor"]["name"] == "otto" && e["status"] == 403
    });
    assert!(reason(&no_csrf).contains("X-Svc-Csrf"));
    let signed = find(entries, "the signed resume", |e| {
        is(e, "resume", "signed") && e["result"] == "ok"
    });
    assert_eq!(signed["job"]["id"], "hello");
    let hook = find(entries, "the webhook delivery", |e| {
        is(e, "trigger", "webhook")
    });
    assert_eq!(hook["actor"]["delivery"], "delivery-42");
    assert_eq!(hook["job"]["id"], "hook");
    assert_eq!(hook["result"], "ok");
    find(entries, "vera's logout", |e| {
        is(e, "logout", "account") && e["actor"]["name"] == "vera"
    });
}

#[tokio::test(start_paused = true)]
async fn the_audit_log_records_every_kind_of_actor_and_refusals() {
    let app = app("");
    let ada = app.login("ada", PASSWORD).await;
    let (otto, signature) = actions_of_every_kind_of_actor(&app).await;
    let entries = audit_entries(&app, Some(&ada), 1000).await;
    check_login_and_unauthenticated_entries(&entries);
    check_action_entries(&entries);
    // Newest first, each with a time.
    let seqs: Vec<u64> = entries.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "{seqs:?}");
    for entry in &entries {
        let time = entry["time"].as_str().unwrap_or_default();
        chrono::DateTime::parse_from_rfc3339(time).unwrap_or_else(|_| panic!("time of {entry}"));
    }
    // Nothing secret in the file: no password, cookie, token, signature or secret.
    let file = app.harness.config().main.dir_logs().join("audit.log");
    let text = std::fs::read_to_string(file).expect("audit.log");
    for secret in [
        format!("wrong-{PASSWORD}"),
        otto.csrf.clone(),
        otto.cookie.clone(),
        SECRET.to_string(),
        signature.clone(),
        HOOK_SECRET.to_string(),
    ] {
        assert!(
            !text.contains(&secret),
            "the audit log holds a secret: {text}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_audit_log_rotates_and_pages_through_the_rotated_files() {
    // Without users the audit log is as open as the other GETs.
    let app = TestApp::new("audit_max_size = 4K", &jobs());
    const ACTIONS: usize = 80;
    for n in 0..ACTIONS {
        let action = if n % 2 == 0 { "pause" } else { "resume" };
        let path = format!("/svc/api/job_exec/{action}");
        app.signed_form(&path, "hello", fresh_epoch())
            .await
            .expect(200);
    }
    let entries = audit_entries(&app, None, 7).await;
    let seqs: Vec<u64> = entries.iter().filter_map(|e| e["seq"].as_u64()).collect();
    let expected: Vec<u64> = (1..=ACTIONS as u64).rev().collect();
    assert_eq!(seqs, expected, "every entry once, newest first");
    assert_eq!(entries[0]["action"], "resume");
    assert_eq!(entries[ACTIONS - 1]["action"], "pause");
    let dir = app.harness.config().main.dir_logs();
    let rotated: Vec<u64> = (1..=5)
        .filter_map(|n| std::fs::metadata(dir.join(format!("audit.log.{n}"))).ok())
        .map(|meta| meta.len())
        .collect();
    assert!(rotated.len() >= 2, "rotated files: {rotated:?}");
    assert!(rotated.iter().all(|size| *size <= 4096), "{rotated:?}");
    // A bad page request.
    get_as(&app, None, "/svc/api/audit?limit=0")
        .await
        .expect(400);
    get_as(&app, None, "/svc/api/audit?before=x")
        .await
        .expect(400);
    let page = get_as(&app, None, "/svc/api/audit?limit=3&before=5").await;
    let data = page.data();
    let seqs: Vec<u64> = data["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert_eq!(seqs, [4, 3, 2]);
    assert_eq!(data["next_before"], 2);
}
