//! The HTTP side of the optional login ([`crate::login`] is the service): the calls
//! `POST /svc/api/login`, `POST /svc/api/logout` and `GET /svc/api/session`, and the
//! answers of the front's access check (a 303 to the login page, or 401 `login required`).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{ApiError, AppState, ok};
use crate::login::{
    Access, ClientKey, Login, Refusal, cleared_cookie, guard, safe_next, session_cookie,
    session_cookies,
};

/// Largest body of `POST /svc/api/login`.
pub(super) const LOGIN_BODY_LIMIT: usize = 16 * 1024;

/// Message of a failed login, whether the name exists or not.
pub(super) const INVALID_LOGIN: &str = "invalid name or password";
/// Message of a request that needs a session and has none.
pub(super) const LOGIN_REQUIRED: &str = "login required";
/// Message of the login calls when `user.conf` names no user.
pub(super) const LOGIN_NOT_ENABLED: &str = "login is not enabled";

/// The name of the user of a request that passed the access check with a session (a
/// request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CurrentUser(pub(super) String);

/// The access check of the front ([`super::App`]) for a request whose route needs a
/// session: `None` when it goes on (with its user in the [`CurrentUser`] extension when it
/// has a session), else the answer to send instead of routing it.
pub(super) fn check(login: &Login, request: &mut Request) -> Option<Response> {
    match guard(login, request.method(), request.uri(), request.headers()) {
        Access::Open => None,
        Access::User(user) => {
            request.extensions_mut().insert(CurrentUser(user));
            None
        }
        Access::LoginFirst { location } => {
            let mut response = StatusCode::SEE_OTHER.into_response();
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            Some(no_store(response))
        }
        Access::Refused => Some(no_store(
            ApiError::unauthorized(LOGIN_REQUIRED).into_response(),
        )),
    }
}

/// The throttle's key of a request: its peer address, when the server recorded it as
/// `ConnectInfo<SocketAddr>` (see `server.rs`).
fn client_key(request: &Request) -> ClientKey {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(ClientKey::Unknown, |info| ClientKey::from_addr(info.0.ip()))
}

/// True when a proxy in front says the request came over https.
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `POST /svc/api/login`, form `name=&password=&next=`.
pub(super) async fn login(State(state): State<AppState>, request: Request) -> Response {
    if !state.login.enabled() {
        return ApiError::not_found(LOGIN_NOT_ENABLED).into_response();
    }
    let client = client_key(&request);
    let secure = forwarded_https(request.headers());
    let Ok(body) = axum::body::to_bytes(request.into_body(), LOGIN_BODY_LIMIT).await else {
        return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")
            .into_response();
    };
    let mut name = String::new();
    let mut password = String::new();
    let mut next = String::new();
    for (key, value) in form_urlencoded::parse(&body) {
        match key.as_ref() {
            "name" => name = value.into_owned(),
            "password" => password = value.into_owned(),
            "next" => next = value.into_owned(),
            _ => {}
        }
    }
    if name.is_empty() || password.is_empty() {
        return ApiError::bad_request("name and password are required").into_response();
    }
    match state.login.attempt(client, &name, &password).await {
        Ok(()) => {
            let token = state.login.create_session(&name);
            tracing::info!(user = %name, %client, "login");
            let mut response = ok(json!({ "name": name, "next": safe_next(&next) }));
            if let Ok(cookie) = HeaderValue::from_str(&session_cookie(&token, secure)) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            no_store(response)
        }
        Err(Refusal::Invalid { known }) => {
            if known {
                tracing::warn!(user = %name, %client, "failed login: wrong password");
            } else {
                tracing::warn!(%client, "failed login: unknown name");
            }
            no_store(ApiError::unauthorized(INVALID_LOGIN).into_response())
        }
        Err(Refusal::Busy) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "another login attempt from this address is in progress",
        )
        .into_response(),
        Err(Refusal::TooMany { retry_after }) => {
            let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            tracing::warn!(%client, "login refused: too many failed logins");
            let mut response = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("too many failed logins; try again in {secs} s"),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            response
        }
    }
}

/// `POST /svc/api/logout`: ends the session of the cookie and clears the cookie.
pub(super) async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if !state.login.enabled() {
        return ApiError::not_found(LOGIN_NOT_ENABLED).into_response();
    }
    for token in session_cookies(&headers) {
        if let Some(user) = state.login.end_session(token) {
            tracing::info!(%user, "logout");
        }
    }
    let mut response = ok(serde_json::Value::Null);
    if let Ok(cookie) = HeaderValue::from_str(&cleared_cookie(forwarded_https(&headers))) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    no_store(response)
}

/// `GET /svc/api/session`: `{"login": false, "name": null}` without users; with users
/// `{"login": true, "name": <user>}` (the access check answers 401 without a session).
pub(super) async fn session(State(state): State<AppState>, request: Request) -> Response {
    if !state.login.enabled() {
        return no_store(ok(json!({ "login": false, "name": null })));
    }
    match request.extensions().get::<CurrentUser>() {
        Some(CurrentUser(name)) => no_store(ok(json!({ "login": true, "name": name }))),
        None => no_store(ApiError::unauthorized(LOGIN_REQUIRED).into_response()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_is_taken_from_x_forwarded_proto() {
        let mut headers = HeaderMap::new();
        assert!(!forwarded_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("HTTPS"));
        assert!(forwarded_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https, http"));
        assert!(forwarded_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
        assert!(!forwarded_https(&headers));
    }

    /// The server records the peer as `ConnectInfo` with this wrapping (see
    /// `http/server.rs`); the throttle then keys on it.
    #[tokio::test]
    async fn the_peer_address_recorded_by_the_server_is_the_client_key() {
        use tower::ServiceExt as _;
        async fn key(request: Request) -> String {
            client_key(&request).to_string()
        }
        let app: axum::Router = axum::Router::new().route("/", axum::routing::get(key));
        let peer: SocketAddr = "192.0.2.1:4242".parse().expect("address");
        let service = tower::Layer::layer(&axum::Extension(ConnectInfo(peer)), app.clone());
        let request = || {
            axum::http::Request::builder()
                .uri("/")
                .body(axum::body::Body::empty())
                .expect("request")
        };
        let response = service.oneshot(request()).await.expect("response");
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .expect("body");
        assert_eq!(&body[..], b"192.0.2.1");
        // Without it every client is one.
        let response = app.oneshot(request()).await.expect("response");
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .expect("body");
        assert_eq!(&body[..], b"unknown");
    }
}
