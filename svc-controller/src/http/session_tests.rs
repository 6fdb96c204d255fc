//! The optional login through the router in-process: without `user.conf` everything
//! stays open; with a user the UI and every GET under `/svc` need a session cookie,
//! while assets, the login page, the public directory, webhook triggers and signed calls
//! do not; sessions, logout, and the failed-login throttle. `--check` of a bad
//! `user.conf` needs the binary: `tests/tests/it/login.rs`.

use std::sync::LazyLock;
use std::time::Duration;

use serde_json::Value;

use super::app_testkit::{Answer, Logs, TestApp, cookie_pair, fresh_epoch, login_form, sign};

/// Password of the user `ann`, whose hash the test makes with the library.
const ANN_PASSWORD: &str = "correct horse battery staple";
/// A bcrypt (`$2a$`) hash of `password` made by another tool, for the user `bob`.
const BOB_BCRYPT: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";

/// `ann` (argon2id from `hash_password`, made once) and `bob` (bcrypt).
fn users_text() -> String {
    static ANN_HASH: LazyLock<String> = LazyLock::new(|| {
        let hash = crate::security::password::hash_password(ANN_PASSWORD).expect("hash a password");
        assert!(crate::security::password::verify_password(
            ANN_PASSWORD,
            &hash
        ));
        hash
    });
    format!(
        "[user \"ann\"]\npassword = {}\n\n[user \"bob\"]\npassword = {BOB_BCRYPT}\n",
        *ANN_HASH
    )
}

/// A webhook job, an interval job and a JobHttp.
const JOBS: &str = "[job \"deploy\"]\npath = /deploy\ncommand = echo deployed\n\n\
     [job \"hello\"]\ninterval = 1h\ncommand = echo hello\n\n\
     [job.http \"ping\"]\ninterval = 1h\nhttp_url = http://127.0.0.1:9/\n";

/// The test's service (with users or without): a main secret, the jobs of [`JOBS`] and
/// a public directory, which must lie outside `dir_base` (the harness keeps the main
/// file there) and lives as long as the directory returned.
fn app(users: Option<String>) -> (TestApp, tempfile::TempDir) {
    let public = tempfile::tempdir().expect("a public directory");
    std::fs::write(public.path().join("index.html"), "<p>public</p>\n").expect("index.html");
    let svc = format!("dir_public = {}", public.path().display());
    let app = match users {
        Some(users) => TestApp::with_users(&svc, JOBS, &users),
        None => TestApp::new(&svc, JOBS),
    };
    (app, public)
}

fn with_users() -> (TestApp, tempfile::TempDir) {
    app(Some(users_text()))
}

async fn get(app: &TestApp, path: &str, cookie: Option<&str>) -> Answer {
    let call = app.get(path);
    match cookie {
        Some(cookie) => call.header("cookie", cookie),
        None => call,
    }
    .send()
    .await
}

