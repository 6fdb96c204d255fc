//! The optional login through the router in-process: without `user.conf` everything
//! stays open and the login endpoints say login is off; upstream's login path answers
//! like svc's; with users, webhook triggers and signed calls still need no session.
//! Over the engine's fake executor: no process, no socket.

use super::app_testkit::{Answer, SECRET, TestApp, sign};

/// A webhook job, a timer job not due while the test runs, and a JobHttp.
const JOBS: &str = "[job \"deploy\"]\npath = /deploy\ncommand = echo deployed\n\n\
                    [job \"hello\"]\nschedule = 0 0 1 1 *\ncommand = echo hello\n\n\
                    [job.http \"ping\"]\nschedule = 0 0 1 1 *\nhttp_url = http://127.0.0.1:9/\n";

/// bcrypt of `password` at cost 4.
const BOB_BCRYPT: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";
const ANN_PASSWORD: &str = "correct horse battery staple";

/// `ann` (argon2id, made by the service's own hasher) and `bob` (bcrypt).
fn users() -> String {
    let hash = crate::security::password::hash_password(ANN_PASSWORD).expect("hash a password");
    format!("[user \"ann\"]\npassword = {hash}\n\n[user \"bob\"]\npassword = {BOB_BCRYPT}\n")
}

/// A form POST without a session.
async fn post(app: &TestApp, path: &str, body: &str) -> Answer {
    app.as_user("POST", path, None, None, body).await
}

/// A GET without a session.
async fn get(app: &TestApp, path: &str) -> Answer {
    app.as_user("GET", path, None, None, "").await
}

#[tokio::test]
async fn without_users_everything_stays_open() {
    let app = TestApp::new("", JOBS);
    assert_eq!(
        get(&app, "/svc/api/environment").await.wrapper(200)["message"],
        ""
    );
    let page = get(&app, "/svc").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("<!DOCTYPE html>"));
    assert_eq!(get(&app, "/svc/doc/api").await.status, 200);
    assert_eq!(get(&app, "/svc/api/metrics").await.status, 200);
    let session = get(&app, "/svc/api/session").await.wrapper(200);
    assert_eq!(session["data"]["login"], false);
    assert!(session["data"]["name"].is_null());
    let form = format!("name=ann&password={ANN_PASSWORD}");
    let refused = post(&app, "/svc/api/login", &form).await;
    refused.wrapper(404);
    assert_eq!(refused.message(), "login is not enabled");
    let refused = post(&app, "/svc/api/logout", "").await;
    refused.wrapper(404);
    assert_eq!(refused.message(), "login is not enabled");
    let page = get(&app, "/svc/login").await;
    assert_eq!(page.status, 303);
    assert_eq!(page.header("location"), Some("/svc/"));
}

#[tokio::test]
async fn upstreams_login_path_is_served_too() {
    let app = TestApp::with_users("", JOBS, &users());
    let path = "/svc/api/auth/login";
    let refused = post(&app, path, "name=ann&password=no").await;
    let wrapper = refused.wrapper(401);
    assert_eq!(refused.message(), "invalid name or password");
    assert_eq!(wrapper["name"], "ERR_UNAUTHORIZED");
    let answer = post(&app, path, "name=ann&password=correct+horse+battery+staple").await;
    assert_eq!(answer.wrapper(200)["data"]["name"], "ann");
    let cookie = answer
        .header("set-cookie")
        .and_then(|value| value.split(';').next())
        .expect("a session cookie")
        .to_string();
    app.as_user("GET", "/svc/api/environment", Some(&cookie), None, "")
        .await
        .wrapper(200);
}

#[tokio::test]
async fn webhooks_and_signed_calls_need_no_login() {
    let mut app = TestApp::with_users("", JOBS, &users());
    let body = r#"{"ref":"main"}"#;
    let signature = sign(body);
    let signed = [("x-svc-sign", signature.as_str())];
    app.send("POST", "/svc/api/job/run/deploy", &signed, body)
        .await
        .wrapper(200);
    // Legacy and later trigger paths too (the job may still be busy: 200 or 429, never
    // 401).
    for path in ["/svc/job/deploy", "/svc/api/job_exec/run/deploy"] {
        let answer = app.send("POST", path, &signed, body).await;
        assert!(
            answer.status == 200 || answer.status == 429,
            "{path}: {}",
            answer.text()
        );
    }
    // A bad signature is still refused, by the signature check.
    let refused = app
        .send(
            "POST",
            "/svc/api/job/run/deploy",
            &[("x-svc-sign", "00")],
            body,
        )
        .await;
    refused.wrapper(401);
    assert_ne!(refused.message(), "login required");
    let first = app.harness.runs.next().await;
    assert_eq!(first.id(), ("deploy", 1));
    first.finish(true, "ok");

    let epoch = super::app_testkit::fresh_epoch();
    let paused = app
        .signed_form("/svc/api/job_exec/pause", "hello", epoch)
        .await;
    assert_eq!(paused.wrapper(200)["data"]["status"], "paused");
    let epoch = super::app_testkit::fresh_epoch();
    app.signed_form("/svc/api/job_exec/resume", "hello", epoch)
        .await
        .wrapper(200);

    let query = "id=ping";
    let signature = super::app_testkit::sign_with(SECRET, query);
    for action in ["pause", "resume"] {
        app.send(
            "POST",
            &format!("/svc/api/job_http/{action}?{query}"),
            &[("x-svc-sign", signature.as_str())],
            "",
        )
        .await
        .wrapper(200);
    }
}
