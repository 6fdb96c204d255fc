//! The `Origin` check, against the real binary: a browser's request that changes
//! something (login, logout, an action done with a session) and names another site in
//! `Origin` is refused with 403 before it does anything, while requests without `Origin`
//! (curl, API clients), webhook deliveries and signed calls go on whatever their
//! `Origin`; `https` is the service's own scheme only on a trusted proxy's word.

use svc_tests::web::{Answer, client, send, write_user_conf};
use svc_tests::{TestService, hmac_sha256_hex, job_section};

/// A bcrypt hash (cost 4, cheap to check) of `PASSWORD`, made by another tool.
const HASH: &str = "$2a$04$UuTkLRZZ6QofpDOlMz32MuuxEHA43WOemOYHPz6.SjsVsyO1tDU96";
const PASSWORD: &str = "password";
/// The GitHub-style job's own secret.
const HOOK_SECRET: &str = "hook-secret";
/// Start of the message of a refused cross-origin request.
const REFUSED: &str = "cross-origin request refused";
/// Another site, as a browser names it.
const EVIL: &str = "http://evil.example";

/// A service with one operator, `otto`, a timer job `hello` and a GitHub-style webhook
/// job `hook`; `svc` lines added.
async fn start(svc: &[&str]) -> TestService {
    let mut builder = TestService::builder().job_file(
        "jobs",
        [
            job_section("hello", &["schedule = 0 0 1 1 *", "command = echo hello"]),
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
    );
    for line in svc {
        builder = builder.svc(*line);
    }
    write_user_conf(
        builder.dir_base(),
        &format!("[user \"otto\"]\npassword = {HASH}\nrole = operator\n"),
        0o600,
    );
    let mut service = builder.build();
    service.start_answering("/svc/api/session", 401).await;
    service
}

/// `POST path` with `body` (a form) and `headers`.
async fn post(service: &TestService, path: &str, body: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = client()
        .post(format!("{}{path}", service.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string());
    for (key, value) in headers {
        request = request.header(*key, *value);
    }
    send(request).await
}

/// Logs `otto` in with `headers`.
async fn login(service: &TestService, headers: &[(&str, &str)]) -> Answer {
    let body = format!("name=otto&password={PASSWORD}");
    post(service, "/svc/api/login", &body, headers).await
}

#[track_caller]
fn assert_refused(answer: &Answer) {
    answer.expect(403);
    assert!(answer.message().starts_with(REFUSED), "{}", answer.raw);
    assert_eq!(
        answer.header("set-cookie"),
        "",
        "no session for a refused login"
    );
}

/// The session cookie and CSRF token of a successful login.
async fn session_of(service: &TestService, answer: &Answer) -> (String, String) {
    answer.expect(200);
    let cookie = answer
        .header("set-cookie")
        .split(';')
        .next()
        .expect("a cookie pair")
        .to_string();
    let session = send(
        client()
            .get(format!("{}/svc/api/session", service.base_url()))
            .header("cookie", &cookie),
    )
    .await;
    session.expect(200);
    let csrf = session.data()["csrf"].as_str().expect("a csrf token");
    (cookie, csrf.to_string())
}

/// `status` of the Job `id`, read with the session `cookie`.
async fn job_status(service: &TestService, cookie: &str, id: &str) -> String {
    let env = send(
        client()
            .get(format!("{}/svc/api/environment", service.base_url()))
            .header("cookie", cookie),
    )
    .await;
    env.expect(200);
    let found = env.data()["jobs"]
        .as_object()
        .and_then(|jobs| jobs.values().find(|job| job["id"] == id))
        .unwrap_or_else(|| panic!("no job {id} in {}", env.raw));
    found["status"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_login_or_an_action_posted_from_another_site_is_refused() {
    let service = start(&[]).await;
    let own = service.base_url();
    // Login CSRF: another site's form logging the browser in. Refused, whatever the
    // route spelling; so are an opaque origin and the service on another port.
    let port: u16 = service
        .listen_address()
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("a port");
    let other_port = format!("http://127.0.0.1:{}", port.wrapping_add(1));
    for origin in [
        EVIL,
        "null",
        &other_port,
        &own.replace("http://", "https://"),
    ] {
        assert_refused(&login(&service, &[("origin", origin)]).await);
    }
    let body = format!("name=otto&password={PASSWORD}");
    assert_refused(&post(&service, "/svc/api/auth/login", &body, &[("origin", EVIL)]).await);
    // The service's own page, and a client that sends no Origin, log in.
    let (cookie, csrf) = session_of(&service, &login(&service, &[("origin", &own)]).await).await;
    let (cookie2, _) = session_of(&service, &login(&service, &[]).await).await;

    // An action with the session, even with its CSRF token: refused from another site,
    // and the job stays as it was.
    let session = [("cookie", cookie.as_str()), ("x-svc-csrf", csrf.as_str())];
    let foreign: Vec<(&str, &str)> = session.iter().copied().chain([("origin", EVIL)]).collect();
    assert_refused(&post(&service, "/svc/api/job_exec/pause", "id=hello", &foreign).await);
    assert_ne!(job_status(&service, &cookie, "hello").await, "paused");
    let own_page: Vec<(&str, &str)> = session
        .iter()
        .copied()
        .chain([("origin", own.as_str())])
        .collect();
    post(&service, "/svc/api/job_exec/pause", "id=hello", &own_page)
        .await
        .expect(200);
    assert_eq!(job_status(&service, &cookie, "hello").await, "paused");

    // Logout CSRF: refused, the session lives on; from the service's page it ends.
    let logout = [("cookie", cookie2.as_str()), ("origin", EVIL)];
    assert_refused(&post(&service, "/svc/api/logout", "", &logout).await);
    let alive = send(
        client()
            .get(format!("{}/svc/api/session", service.base_url()))
            .header("cookie", &cookie2),
    )
    .await;
    alive.expect(200);
    let logout = [("cookie", cookie2.as_str()), ("origin", own.as_str())];
    post(&service, "/svc/api/logout", "", &logout)
        .await
        .expect(200);
}

#[tokio::test]
async fn webhooks_and_signed_calls_are_judged_by_their_signature() {
    let service = start(&[]).await;
    // A code host sends no Origin, but a delivery relayed by a browser-like client may:
    // the signature is what counts.
    let payload = br#"{"ref":"refs/heads/main"}"#;
    let signature = format!("sha256={}", hmac_sha256_hex(HOOK_SECRET, payload));
    let delivery = send(
        client()
            .post(format!("{}/svc/api/job/run/hook", service.base_url()))
            .header("content-type", "application/json")
            .header("x-github-event", "push")
            .header("x-github-delivery", "origin-test-1")
            .header("x-hub-signature-256", &signature)
            .header("origin", EVIL)
            .body(payload.to_vec()),
    )
    .await;
    delivery.expect(200);
    // A signed pause from anywhere: accepted.
    let (body, signature) = service.job_exec_form("hello");
    let headers = [("x-svc-sign", signature.as_str()), ("origin", EVIL)];
    post(&service, "/svc/api/job_exec/pause", &body, &headers)
        .await
        .expect(200);
    let (cookie, _) = session_of(&service, &login(&service, &[]).await).await;
    assert_eq!(job_status(&service, &cookie, "hello").await, "paused");
}

#[tokio::test]
async fn https_is_the_services_scheme_only_behind_a_trusted_proxy() {
    let https_own = |service: &TestService| service.base_url().replace("http://", "https://");
    // Without trusted_proxies anyone could send X-Forwarded-Proto: not believed.
    let service = start(&[]).await;
    let origin = https_own(&service);
    let headers = [("origin", origin.as_str()), ("x-forwarded-proto", "https")];
    assert_refused(&login(&service, &headers).await);
    drop(service);

    // Behind a trusted TLS proxy the page the user sees is https.
    let service = start(&["trusted_proxies = 127.0.0.1"]).await;
    let origin = https_own(&service);
    let headers = [("origin", origin.as_str()), ("x-forwarded-proto", "https")];
    login(&service, &headers).await.expect(200);
    let own = service.base_url();
    let headers = [("origin", own.as_str()), ("x-forwarded-proto", "https")];
    assert_refused(&login(&service, &headers).await);
}
