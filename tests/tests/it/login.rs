//! The optional login, against the real binary: with a user the UI and every GET under
//! `/svc` need a session cookie while assets, the login page and the public directory do
//! not, and neither the token nor the password reaches the log; `--check` reports a bad
//! `user.conf` without showing the hash; guesses slow their account only. Login off,
//! upstream's login path and webhooks beside sessions are tested in-process over the
//! router (`svc-controller/src/http/session_tests.rs`).

use std::time::Duration;

use svc_tests::web::{Answer, client, send, write_user_conf};
use svc_tests::{EX_CONFIG, TestService, TestServiceBuilder, job_section};

/// Password of the user `ann`, whose hash the test makes with the library.
const ANN_PASSWORD: &str = "correct horse battery staple";
/// A bcrypt (`$2a$`) hash of `password` made by another tool, for the user `bob`.
const BOB_BCRYPT: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";

/// Writes `etc/svc/user.conf` below the builder's `dir_base` with `mode`.
/// `ann` (argon2id from `hash_password`) and `bob` (bcrypt).
fn users_text() -> String {
    let hash =
        svc_controller::security::password::hash_password(ANN_PASSWORD).expect("hash a password");
    assert!(svc_controller::security::password::verify_password(
        ANN_PASSWORD,
        &hash
    ));
    format!("[user \"ann\"]\npassword = {hash}\n\n[user \"bob\"]\npassword = {BOB_BCRYPT}\n")
}

/// The test's service: a main secret, a webhook job, an interval job, a JobHttp and a
/// public directory.
fn builder() -> TestServiceBuilder {
    let builder = TestService::builder()
        .svc("dir_public = public")
        .job_file(
            "jobs",
            [
                job_section("deploy", &["path = /deploy", "command = echo deployed"]),
                job_section("hello", &["interval = 1h", "command = echo hello"]),
            ]
            .join("\n"),
        )
        .job_http_file(
            "ping",
            "[job.http \"ping\"]\ninterval = 1h\nhttp_url = http://127.0.0.1:9/\n",
        );
    let public = builder.dir_base().join("public");
    std::fs::create_dir_all(&public).expect("create public");
    std::fs::write(public.join("index.html"), "<p>public</p>\n").expect("write index.html");
    builder
}

/// Starts a service whose `user.conf` names users. The harness's `start` waits for the
/// Environment to answer 200, which it no longer does without a session, so this waits
/// for the session endpoint's 401 instead.
async fn start_with_users() -> TestService {
    let builder = builder();
    write_user_conf(builder.dir_base(), &users_text(), 0o600);
    let mut service = builder.build();
    service.start_answering("/svc/api/session", 401).await;
    service
}

async fn get(service: &TestService, path: &str, cookie: Option<&str>) -> Answer {
    let mut request = client().get(format!("{}{path}", service.base_url()));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    send(request).await
}

async fn login(service: &TestService, form: &[(&str, &str)], extra: &[(&str, &str)]) -> Answer {
    login_at(service, "/svc/api/login", form, extra).await
}

