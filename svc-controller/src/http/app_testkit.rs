//! An in-process client over [`super::router`]: the real routes, access rules and
//! answers, over an engine of [`crate::engine::testkit`] (fake runs, a manual clock) on a
//! temporary `dir_base`. No process, no socket: for the tests of what the API answers,
//! which need neither.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, Request, header};
use http_body_util::BodyExt as _;
use proto::redact::Secret;
use serde_json::Value;
use tower::ServiceExt as _;

use super::{App, AppState, BodyBudget, WEBHOOK_BODY_LIMIT, router};
use crate::access::login::Login;
use crate::config::UserConfig;
use crate::engine::testkit::Harness;
use crate::util::lock::MutexExt as _;

/// The main secret the test app signs with.
pub const SECRET: &str = "in-process test secret";

/// The peer of a request unless [`Call::peer`] names another: a loopback client.
pub const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// The router over a test engine.
#[derive(Debug)]
pub struct TestApp {
    /// The engine under the router, its fake runs and its clock.
    pub harness: Harness,
    app: App,
}

/// An answer, read whole.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The answer's headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The JSON wrapper, after checking that the status is `status` and that the
    /// wrapper's `code` says the same.
    #[track_caller]
    pub fn wrapper(&self, status: u16) -> Value {
        let json = self.json();
        assert_eq!(self.status, status, "status: {}", self.text());
        assert_eq!(json["code"], status, "the wrapper's code: {}", self.text());
        json
    }

    /// Asserts the status, whatever the body.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Answer {
        assert_eq!(self.status, status, "status: {}", self.text());
        self
    }

    /// Asserts the status and the JSON wrapper's code and message.
    #[track_caller]
    pub fn expect_message(&self, status: u16, message: &str) -> &Answer {
        let json = self.wrapper(status);
        assert_eq!(json["message"], message, "{}", self.text());
        self
    }

    /// The wrapper's message (empty when there is none).
    pub fn message(&self) -> String {
        self.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The wrapper's data.
    pub fn data(&self) -> Value {
        self.json()["data"].clone()
    }

    /// A header's value, empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A logged-in user: the session cookie (`svc_session=<token>`) and the CSRF token of
/// `GET /svc/api/session`.
#[derive(Debug, Clone)]
pub struct Session {
    /// The `Cookie` header's value.
    pub cookie: String,
    /// The session's CSRF token, for `X-Svc-Csrf`.
    pub csrf: String,
}

/// One request on its way to the router: see [`TestApp::call`]. It comes from
/// [`LOOPBACK`] with `Host: 127.0.0.1` unless told otherwise.
#[derive(Debug)]
#[must_use = "a call does nothing until it is sent"]
pub struct Call<'a> {
    app: &'a TestApp,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    peer: IpAddr,
    body: Vec<u8>,
}

impl Call<'_> {
    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Adds these headers.
    pub fn headers(self, headers: &[(&str, &str)]) -> Self {
        headers
            .iter()
            .fold(self, |call, (name, value)| call.header(name, value))
    }

    /// Sends it from `peer` (the TCP peer the server records), not [`LOOPBACK`].
    pub fn peer(mut self, peer: impl Into<IpAddr>) -> Self {
        self.peer = peer.into();
        self
    }

    /// Carries the session's cookie, without its CSRF token.
    pub fn cookie(self, session: &Session) -> Self {
        let cookie = session.cookie.clone();
        self.header("cookie", &cookie)
    }

    /// Carries the session's cookie and its CSRF token: an action done with a session.
    pub fn session(self, session: &Session) -> Self {
        let csrf = session.csrf.clone();
        self.cookie(session).header("x-svc-csrf", &csrf)
    }

    /// A form body (`application/x-www-form-urlencoded`).
    pub fn form(self, body: &str) -> Self {
        self.header("content-type", "application/x-www-form-urlencoded")
            .body(body)
    }

    /// The body, as it is.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sends it through the router and reads the whole answer.
    pub async fn send(self) -> Answer {
        let mut request = Request::builder()
            .method(self.method.as_str())
            .uri(self.path.as_str())
            .header(header::HOST, "127.0.0.1");
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let mut request = request.body(Body::from(self.body)).expect("a request");
        let peer = SocketAddr::new(self.peer, 40_000);
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let response = self
            .app
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("the router answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the body")
            .to_bytes()
            .to_vec();
        Answer {
            status,
            headers,
            body,
        }
    }
}

impl TestApp {
    /// `svc` holds extra lines of the `[svc]` section, `jobs` the job sections. No
    /// `user.conf`: login is off.
    pub fn new(svc: &str, jobs: &str) -> TestApp {
        TestApp::over(Harness::new(svc, jobs), &[])
    }

    /// As [`TestApp::new`], with `users` as `etc/svc/user.conf` (mode 0600): login and
    /// roles are on. Sessions and the failed-login throttle follow tokio's clock, so a
    /// test on a paused clock has their waits served at once.
    pub fn with_users(svc: &str, jobs: &str, users: &str) -> TestApp {
        let harness = Harness::with_files(svc, jobs, &[("etc/svc/user.conf", users)]);
        let users = harness.config().users.clone();
        assert!(!users.is_empty(), "user.conf names no user");
        TestApp::over(harness, &users)
    }

