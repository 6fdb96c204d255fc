//! People and rights, against the real binary: `public_read`, `trusted_proxies`, reload
//! over HTTP, and the audit log (every kind of actor, refusals, rotation on
//! disk, pages). What each role may do with its session, and the CSRF token, are tested
//! in-process over the router (`svc-controller/src/http/roles_tests.rs`).

use serde_json::Value;
use svc_tests::web::{Answer, client, send, write_user_conf};
use svc_tests::{
    TestService, TestServiceBuilder, WAIT, fresh_epoch, hmac_sha256_hex, job_section, wait_for,
};

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

/// A schedule that is not due while a test runs (an interval runs at start).
const YEARLY: &str = "schedule = 0 0 1 1 *";

/// A timer job, a GitHub-style webhook job and a JobHttp; `svc` lines added.
fn builder(svc: &[&str]) -> TestServiceBuilder {
    let mut builder = TestService::builder()
        .job_file(
            "jobs",
            [
                job_section("hello", &[YEARLY, "command = echo hello"]),
                job_section(
                    "hook",
                    &[
                        "path = /hook",
                        "auth_kind = github",
                        &format!("secret = {HOOK_SECRET}"),
                        "command = echo hooked",
                    ],
                ),
            ]
            .join("\n"),
        )
        .job_http_file(
            "ping",
            format!("[job.http \"ping\"]\n{YEARLY}\nhttp_url = http://127.0.0.1:9/\n"),
        );
    for line in svc {
        builder = builder.svc(*line);
    }
    builder
}

/// Starts a service whose `user.conf` names the three users; ready once the session
/// endpoint answers as it does without a session (the Environment needs one): 401, or
/// 200 when `public_read` lets anonymous reads in.
async fn start_with_users(svc: &[&str]) -> TestService {
    let builder = builder(svc);
    write_user_conf(builder.dir_base(), &users_text(), 0o600);
    let mut service = builder.build();
    let status = if svc.contains(&"public_read = true") {
        200
    } else {
        401
    };
    service.start_answering("/svc/api/session", status).await;
    service
}

/// A logged-in user: the session cookie and the CSRF token of `GET /svc/api/session`.
struct Session {
    cookie: String,
    csrf: String,
}