async fn login_at(
    service: &TestService,
    path: &str,
    form: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> Answer {
    let body: String = form_body(form);
    let mut request = client()
        .post(format!("{}{path}", service.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    for (key, value) in extra {
        request = request.header(*key, *value);
    }
    send(request).await
}

fn form_body(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let v: String = url_encode(v);
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn url_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `svc_session=<token>` from a `Set-Cookie` value.
fn cookie_pair(set_cookie: &str) -> String {
    set_cookie
        .split(';')
        .next()
        .expect("a cookie pair")
        .trim()
        .to_string()
}

#[tokio::test]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn with_a_user_the_ui_and_the_get_api_need_a_login() {
    let service = start_with_users().await;

    // Refused without a session: API calls in the wrapper, pages by a redirect.
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
        let answer = get(&service, path, None).await;
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
        let answer = get(&service, path, None).await;
        answer.expect(303);
        assert_eq!(
            answer.header("location"),
            format!("/svc/login?next={next}"),
            "{path}"
        );
    }
    // Open: assets, the login page, the public directory.
    let css = get(&service, "/svc/assets/app.css", None).await;
    css.expect(200);
    assert!(css.header("content-type").starts_with("text/css"));
    // login.js and the module it imports, before any session.
    for module in ["/svc/assets/login.js", "/svc/assets/api.js"] {
        let answer = get(&service, module, None).await;
        answer.expect(200);
        assert!(answer.header("content-type").starts_with("text/javascript"));
    }
    let page = get(&service, "/svc/login", None).await;
    page.expect(200);
    assert!(page.raw.contains("id=\"login-form\""));
    assert!(page.raw.contains("/svc/assets/login.js"));
    assert!(!page.raw.contains("<script>"), "no inline script");
    assert!(
        page.header("content-security-policy")
            .contains("script-src 'self'")
    );
    let public = get(&service, "/index.html", None).await;
    public.expect(200);
    assert!(public.raw.contains("public"));

    // Wrong password and unknown name: the same answer, no cookie.
    for (name, password) in [("ann", "wrong"), ("nobody", ANN_PASSWORD)] {
        let answer = login(&service, &[("name", name), ("password", password)], &[]).await;
        answer.expect_message(401, "invalid name or password");
        assert!(answer.headers.get("set-cookie").is_none());
    }
    login(&service, &[("name", "ann")], &[])
        .await
        .expect_message(400, "name and password are required");

    // The right password (after the failures' growing delay, which the server waits out).
    let answer = login(
        &service,
        &[
            ("name", "ann"),
            ("password", ANN_PASSWORD),
            ("next", "/svc/#/job/hello"),
        ],
        &[],
    )
    .await;
    answer.expect_message(200, "");
    assert_eq!(answer.body["data"]["name"], "ann");
    assert_eq!(answer.body["data"]["next"], "/svc/#/job/hello");
    let set_cookie = answer.header("set-cookie").to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/svc", "Max-Age=43200"] {
        assert!(set_cookie.contains(attribute), "{attribute}: {set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "{set_cookie}");
    let cookie = cookie_pair(&set_cookie);
    let token = cookie.strip_prefix("svc_session=").expect("svc_session");
    assert_eq!(token.len(), 64, "{cookie}");
    assert!(!service.stderr().contains(token), "the token is not logged");
    assert!(
        !service.stderr().contains(ANN_PASSWORD),
        "the password is not logged"
    );

    // With the cookie: everything answers.
    let environment = get(&service, "/svc/api/environment", Some(&cookie)).await;
    environment.expect_message(200, "");
    assert!(environment.body["data"]["jobs"]["deploy"].is_object());
    let session = get(&service, "/svc/api/session", Some(&cookie)).await;
    session.expect_message(200, "");
    assert_eq!(session.body["data"]["login"], true);
    assert_eq!(session.body["data"]["name"], "ann");
    get(&service, "/svc", Some(&cookie)).await.expect(200);
    get(&service, "/svc/doc/api", Some(&cookie))
        .await
        .expect(200);
    get(&service, "/svc/api/metrics", Some(&cookie))
        .await
        .expect(200);
    get(&service, "/svc/api/job_http?id=ping", Some(&cookie))
        .await
        .expect_message(200, "");
    let other = format!("theme=dark; {cookie}");
    get(&service, "/svc/api/environment", Some(&other))
        .await
        .expect_message(200, "");

    // A second user, with a bcrypt hash. X-Forwarded-Proto is believed only from a
    // trusted proxy (none here: see rights.rs for one), so no Secure cookie.
    let bob = login(
        &service,
        &[("name", "bob"), ("password", "password")],
        &[("x-forwarded-proto", "https")],
    )
    .await;
    bob.expect_message(200, "");
    assert_eq!(bob.body["data"]["next"], "/svc/", "no next: the dashboard");
    assert!(!bob.header("set-cookie").contains("Secure"));
    let bob_cookie = cookie_pair(bob.header("set-cookie"));

    // Log out: the cookie is cleared and the old one no longer works.
    let logout = send(
        client()
            .post(format!("{}/svc/api/logout", service.base_url()))
            .header("cookie", &cookie),
    )
    .await;
    logout.expect_message(200, "");
    let cleared = logout.header("set-cookie");
    assert!(cleared.starts_with("svc_session=;"), "{cleared}");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    get(&service, "/svc/api/environment", Some(&cookie))
        .await
        .expect_message(401, "login required");
    // Other sessions go on.
    get(&service, "/svc/api/environment", Some(&bob_cookie))
        .await
        .expect_message(200, "");
    // A made-up token is refused like none.
    let fake = format!("svc_session={}", "0".repeat(64));
    get(&service, "/svc/api/environment", Some(&fake))
        .await
        .expect_message(401, "login required");
}

#[tokio::test]
async fn check_reports_a_bad_user_conf_without_the_hash() {
    let builder = builder();
    let hash = svc_controller::security::password::hash_password("x").expect("hash");
    let broken = format!("{}!", &hash[..hash.len() - 1]);
    let text =
        format!("[user \"ann\"]\npassword = {broken}\n[user \"bob\"]\npasswd = {BOB_BCRYPT}\n");
    write_user_conf(builder.dir_base(), &text, 0o600);
    let service = builder.build();
    let output = service.check().await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{stderr}");
    let file = service.dir_base().join("etc/svc/user.conf");
    let ann = stderr
        .lines()
        .find(|line| line.contains("[user \"ann\"]"))
        .unwrap_or_else(|| panic!("no line about ann:\n{stderr}"));
    assert!(ann.contains(&file.display().to_string()), "{ann}");
    assert!(ann.contains("password = \"<hash>\""), "{ann}");
    assert!(ann.contains("argon2"), "{ann}");
    let bob = stderr
        .lines()
        .find(|line| line.contains("[user \"bob\"]") && line.contains("passwd"))
        .unwrap_or_else(|| panic!("no line about bob's passwd:\n{stderr}"));
    assert!(bob.contains("unknown key"), "{bob}");
    assert!(
        !stderr.contains(&broken[30..]),
        "the hash is not shown:\n{stderr}"
    );
    assert!(
        !stderr.contains(&BOB_BCRYPT[7..]),
        "the hash is not shown:\n{stderr}"
    );

    // Readable by everyone: a warning only.
    write_user_conf(service.dir_base(), &users_text(), 0o644);
    let output = service.check().await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning:"), "{stderr}");
    assert!(stderr.contains("user.conf"), "{stderr}");
    assert!(stderr.contains("0644"), "{stderr}");
}

#[test]
fn hash_password_makes_argon2id_hashes_that_verify() {
    use svc_controller::security::password::{
        hash_password, hash_password_from_reader, verify_password,
    };
    let hash = hash_password("s3cret").expect("hash");
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(verify_password("s3cret", &hash));
    assert!(!verify_password("s3cret\n", &hash));
    let from_input = hash_password_from_reader(&b"s3cret\n"[..]).expect("hash from input");
    assert!(verify_password("s3cret", &from_input));
    assert!(hash_password_from_reader(&b"\n"[..]).is_err());
    assert!(hash_password("").is_err());
}

/// `POST /svc/api/login` from the loopback address `from` (any 127.0.0.0/8 address
/// reaches the service's 127.0.0.1).
async fn login_from(service: &TestService, from: [u8; 4], name: &str, password: &str) -> Answer {
    let client = reqwest::Client::builder()
        .no_proxy()
        .local_address(std::net::IpAddr::from(from))
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client");
    let request = client
        .post(format!("{}/svc/api/login", service.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[("name", name), ("password", password)]));
    send(request).await
}

/// Password guesses for one account from 120 addresses slow that account down (429
/// with Retry-After), and do not touch another user's login: there is no global cap
/// for an attacker to fill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guesses_from_many_addresses_slow_their_account_and_no_other() {
    let service = start_with_users().await;
    let mut refused = 0;
    for i in 1..=120u8 {
        let answer = login_from(&service, [127, 0, 1, i], "ann", "wrong guess").await;
        match answer.status {
            401 => {}
            429 => {
                assert!(
                    answer.headers.get("retry-after").is_some(),
                    "{}",
                    answer.raw
                );
                refused += 1;
            }
            other => panic!("guess {i}: status {other}: {}", answer.raw),
        }
    }
    assert!(
        refused >= 100,
        "the account is slowed down: {refused} refused"
    );
    let bob = login_from(&service, [127, 0, 2, 1], "bob", "password").await;
    assert_eq!(bob.status, 200, "bob logs in at once: {}", bob.raw);
    // Also from an address the attacker used.
    let bob = login_from(&service, [127, 0, 1, 7], "bob", "password").await;
    assert_eq!(bob.status, 200, "{}", bob.raw);
}