    fn over(harness: Harness, users: &[UserConfig]) -> TestApp {
        let main = harness.engine.main().clone();
        let replay = crate::access::replay::Replay::new(
            Arc::new(
                crate::access::replay::ReplayStores::open(&main.dir_replay())
                    .expect("the replay stores"),
            ),
            None,
        );
        let audit = crate::access::audit::AuditLog::start(&main.dir_logs(), main.audit_max_size)
            .expect("the audit log");
        let (reload, _) = tokio::sync::mpsc::channel(1);
        let clock: crate::access::login::Clock =
            Arc::new(|| tokio::time::Instant::now().into_std());
        let state = AppState::new(
            harness.engine.clone(),
            Secret::new(SECRET.to_string()),
            replay,
            Arc::new(Login::with_clock(users, clock)),
            BodyBudget::new(main.max_body_in_flight, WEBHOOK_BODY_LIMIT as u64),
            audit,
            reload,
        );
        TestApp {
            harness,
            app: router(state),
        }
    }

    /// A request `method path`, to add to and send.
    pub fn call(&self, method: &str, path: &str) -> Call<'_> {
        Call {
            app: self,
            method: method.to_string(),
            path: path.to_string(),
            headers: Vec::new(),
            peer: LOOPBACK,
            body: Vec::new(),
        }
    }

    /// `GET path`, to add to and send.
    pub fn get(&self, path: &str) -> Call<'_> {
        self.call("GET", path)
    }

    /// `POST path`, to add to and send.
    pub fn post(&self, path: &str) -> Call<'_> {
        self.call("POST", path)
    }

    /// Sends `method path` with `headers` and `body` from a loopback client.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        self.call(method, path)
            .headers(headers)
            .body(body)
            .send()
            .await
    }

    /// `POST path` with a form `body`, signed with `signature` when given.
    pub async fn post_form(&self, path: &str, body: &str, signature: Option<&str>) -> Answer {
        let call = self.post(path).form(body);
        match signature {
            Some(signature) => call.header("X-Svc-Sign", signature),
            None => call,
        }
        .send()
        .await
    }

    /// `POST path` with the form `_svc_epoch=<epoch>&id=<id>` signed with [`SECRET`].
    pub async fn signed_form(&self, path: &str, id: &str, epoch: i64) -> Answer {
        let body = format!("_svc_epoch={epoch}&id={id}");
        self.post_form(path, &body, Some(&sign(&body))).await
    }

    /// Logs `name` in with `password` from a loopback client and returns the session,
    /// after checking that the login succeeded.
    pub async fn login(&self, name: &str, password: &str) -> Session {
        let call = self
            .post("/svc/api/login")
            .form(&login_form(name, password));
        self.login_with(name, call).await.1
    }

    /// Sends `call`, a login of `name`, and returns its answer and the session it
    /// started, read from the `Set-Cookie` header and `GET /svc/api/session` (which
    /// must name `name` and give a CSRF token).
    pub async fn login_with(&self, name: &str, call: Call<'_>) -> (Answer, Session) {
        let answer = call.send().await;
        answer.expect(200);
        let cookie = cookie_pair(answer.header("set-cookie"));
        let session = self
            .get("/svc/api/session")
            .header("cookie", &cookie)
            .send()
            .await;
        let data = session.wrapper(200)["data"].clone();
        assert_eq!(data["name"], name, "{}", session.text());
        let csrf = data["csrf"].as_str().expect("a csrf token").to_string();
        assert_eq!(csrf.len(), 64);
        (answer, Session { cookie, csrf })
    }
}

/// The form body of a login: `name` and `password`, percent-encoded.
pub fn login_form(name: &str, password: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("name", name)
        .append_pair("password", password)
        .finish()
}

/// `svc_session=<token>` from a `Set-Cookie` value.
pub fn cookie_pair(set_cookie: &str) -> String {
    let pair = set_cookie.split(';').next().unwrap_or_default().trim();
    assert!(
        pair.starts_with("svc_session="),
        "a session cookie: {set_cookie}"
    );
    pair.to_string()
}

/// What the service logs, at every level, on the current thread while the guard lives
/// (`tracing`'s thread default): for tests on tokio's current-thread runtime, whose
/// tasks all run on the test's thread.
#[derive(Debug, Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Starts capturing; the capture ends with the guard.
    pub fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(logs.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.locked()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.locked().extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;

    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

/// An `_svc_epoch` never returned before in this process: now, or one second past the
/// last one. A control request's signature is spent, and two bodies signed within one
/// second with one epoch and ID are the same signature.
pub fn fresh_epoch() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = chrono::Utc::now().timestamp();
    let previous = LAST
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or(now);
    now.max(previous + 1)
}

/// The hex HMAC-SHA256 of `body` under [`SECRET`], as `X-Svc-Sign` carries it.
pub fn sign(body: &str) -> String {
    sign_with(SECRET, body)
}

/// The hex HMAC-SHA256 of `body` under `secret`.
pub fn sign_with(secret: &str, body: &str) -> String {
    use hmac::Mac as _;
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}
