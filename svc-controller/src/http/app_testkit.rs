//! An in-process client over [`super::router`]: the real routes, access rules and
//! answers, over an engine of [`crate::engine::testkit`] (fake runs, a manual clock) on a
//! temporary `dir_base`. No process, no socket: for the tests of what the API answers,
//! which need neither.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt as _;
use proto::redact::Secret;
use serde_json::Value;
use tower::ServiceExt as _;

use super::{App, AppState, BodyBudget, WEBHOOK_BODY_LIMIT, router};
use crate::engine::testkit::Harness;

/// The main secret the test app signs with.
pub const SECRET: &str = "in-process test secret";

/// The router over a test engine.
pub struct TestApp {
    pub harness: Harness,
    app: App,
}

/// An answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

/// A logged-in user: the session cookie (`name=value`) and the session's CSRF token.
#[derive(Debug, Clone)]
pub struct Session {
    pub cookie: String,
    pub csrf: String,
}

impl Answer {
    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The JSON wrapper, after checking that the status is `status` and that the
    /// wrapper's `code` says the same.
    pub fn wrapper(&self, status: u16) -> Value {
        let json = self.json();
        assert_eq!(self.status, status, "status: {}", self.text());
        assert_eq!(json["code"], status, "the wrapper's code: {}", self.text());
        json
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The wrapper's `message`.
    pub fn message(&self) -> String {
        self.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A header's value, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

impl TestApp {
    /// `svc` holds extra lines of the `[svc]` section, `jobs` the job sections.
    pub fn new(svc: &str, jobs: &str) -> TestApp {
        TestApp::over(Harness::new(svc, jobs))
    }

    /// Like [`TestApp::new`], with `users` as `user.conf`: login and roles are on.
    pub fn with_users(svc: &str, jobs: &str, users: &str) -> TestApp {
        TestApp::over(Harness::with_files(
            svc,
            jobs,
            &[("etc/svc/user.conf", users)],
        ))
    }

    fn over(harness: Harness) -> TestApp {
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
        let state = AppState::new(
            harness.engine.clone(),
            Secret::new(SECRET.to_string()),
            replay,
            Arc::new(crate::access::login::Login::new(&harness.config().users)),
            BodyBudget::new(main.max_body_in_flight, WEBHOOK_BODY_LIMIT as u64),
            audit,
            reload,
        );
        TestApp {
            harness,
            app: router(state),
        }
    }

    /// Sends `method path` with `headers` and `body` from a loopback client.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "127.0.0.1");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut request = request.body(body.into()).expect("a request");
        let peer: SocketAddr = ([127, 0, 0, 1], 40_000).into();
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let response = self
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

    /// `POST path` with a form `body`, signed with `signature` when given.
    pub async fn post_form(&self, path: &str, body: &str, signature: Option<&str>) -> Answer {
        let mut headers = vec![("content-type", "application/x-www-form-urlencoded")];
        if let Some(signature) = signature {
            headers.push(("X-Svc-Sign", signature));
        }
        self.send("POST", path, &headers, body.to_string()).await
    }

    /// Logs `name` in with `password` and reads the session's CSRF token.
    pub async fn login(&self, name: &str, password: &str) -> Session {
        let form = format!("name={name}&password={password}");
        let answer = self
            .send(
                "POST",
                "/svc/api/login",
                &[("content-type", "application/x-www-form-urlencoded")],
                form,
            )
            .await;
        answer.wrapper(200);
        let cookie = answer
            .header("set-cookie")
            .and_then(|value| value.split(';').next())
            .expect("a session cookie")
            .trim()
            .to_string();
        let session = self
            .as_user("GET", "/svc/api/session", Some(&cookie), None, "")
            .await;
        let data = &session.wrapper(200)["data"];
        assert_eq!(data["name"], name, "{}", session.text());
        let csrf = data["csrf"].as_str().expect("a CSRF token").to_string();
        Session { cookie, csrf }
    }

    /// `method path` with a form `body`, the session `cookie` and the CSRF token `csrf`
    /// when given.
    pub async fn as_user(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        csrf: Option<&str>,
        body: &str,
    ) -> Answer {
        let mut headers = vec![("content-type", "application/x-www-form-urlencoded")];
        if let Some(cookie) = cookie {
            headers.push(("cookie", cookie));
        }
        if let Some(csrf) = csrf {
            headers.push(("x-svc-csrf", csrf));
        }
        self.send(method, path, &headers, body.to_string()).await
    }

    /// `POST path` with `session`'s cookie and CSRF token.
    pub async fn post_as(&self, session: &Session, path: &str, body: &str) -> Answer {
        self.as_user(
            "POST",
            path,
            Some(&session.cookie),
            Some(&session.csrf),
            body,
        )
        .await
    }

    /// `GET path` with `session`'s cookie.
    pub async fn get_as(&self, session: &Session, path: &str) -> Answer {
        self.as_user("GET", path, Some(&session.cookie), None, "")
            .await
    }

    /// `POST path` with the form `_svc_epoch=<epoch>&id=<id>` signed with [`SECRET`].
    pub async fn signed_form(&self, path: &str, id: &str, epoch: i64) -> Answer {
        let body = format!("_svc_epoch={epoch}&id={id}");
        self.post_form(path, &body, Some(&sign(&body))).await
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
