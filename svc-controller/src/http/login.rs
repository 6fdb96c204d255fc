//! The HTTP side of the optional login ([`crate::access::login`] is the service): the calls
//! `POST /svc/api/login`, `POST /svc/api/logout` and `GET /svc/api/session` (who is
//! logged in, with which role, and the session's CSRF token), and the answers of the
//! front's access check (a 303 to the login page, or 401 `login required`). Logins,
//! failed logins and logouts go to the audit log.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::access::{Client, no_store, record_status};
use super::{ApiError, AppState, ok};
use crate::access::audit::{self, Actor};
use crate::access::login::{
    Access, ClientKey, Login, Refusal, SessionInfo, cleared_cookie, guard, safe_next,
    session_cookie, session_cookies,
};

/// Largest body of `POST /svc/api/login`.
pub(super) const LOGIN_BODY_LIMIT: usize = 16 * 1024;

/// Message of a failed login, whether the name exists or not.
pub(super) const INVALID_LOGIN: &str = "invalid name or password";
/// Message of a request that needs a session and has none.
pub(super) const LOGIN_REQUIRED: &str = "login required";
/// Message of the login calls when `user.conf` names no user.
pub(super) const LOGIN_NOT_ENABLED: &str = "login is not enabled";

/// The session of a request that passed the access check with one (a request
/// extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CurrentUser(pub(super) SessionInfo);

/// The access check of the front ([`super::App`]) for a request whose route needs a
/// session: `None` when it goes on (with its user in the [`CurrentUser`] extension when it
/// has a session), else the answer to send instead of routing it.
pub(super) fn check(login: &Login, public_read: bool, request: &mut Request) -> Option<Response> {
    match guard(
        login,
        public_read,
        request.method(),
        request.uri(),
        request.headers(),
    ) {
        Access::Open | Access::Anonymous => None,
        Access::User(session) => {
            request.extensions_mut().insert(CurrentUser(session));
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

/// The throttle's key of a client: its address (the peer's, or the one a trusted proxy
/// forwarded for), when the server recorded the peer (see `server.rs`).
fn client_key(client: &Client) -> ClientKey {
    client
        .address
        .map_or(ClientKey::Unknown, ClientKey::from_addr)
}

/// `POST /svc/api/login`, form `name=&password=&next=`.
pub(super) async fn login(State(state): State<AppState>, request: Request) -> Response {
    if !state.login.enabled() {
        return ApiError::not_found(LOGIN_NOT_ENABLED).into_response();
    }
    let caller = Client::of(request.extensions(), request.headers(), &state);
    let client = client_key(&caller);
    let secure = caller.forwarded_https(request.headers());
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
            let actor = Actor::Account { name: name.clone() };
            record_status(
                &state,
                &caller,
                actor,
                audit::Action::Login,
                None,
                StatusCode::OK,
                "",
            );
            let mut response = ok(json!({ "name": name, "next": safe_next(&next) }));
            if let Ok(cookie) = HeaderValue::from_str(&session_cookie(&token, secure)) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            no_store(response)
        }
        Err(Refusal::Invalid { known }) => {
            if known {
                // Someone tried an account's password: an audit entry (the throttle
                // bounds how many one address can cause).
                tracing::warn!(user = %name, %client, "failed login: wrong password");
                record_status(
                    &state,
                    &caller,
                    Actor::Account { name: name.clone() },
                    audit::Action::LoginFailed,
                    None,
                    StatusCode::UNAUTHORIZED,
                    INVALID_LOGIN,
                );
            } else {
                // The name is recorded nowhere (it may be a password typed into the
                // wrong field), and the attempt is counted rather than audited: it
                // names nobody, and anyone can send it.
                tracing::warn!(%client, "failed login: unknown name");
                crate::metrics::unauthenticated("login_unknown_name");
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
            // The password was not even checked: counted, not audited (the failed
            // logins that led here are in the audit log already).
            tracing::warn!(%client, "login refused: too many failed logins");
            crate::metrics::unauthenticated("login_throttled");
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
pub(super) async fn logout(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
) -> Response {
    if !state.login.enabled() {
        return ApiError::not_found(LOGIN_NOT_ENABLED).into_response();
    }
    for token in session_cookies(&headers) {
        if let Some(user) = state.login.end_session(token) {
            tracing::info!(%user, "logout");
            let actor = Actor::Account { name: user };
            record_status(
                &state,
                &client,
                actor,
                audit::Action::Logout,
                None,
                StatusCode::OK,
                "",
            );
        }
    }
    let mut response = ok(serde_json::Value::Null);
    if let Ok(cookie) = HeaderValue::from_str(&cleared_cookie(client.forwarded_https(&headers))) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    no_store(response)
}

/// `GET /svc/api/session`: without users `{"login": false, "name": null, "role": null,
/// "csrf": null}` (actions are signed); with users and a session `{"login": true,
/// "name", "role", "csrf"}`, the token actions done with the session carry in
/// `X-Svc-Csrf`. Without a session the access check answers 401, unless `public_read`
/// let the request in: then the fields are null.
pub(super) async fn session(State(state): State<AppState>, request: Request) -> Response {
    if !state.login.enabled() {
        return no_store(ok(
            json!({ "login": false, "name": null, "role": null, "csrf": null }),
        ));
    }
    match request.extensions().get::<CurrentUser>() {
        Some(CurrentUser(session)) => no_store(ok(json!({
            "login": true,
            "name": session.name,
            "role": session.role.as_str(),
            "csrf": session.csrf,
        }))),
        None if state.engine.main().public_read => no_store(ok(
            json!({ "login": true, "name": null, "role": null, "csrf": null }),
        )),
        None => no_store(ApiError::unauthorized(LOGIN_REQUIRED).into_response()),
    }
}