async fn login_with(
    service: &TestService,
    name: &str,
    headers: &[(&str, &str)],
) -> (Answer, Session) {
    let mut request = client()
        .post(format!("{}/svc/api/login", service.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("name={name}&password={PASSWORD}"));
    for (key, value) in headers {
        request = request.header(*key, *value);
    }
    let answer = send(request).await;
    answer.expect(200);
    let set_cookie = answer
        .headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie")
        .to_string();
    let cookie = set_cookie
        .split(';')
        .next()
        .expect("pair")
        .trim()
        .to_string();
    let session = send(
        client()
            .get(format!("{}/svc/api/session", service.base_url()))
            .header("cookie", &cookie),
    )
    .await;
    session.expect(200);
    assert_eq!(session.data()["name"], name, "{}", session.raw);
    let csrf = session.data()["csrf"]
        .as_str()
        .expect("a csrf token")
        .to_string();
    assert_eq!(csrf.len(), 64);
    (answer, Session { cookie, csrf })
}

async fn login(service: &TestService, name: &str) -> Session {
    login_with(service, name, &[]).await.1
}

/// A POST with the session's cookie and, when `csrf` is given, `X-Svc-Csrf`.
async fn post_as(
    service: &TestService,
    session: Option<&Session>,
    csrf: Option<&str>,
    path: &str,
    body: &str,
    extra: &[(&str, &str)],
) -> Answer {
    let mut request = client()
        .post(format!("{}{path}", service.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("cookie", &session.cookie);
    }
    if let Some(csrf) = csrf {
        request = request.header("x-svc-csrf", csrf);
    }
    for (key, value) in extra {
        request = request.header(*key, *value);
    }
    send(request).await
}

/// A POST without a body, with a session and its own CSRF token.
async fn post_with_session(service: &TestService, session: &Session, path: &str) -> Answer {
    post_as(service, Some(session), Some(&session.csrf), path, "", &[]).await
}

/// A Job action with a session and its own CSRF token.
async fn act(service: &TestService, session: &Session, action: &str, id: &str) -> Answer {
    post_as(
        service,
        Some(session),
        Some(&session.csrf),
        &format!("/svc/api/job_exec/{action}"),
        &format!("id={id}"),
        &[],
    )
    .await
}

async fn get_as(service: &TestService, session: Option<&Session>, path: &str) -> Answer {
    let mut request = client().get(format!("{}{path}", service.base_url()));
    if let Some(session) = session {
        request = request.header("cookie", &session.cookie);
    }
    send(request).await
}

async fn job_status(service: &TestService, session: &Session, kind: &str, id: &str) -> String {
    let env = get_as(service, Some(session), "/svc/api/environment").await;
    env.expect(200);
    let jobs = if kind == "job_http" {
        "http_jobs"
    } else {
        "jobs"
    };
    let found = env.data()[jobs]
        .as_object()
        .and_then(|jobs| jobs.values().find(|job| job["id"] == id))
        .unwrap_or_else(|| panic!("no {kind} {id} in {}", env.raw));
    found["status"].as_str().unwrap_or_default().to_string()
}

/// Every entry of the audit log, newest first, read page by page as `session` (none:
/// without users).
async fn audit_entries(
    service: &TestService,
    session: Option<&Session>,
    limit: usize,
) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut before: Option<u64> = None;
    loop {
        let path = match before {
            Some(before) => format!("/svc/api/audit?limit={limit}&before={before}"),
            None => format!("/svc/api/audit?limit={limit}"),
        };
        let page = get_as(service, session, &path).await;
        page.expect(200);
        let got = page.data()["entries"].as_array().expect("entries").clone();
        assert!(got.len() <= limit);
        entries.extend(got);
        match page.data()["next_before"].as_u64() {
            Some(next) => before = Some(next),
            None => return entries,
        }
    }
}

/// The newest audit entry that `matches`, waiting for it (a signal's entry is written
/// after the reload it records).
async fn audit_entry(
    service: &TestService,
    session: Option<&Session>,
    what: &str,
    matches: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(WAIT, what, async || {
        audit_entries(service, session, 1000)
            .await
            .into_iter()
            .find(|entry| matches(entry))
    })
    .await
}

fn is(entry: &Value, action: &str, actor_kind: &str) -> bool {
    entry["action"] == action && entry["actor"]["kind"] == actor_kind
}

#[tokio::test]
async fn an_admin_reloads_and_an_invalid_configuration_is_named() {
    let service = start_with_users(&[]).await;
    let ada = login(&service, "ada").await;
    let env = get_as(&service, Some(&ada), "/svc/api/environment").await;
    env.expect(200);
    assert!(env.data()["jobs"].get("added").is_none());

    // A new job, taken in by the admin's reload.
    std::fs::write(
        service.job_d().join("added.conf"),
        job_section("added", &["interval = 1h", "command = echo added"]),
    )
    .expect("write a job file");
    let answer = post_with_session(&service, &ada, "/svc/api/reload").await;
    answer.expect(200);
    let env = get_as(&service, Some(&ada), "/svc/api/environment").await;
    env.expect(200);
    assert!(env.data()["jobs"].get("added").is_some(), "{}", env.raw);

    // An invalid one is refused, named, and changes nothing.
    std::fs::write(
        service.job_d().join("broken.conf"),
        job_section("broken", &["interval = soon", "command = true"]),
    )
    .expect("write a job file");
    let answer = post_with_session(&service, &ada, "/svc/api/reload").await;
    answer.expect(422);
    assert!(
        answer.message().contains("running jobs unchanged"),
        "{}",
        answer.raw
    );
    assert!(answer.message().contains("broken.conf"), "{}", answer.raw);
    assert!(answer.message().contains("interval"), "{}", answer.raw);
    assert!(!answer.raw.contains(&service.secret()), "{}", answer.raw);
    std::fs::remove_file(service.job_d().join("broken.conf")).expect("remove");

    // A request signed with the main secret reloads too (one-time, like the others).
    std::fs::remove_file(service.job_d().join("added.conf")).expect("remove");
    let body = format!("_svc_epoch={}", fresh_epoch());
    let signature = hmac_sha256_hex(service.secret(), &body);
    let signed = [("x-svc-sign", signature.as_str())];
    post_as(&service, None, None, "/svc/api/reload", &body, &signed)
        .await
        .expect(200);
    let env = get_as(&service, Some(&ada), "/svc/api/environment").await;
    env.expect(200);
    assert!(env.data()["jobs"].get("added").is_none(), "{}", env.raw);
    let again = post_as(&service, None, None, "/svc/api/reload", &body, &signed).await;
    again.expect(401);
    assert!(again.message().starts_with("replay:"), "{}", again.raw);
    // Without either: 401.
    post_as(&service, None, None, "/svc/api/reload", "", &[])
        .await
        .expect(401);

    // Recorded, with their actors and results.
    let ok = audit_entry(&service, Some(&ada), "the admin's reload", |e| {
        is(e, "reload", "account") && e["result"] == "ok"
    })
    .await;
    assert_eq!(ok["actor"]["name"], "ada");
    let failed = audit_entry(&service, Some(&ada), "the refused reload", |e| {
        is(e, "reload", "account") && e["status"] == 422
    })
    .await;
    assert_eq!(failed["result"], "refused");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("broken.conf")
    );
    audit_entry(&service, Some(&ada), "the signed reload", |e| {
        is(e, "reload", "signed") && e["result"] == "ok"
    })
    .await;
}

