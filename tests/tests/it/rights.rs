//! People and rights, against the real binary, where the process is what is tested: the
//! reload that `POST /svc/api/reload` asks of the daemon's main loop, a SIGHUP's audit
//! entry, and the process-wide counts of requests that proved nothing. What the API
//! answers to each role, `public_read`, `trusted_proxies` and the audit log's other
//! entries are tested in-process: `svc-controller/src/http/roles_tests.rs`.

use serde_json::Value;
use svc_tests::web::{Answer, client, send, write_user_conf};
use svc_tests::{TestService, WAIT, fresh_epoch, hmac_sha256_hex, job_section, wait_for};

/// A bcrypt hash (cost 4, cheap to check) of `password`, made by another tool.
const HASH: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";
const PASSWORD: &str = "password";

/// Starts a service with a timer job whose `user.conf` names `ada`, an admin; ready once
/// the session endpoint answers as it does without a session (the Environment needs
/// one): 401.
async fn start_with_users() -> TestService {
    let builder = TestService::builder().job_file(
        "jobs",
        job_section("hello", &["schedule = 0 0 1 1 *", "command = echo hello"]),
    );
    let users = format!("[user \"ada\"]\npassword = {HASH}\nrole = admin\n");
    write_user_conf(builder.dir_base(), &users, 0o600);
    let mut service = builder.build();
    service.start_answering("/svc/api/session", 401).await;
    service
}

/// A logged-in user: the session cookie and the CSRF token of `GET /svc/api/session`.
struct Session {
    cookie: String,
    csrf: String,
}

async fn login(service: &TestService, name: &str) -> Session {
    let request = client()
        .post(format!("{}/svc/api/login", service.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("name={name}&password={PASSWORD}"));
    let answer = send(request).await;
    answer.expect(200);
    let cookie = answer
        .header("set-cookie")
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
    Session { cookie, csrf }
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

async fn get_as(service: &TestService, session: Option<&Session>, path: &str) -> Answer {
    let mut request = client().get(format!("{}{path}", service.base_url()));
    if let Some(session) = session {
        request = request.header("cookie", &session.cookie);
    }
    send(request).await
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

// Stays: the reload is the daemon's main loop (the configuration read again from disk), which the router in-process has not.
#[tokio::test]
async fn an_admin_reloads_and_an_invalid_configuration_is_named() {
    let service = start_with_users().await;
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

// Stays: a SIGHUP needs the process, and svc_unauthenticated_total is process-wide (exact counts need a process of their own).
#[tokio::test]
async fn a_sighup_is_audited_and_requests_that_prove_nothing_are_only_counted() {
    let service = start_with_users().await;
    let ada = login(&service, "ada").await;
    // A failed login for a name that is none, and a bad signature.
    let answer = send(
        client()
            .post(format!("{}/svc/api/login", service.base_url()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("name=nobody&password=wrong-{PASSWORD}")),
    )
    .await;
    answer.expect(401);
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
    service.sighup();

    let signal = audit_entry(&service, Some(&ada), "the SIGHUP reload", |e| {
        is(e, "reload", "signal")
    })
    .await;
    assert_eq!(signal["result"], "ok");
    assert_eq!(signal["address"], Value::Null);
    let metrics = get_as(&service, Some(&ada), "/svc/api/metrics").await;
    metrics.expect(200);
    for series in [
        r#"svc_unauthenticated_total{reason="action"} 1"#,
        r#"svc_unauthenticated_total{reason="login_unknown_name"} 1"#,
    ] {
        assert!(metrics.raw.contains(series), "{series} in {}", metrics.raw);
    }
}