/// `POST path` with the form `pairs`, percent-encoded, and `extra` headers.
async fn login_at(
    app: &TestApp,
    path: &str,
    pairs: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> Answer {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    app.post(path).headers(extra).form(&body).send().await
}

async fn login(app: &TestApp, pairs: &[(&str, &str)], extra: &[(&str, &str)]) -> Answer {
    login_at(app, "/svc/api/login", pairs, extra).await
}

/// Logs `name` in and returns the cookie pair of its session.
async fn cookie_of(app: &TestApp, name: &str, password: &str) -> String {
    let answer = login(app, &[("name", name), ("password", password)], &[]).await;
    answer.expect_message(200, "");
    cookie_pair(answer.header("set-cookie"))
}

#[tokio::test(start_paused = true)]
async fn without_users_everything_stays_open() {
    let (app, _public) = app(None);
    get(&app, "/svc/api/environment", None)
        .await
        .expect_message(200, "");
    let page = get(&app, "/svc", None).await;
    page.expect(200);
    assert!(page.text().contains("<!DOCTYPE html>"));
    get(&app, "/svc/doc/api", None).await.expect(200);
    get(&app, "/svc/api/metrics", None).await.expect(200);
    let session = get(&app, "/svc/api/session", None).await;
    session.expect_message(200, "");
    assert_eq!(session.data()["login"], false);
    assert_eq!(session.data()["name"], Value::Null);
    login(&app, &[("name", "ann"), ("password", ANN_PASSWORD)], &[])
        .await
        .expect_message(404, "login is not enabled");
    let logout = app.post("/svc/api/logout").send().await;
    logout.expect_message(404, "login is not enabled");
    let page = get(&app, "/svc/login", None).await;
    page.expect(303);
    assert_eq!(page.header("location"), "/svc/");
}

#[tokio::test(start_paused = true)]
async fn without_a_session_api_calls_are_refused_and_pages_sent_to_the_login() {
    let (app, _public) = with_users();
    // API calls in the wrapper, pages by a redirect.
    for path in [
        "/svc/api/environment",
        "/svc/api/job_exec/log?id=hello&counter=1",
        "/svc/api/job/log?id=hello&counter=1",
        "/svc/api/job_exec/log/stream?id=hello&counter=1",
        "/svc/api/events",
        "/svc/api/job_http?id=ping",
        "/svc/api/job_http/logs?id=ping",
        "/svc/api/metrics",
        "/svc/api/session",
        "/svc/api/nothing-here",
    ] {
        let answer = get(&app, path, None).await;
        answer.expect_message(401, "login required");
        assert!(
            answer
                .header("content-type")
                .starts_with("application/json")
        );
        assert_eq!(answer.header("cache-control"), "no-store", "{path}");
    }
    for (path, next) in [
        ("/svc", "%2Fsvc"),
        ("/svc/", "%2Fsvc%2F"),
        ("/svc/doc/api", "%2Fsvc%2Fdoc%2Fapi"),
    ] {
        let answer = get(&app, path, None).await;
        answer.expect(303);
        assert_eq!(
            answer.header("location"),
            format!("/svc/login?next={next}"),
            "{path}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn assets_the_login_page_and_the_public_directory_need_no_session() {
    let (app, _public) = with_users();
    let css = get(&app, "/svc/assets/app.css", None).await;
    css.expect(200);
    assert!(css.header("content-type").starts_with("text/css"));
    // login.js and the module it imports, before any session.
    for module in ["/svc/assets/login.js", "/svc/assets/api.js"] {
        let answer = get(&app, module, None).await;
        answer.expect(200);
        assert!(answer.header("content-type").starts_with("text/javascript"));
    }
    let page = get(&app, "/svc/login", None).await;
    page.expect(200);
    assert!(page.text().contains("id=\"login-form\""));
    assert!(page.text().contains("/svc/assets/login.js"));
    assert!(!page.text().contains("<script>"), "no inline script");
    assert!(
        page.header("content-security-policy")
            .contains("script-src 'self'")
    );
    let public = get(&app, "/index.html", None).await;
    public.expect(200);
    assert!(public.text().contains("public"));
}

#[tokio::test(start_paused = true)]
async fn a_login_sets_the_session_cookie_and_logs_neither_token_nor_password() {
    let (logs, _capture) = Logs::capture();
    let (app, _public) = with_users();
    // Wrong password and unknown name: the same answer, no cookie.
    for (name, password) in [("ann", "wrong"), ("nobody", ANN_PASSWORD)] {
        let answer = login(&app, &[("name", name), ("password", password)], &[]).await;
        answer.expect_message(401, "invalid name or password");
        assert!(answer.headers.get("set-cookie").is_none());
    }
    login(&app, &[("name", "ann")], &[])
        .await
        .expect_message(400, "name and password are required");

    // The right password (after the failures' growing delay, which the server waits out).
    let form = [
        ("name", "ann"),
        ("password", ANN_PASSWORD),
        ("next", "/svc/#/job/hello"),
    ];
    let answer = login(&app, &form, &[]).await;
    answer.expect_message(200, "");
    assert_eq!(answer.data()["name"], "ann");
    assert_eq!(answer.data()["next"], "/svc/#/job/hello");
    let set_cookie = answer.header("set-cookie").to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/svc", "Max-Age=43200"] {
        assert!(set_cookie.contains(attribute), "{attribute}: {set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "{set_cookie}");
    let cookie = cookie_pair(&set_cookie);
    let token = cookie.strip_prefix("svc_session=").expect("svc_session");
    assert_eq!(token.len(), 64, "{cookie}");
    let logged = logs.text();
    assert!(logged.contains("login"), "the login is logged: {logged}");
    assert!(!logged.contains(token), "the token is not logged");
    assert!(!logged.contains(ANN_PASSWORD), "the password is not logged");
}

#[tokio::test(start_paused = true)]
async fn with_the_cookie_everything_answers() {
    let (app, _public) = with_users();
    let pair = cookie_of(&app, "ann", ANN_PASSWORD).await;
    let cookie = Some(pair.as_str());
    let environment = get(&app, "/svc/api/environment", cookie).await;
    environment.expect_message(200, "");
    assert!(environment.data()["jobs"]["deploy"].is_object());
    let session = get(&app, "/svc/api/session", cookie).await;
    session.expect_message(200, "");
    assert_eq!(session.data()["login"], true);
    assert_eq!(session.data()["name"], "ann");
    get(&app, "/svc", cookie).await.expect(200);
    get(&app, "/svc/doc/api", cookie).await.expect(200);
    get(&app, "/svc/api/metrics", cookie).await.expect(200);
    get(&app, "/svc/api/job_http?id=ping", cookie)
        .await
        .expect_message(200, "");
    let other = format!("theme=dark; {pair}");
    get(&app, "/svc/api/environment", Some(&other))
        .await
        .expect_message(200, "");
}

#[tokio::test(start_paused = true)]
async fn a_bcrypt_user_logs_in_and_forwarded_proto_is_not_believed_from_anyone() {
    let (app, _public) = with_users();
    // X-Forwarded-Proto is believed only from a trusted proxy (none here: see
    // roles_tests.rs for one), so no Secure cookie.
    let bob = login(
        &app,
        &[("name", "bob"), ("password", "password")],
        &[("x-forwarded-proto", "https")],
    )
    .await;
    bob.expect_message(200, "");
    assert_eq!(bob.data()["next"], "/svc/", "no next: the dashboard");
    assert!(!bob.header("set-cookie").contains("Secure"));
}

#[tokio::test(start_paused = true)]
async fn a_logout_clears_its_cookie_and_ends_its_session_only() {
    let (app, _public) = with_users();
    let cookie = cookie_of(&app, "ann", ANN_PASSWORD).await;
    let bob_cookie = cookie_of(&app, "bob", "password").await;
    let logout = app
        .post("/svc/api/logout")
        .header("cookie", &cookie)
        .send()
        .await;
    logout.expect_message(200, "");
    let cleared = logout.header("set-cookie");
    assert!(cleared.starts_with("svc_session=;"), "{cleared}");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    get(&app, "/svc/api/environment", Some(&cookie))
        .await
        .expect_message(401, "login required");
    // Other sessions go on.
    get(&app, "/svc/api/environment", Some(&bob_cookie))
        .await
        .expect_message(200, "");
    // A made-up token is refused like none.
    let fake = format!("svc_session={}", "0".repeat(64));
    get(&app, "/svc/api/environment", Some(&fake))
        .await
        .expect_message(401, "login required");
}

/// Upstream's clients log in at `/svc/api/auth/login`; the same call answers there.
#[tokio::test(start_paused = true)]
async fn upstreams_login_path_is_served_too() {
    let (app, _public) = with_users();
    let path = "/svc/api/auth/login";
    let refused = login_at(&app, path, &[("name", "ann"), ("password", "no")], &[]).await;
    refused.expect_message(401, "invalid name or password");
    assert_eq!(refused.json()["name"], "ERR_UNAUTHORIZED");
    let form = [("name", "ann"), ("password", ANN_PASSWORD)];
    let answer = login_at(&app, path, &form, &[]).await;
    answer.expect_message(200, "");
    assert_eq!(answer.data()["name"], "ann");
    let cookie = cookie_pair(answer.header("set-cookie"));
    get(&app, "/svc/api/environment", Some(&cookie))
        .await
        .expect_message(200, "");
}

#[tokio::test(start_paused = true)]
async fn webhooks_and_signed_calls_need_no_login() {
    let (app, _public) = with_users();
    let body = r#"{"ref":"main"}"#;
    let signature = sign(body);
    let trigger = |path: &str, signature: &str| {
        app.post(path)
            .header("x-svc-sign", signature)
            .body(body)
            .send()
    };
    trigger("/svc/api/job/run/deploy", &signature)
        .await
        .expect(200);
    // Legacy and later trigger paths too (the job may still be busy: 200 or 429, never 401).
    for path in ["/svc/job/deploy", "/svc/api/job_exec/run/deploy"] {
        let answer = trigger(path, &signature).await;
        assert!(
            answer.status == 200 || answer.status == 429,
            "{path}: {}",
            answer.text()
        );
    }
    // A bad signature is still refused, by the signature check.
    let refused = trigger("/svc/api/job/run/deploy", "00").await;
    refused.expect(401);
    assert_ne!(refused.message(), "login required");

    let paused = app
        .signed_form("/svc/api/job_exec/pause", "hello", fresh_epoch())
        .await;
    paused.expect(200);
    assert_eq!(paused.data()["status"], "paused");
    app.signed_form("/svc/api/job_exec/resume", "hello", fresh_epoch())
        .await
        .expect(200);

    let query = "id=ping";
    for action in ["pause", "resume"] {
        app.post(&format!("/svc/api/job_http/{action}?{query}"))
            .header("x-svc-sign", &sign(query))
            .send()
            .await
            .expect(200);
    }
}

/// Password guesses for one account from 120 addresses slow that account down (429
/// with Retry-After), and do not touch another user's login: there is no global cap
/// for an attacker to fill. The throttle's waits pass on the paused clock.
#[tokio::test(start_paused = true)]
async fn guesses_from_many_addresses_slow_their_account_and_no_other() {
    let (app, _public) = with_users();
    let guess = login_form("ann", "wrong guess");
    let mut refused = 0;
    for i in 1..=120u8 {
        let call = app.post("/svc/api/login").peer([127, 0, 1, i]);
        let answer = call.form(&guess).send().await;
        match answer.status {
            401 => {}
            429 => {
                assert!(
                    answer.headers.get("retry-after").is_some(),
                    "{}",
                    answer.text()
                );
                refused += 1;
            }
            other => panic!("guess {i}: status {other}: {}", answer.text()),
        }
    }
    assert!(
        refused >= 100,
        "the account is slowed down: {refused} refused"
    );
    let bob = login_form("bob", "password");
    let before = tokio::time::Instant::now();
    let answer = app
        .post("/svc/api/login")
        .peer([127, 0, 2, 1])
        .form(&bob)
        .send()
        .await;
    assert_eq!(answer.status, 200, "bob logs in: {}", answer.text());
    assert_eq!(before.elapsed(), Duration::ZERO, "at once");
    // Also from an address the attacker used.
    let answer = app
        .post("/svc/api/login")
        .peer([127, 0, 1, 7])
        .form(&bob)
        .send()
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
}