#[tokio::test]
async fn public_read_opens_reads_to_anonymous_users_and_nothing_else() {
    // Without it (the default), anonymous reads are refused.
    let closed = start_with_users(&[]).await;
    get_as(&closed, None, "/svc/api/environment")
        .await
        .expect(401);
    get_as(&closed, None, "/svc/api/session").await.expect(401);
    drop(closed);

    let service = start_with_users(&["public_read = true"]).await;
    let env = get_as(&service, None, "/svc/api/environment").await;
    env.expect(200);
    assert!(env.data()["jobs"].get("hello").is_some());
    get_as(&service, None, "/svc/api/job_http?id=ping")
        .await
        .expect(200);
    let page = get_as(&service, None, "/svc").await;
    page.expect(200);
    assert!(page.raw.contains("<!DOCTYPE html>"));
    let session = get_as(&service, None, "/svc/api/session").await;
    session.expect(200);
    assert_eq!(session.data()["login"], true);
    assert_eq!(session.data()["name"], Value::Null);
    assert_eq!(session.data()["csrf"], Value::Null);
    // Actions still need a role or a signature; the audit log an admin.
    post_as(
        &service,
        None,
        None,
        "/svc/api/job_exec/pause",
        "id=hello",
        &[],
    )
    .await
    .expect(401);
    post_as(&service, None, None, "/svc/api/reload", "", &[])
        .await
        .expect(401);
    let audit = get_as(&service, None, "/svc/api/audit").await;
    audit.expect(403);
    assert!(audit.message().contains("admin"), "{}", audit.raw);
    assert_ne!(
        job_status(
            &service,
            &login(&service, "vera").await,
            "job_exec",
            "hello"
        )
        .await,
        "paused"
    );
}

#[tokio::test]
async fn forwarded_addresses_are_believed_only_from_trusted_proxies() {
    let forwarded = [
        ("x-forwarded-for", "198.51.100.1, 203.0.113.7"),
        ("x-forwarded-proto", "https"),
    ];
    // Not trusted: the peer is the client, and its X-Forwarded-Proto is not believed.
    let service = start_with_users(&[]).await;
    let (answer, ada) = login_with(&service, "ada", &forwarded).await;
    let cookie = answer
        .headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(!cookie.contains("Secure"), "{cookie}");
    let entry = audit_entry(&service, Some(&ada), "the login", |e| {
        is(e, "login", "account")
    })
    .await;
    assert_eq!(entry["address"], "127.0.0.1");
    drop(service);

    // Behind a trusted proxy: the rightmost address that is not a proxy.
    let service = start_with_users(&[
        "trusted_proxies = 127.0.0.0/8",
        "trusted_proxies = 203.0.113.7",
    ])
    .await;
    let (answer, ada) = login_with(&service, "ada", &forwarded).await;
    let cookie = answer
        .headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(cookie.contains("; Secure"), "{cookie}");
    let entry = audit_entry(&service, Some(&ada), "the login", |e| {
        is(e, "login", "account")
    })
    .await;
    assert_eq!(entry["address"], "198.51.100.1");
    // The same for a signed action.
    let (body, signature) = service.job_exec_form("hello");
    post_as(
        &service,
        None,
        None,
        "/svc/api/job_exec/pause",
        &body,
        &[
            ("x-svc-sign", &signature),
            ("x-forwarded-for", "192.0.2.44"),
        ],
    )
    .await
    .expect(200);
    let entry = audit_entry(&service, Some(&ada), "the signed pause", |e| {
        is(e, "pause", "signed")
    })
    .await;
    assert_eq!(entry["address"], "192.0.2.44");
}

#[tokio::test]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn the_audit_log_records_every_kind_of_actor_and_refusals() {
    let service = start_with_users(&[]).await;
    let otto = login(&service, "otto").await;
    let ada = login(&service, "ada").await;
    // A failed login for an account, and for a name that is none.
    for name in ["otto", "nobody"] {
        let answer = send(
            client()
                .post(format!("{}/svc/api/login", service.base_url()))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("name={name}&password=wrong-{PASSWORD}")),
        )
        .await;
        answer.expect(401);
    }
    act(&service, &otto, "pause", "hello").await.expect(200);
    // Refused: a viewer's attempt, a bad signature, a missing CSRF token.
    let vera = login(&service, "vera").await;
    act(&service, &vera, "resume", "hello").await.expect(403);
    let (body, _) = service.job_exec_form("hello");
    post_as(
        &service,
        None,
        None,
        "/svc/api/job_exec/resume",
        &body,
        &[("x-svc-sign", &"0".repeat(64))],
    )
    .await
    .expect(401);
    post_as(
        &service,
        Some(&otto),
        None,
        "/svc/api/job_exec/resume",
        "id=hello",
        &[],
    )
    .await
    .expect(403);
    // Signed.
    service.resume("hello").await.assert_status(200);
    // A webhook delivery, with its delivery ID.
    let body = r#"{"ref":"refs/heads/main","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}"#;
    let signature = format!("sha256={}", hmac_sha256_hex(HOOK_SECRET, body.as_bytes()));
    service
        .trigger_unsigned(
            "/hook",
            body.as_bytes(),
            &[
                ("X-Hub-Signature-256", signature.as_str()),
                ("X-GitHub-Event", "push"),
                ("X-GitHub-Delivery", "delivery-42"),
            ],
        )
        .await
        .assert_status(200);
    // SIGHUP.
    service.sighup();
    post_as(&service, Some(&vera), None, "/svc/api/logout", "", &[])
        .await
        .expect(200);

    let signal = audit_entry(&service, Some(&ada), "the SIGHUP reload", |e| {
        is(e, "reload", "signal")
    })
    .await;
    assert_eq!(signal["result"], "ok");
    assert_eq!(signal["address"], Value::Null);
    let entries = audit_entries(&service, Some(&ada), 1000).await;
    let find = |what: &str, matches: &dyn Fn(&Value) -> bool| -> Value {
        entries
            .iter()
            .find(|e| matches(e))
            .cloned()
            .unwrap_or_else(|| panic!("no audit entry for {what} in {entries:#?}"))
    };
    let login_ok = find("otto's login", &|e| {
        is(e, "login", "account") && e["actor"]["name"] == "otto"
    });
    assert_eq!(login_ok["result"], "ok");
    assert_eq!(login_ok["address"], "127.0.0.1");
    let failed = find("otto's failed login", &|e| is(e, "login_failed", "account"));
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
    let paused = find("otto's pause", &|e| is(e, "pause", "account"));
    assert_eq!(paused["actor"]["name"], "otto");
    assert_eq!(
        paused["job"],
        serde_json::json!({"kind": "job_exec", "id": "hello"})
    );
    assert_eq!(paused["result"], "ok");
    assert_eq!(paused["status"], 200);
    let viewer = find("vera's refused resume", &|e| {
        is(e, "resume", "account") && e["actor"]["name"] == "vera"
    });
    assert_eq!(viewer["result"], "refused");
    assert_eq!(viewer["status"], 403);
    assert!(
        viewer["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("viewer")
    );
    // The bad signature proved nothing: counted, not audited (no refused action with
    // 401 is recorded; the only 401 is otto's failed login).
    assert!(
        !entries
            .iter()
            .any(|e| e["status"] == 401 && e["action"] != "login_failed"),
        "{entries:#?}"
    );
    let metrics = get_as(&service, Some(&ada), "/svc/api/metrics").await;
    metrics.expect(200);
    for series in [
        r#"svc_unauthenticated_total{reason="action"} 1"#,
        r#"svc_unauthenticated_total{reason="login_unknown_name"} 1"#,
    ] {
        assert!(metrics.raw.contains(series), "{series} in {}", metrics.raw);
    }
    let no_csrf = find("the missing CSRF token", &|e| {
        is(e, "resume", "account") && e["actor"]["name"] == "otto" && e["status"] == 403
    });
    assert!(
        no_csrf["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("X-Svc-Csrf")
    );
    let signed = find("the signed resume", &|e| {
        is(e, "resume", "signed") && e["result"] == "ok"
    });
    assert_eq!(signed["job"]["id"], "hello");
    let hook = find("the webhook delivery", &|e| is(e, "trigger", "webhook"));
    assert_eq!(hook["actor"]["delivery"], "delivery-42");
    assert_eq!(hook["job"]["id"], "hook");
    assert_eq!(hook["result"], "ok");
    find("vera's logout", &|e| {
        is(e, "logout", "account") && e["actor"]["name"] == "vera"
    });
    // Newest first, each with a time.
    let seqs: Vec<u64> = entries.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "{seqs:?}");
    for entry in &entries {
        svc_tests::rfc3339(&entry["time"]).unwrap_or_else(|| panic!("time of {entry}"));
    }

    // Nothing secret in the file: no password, cookie, token, signature or secret.
    let text = std::fs::read_to_string(service.dir_base().join("var/log/svc/audit.log"))
        .expect("audit.log");
    for secret in [
        format!("wrong-{PASSWORD}"),
        otto.csrf.clone(),
        otto.cookie.clone(),
        service.secret(),
        signature.clone(),
        HOOK_SECRET.to_string(),
    ] {
        assert!(
            !text.contains(&secret),
            "the audit log holds a secret: {text}"
        );
    }
}

#[tokio::test]
async fn the_audit_log_rotates_and_pages_through_the_rotated_files() {
    // Without users the audit log is as open as the other GETs.
    let service = builder(&["audit_max_size = 4K"]).start().await;
    const ACTIONS: usize = 80;
    for n in 0..ACTIONS {
        let answer = if n % 2 == 0 {
            service.pause("hello").await
        } else {
            service.resume("hello").await
        };
        answer.assert_status(200);
    }
    let entries = audit_entries(&service, None, 7).await;
    let seqs: Vec<u64> = entries.iter().filter_map(|e| e["seq"].as_u64()).collect();
    let expected: Vec<u64> = (1..=ACTIONS as u64).rev().collect();
    assert_eq!(seqs, expected, "every entry once, newest first");
    assert_eq!(entries[0]["action"], "resume");
    assert_eq!(entries[ACTIONS - 1]["action"], "pause");
    let dir = service.dir_base().join("var/log/svc");
    let rotated: Vec<u64> = (1..=5)
        .filter_map(|n| std::fs::metadata(dir.join(format!("audit.log.{n}"))).ok())
        .map(|meta| meta.len())
        .collect();
    assert!(rotated.len() >= 2, "rotated files: {rotated:?}");
    assert!(rotated.iter().all(|size| *size <= 4096), "{rotated:?}");
    // A bad page request.
    get_as(&service, None, "/svc/api/audit?limit=0")
        .await
        .expect(400);
    get_as(&service, None, "/svc/api/audit?before=x")
        .await
        .expect(400);
    let page = get_as(&service, None, "/svc/api/audit?limit=3&before=5").await;
    let seqs: Vec<u64> = page.data()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert_eq!(seqs, [4, 3, 2]);
    assert_eq!(page.data()["next_before"], 2);
}
