//! Who a request comes from and what it may do: the client address (the TCP peer, or
//! what a trusted proxy says: [`crate::security::proxies`]), the authority of an action (the main
//! secret's signature, or a live session with its CSRF token and a role that allows the
//! action), and the audit entry of every action answered.
//!
//! An action request is judged in this order: one that carries `X-Svc-Sign` is a signed
//! request, checked by [`super::signed`] exactly as before sessions could act (API
//! clients and upstream's keep working); else one with a live session cookie needs
//! `X-Svc-Csrf` equal to the session's token (403 otherwise: a cookie alone proves
//! nothing, a page of another site can make the browser send it) and a role with the
//! right (403 with what it needs); else it is a signed request without a signature, which
//! the signature check refuses with 401 as it always did.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

use super::{ApiError, AppState};
use crate::access::audit::{self, Actor, Entry, JobRef};
use crate::engine::Kind;
use crate::security::rights::{Right, Role};

/// The header of the session's CSRF token.
pub(super) const CSRF_HEADER: &str = "x-svc-csrf";
/// Message of a session action without the right CSRF token.
pub(super) const BAD_CSRF: &str =
    "missing or wrong X-Svc-Csrf header: send the csrf token of GET /svc/api/session";

/// The client of a request, as far as the service can tell (an extractor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Client {
    /// The client's address: the peer, or the address a trusted proxy forwarded for.
    /// `None` when the server did not record the peer.
    pub(super) address: Option<IpAddr>,
    /// The peer is a trusted proxy: its `X-Forwarded-Proto` is believed.
    pub(super) via_trusted_proxy: bool,
}

impl Client {
    /// The client of a request with these extensions and headers.
    pub(super) fn of(
        extensions: &axum::http::Extensions,
        headers: &HeaderMap,
        state: &AppState,
    ) -> Client {
        Client::from_peer(peer_of(extensions), headers, state)
    }

    /// The client of a request from `peer` with these headers.
    pub(super) fn from_peer(peer: Option<IpAddr>, headers: &HeaderMap, state: &AppState) -> Client {
        let Some(peer) = peer else {
            return Client {
                address: None,
                via_trusted_proxy: false,
            };
        };
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok());
        Client {
            address: Some(state.proxies.client(peer, forwarded)),
            via_trusted_proxy: state.proxies.trusts(peer),
        }
    }

    /// The address as the audit log writes it.
    pub(super) fn shown(&self) -> Option<String> {
        self.address.map(|ip| ip.to_string())
    }

    /// True when the request came over https to a trusted proxy in front (its
    /// `X-Forwarded-Proto`); anyone else's header is not believed.
    pub(super) fn forwarded_https(&self, headers: &HeaderMap) -> bool {
        self.via_trusted_proxy && forwarded_https(headers)
    }
}

/// The TCP peer, as the server records it (`ConnectInfo`, see `server.rs`).
pub(super) fn peer_of(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip())
}

impl FromRequestParts<AppState> for Client {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Client, Infallible> {
        Ok(Client::of(&parts.extensions, &parts.headers, state))
    }
}

/// True when `X-Forwarded-Proto` says https (its first value).
pub(super) fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// What an action request is authorised by.
#[derive(Debug, Clone)]
pub(super) enum Authority {
    /// Check its `X-Svc-Sign` with the main secret (and refuse it without one).
    Signature,
    /// A live session with the right CSRF token and role.
    Session,
}

fn signs(headers: &HeaderMap) -> bool {
    headers.contains_key("x-svc-sign")
}

/// Who an action request claims to be, for its audit entry, whether or not it is then
/// allowed: see the module documentation for the order.
pub(super) fn claimed_actor(state: &AppState, headers: &HeaderMap) -> Actor {
    if signs(headers) {
        return Actor::Signed;
    }
    match state.login.session_of(headers) {
        Some(session) => Actor::Account { name: session.name },
        None => Actor::Anonymous,
    }
}

/// Decides how an action that needs `right` (described as `what`, "pause jobs") is
/// authorised; see the module documentation.
pub(super) fn authority(
    state: &AppState,
    headers: &HeaderMap,
    right: Right,
    what: &str,
) -> Result<Authority, ApiError> {
    if signs(headers) || !state.login.enabled() {
        return Ok(Authority::Signature);
    }
    let Some(session) = state.login.session_of(headers) else {
        return Ok(Authority::Signature);
    };
    let given = headers.get(CSRF_HEADER).map(|v| v.as_bytes());
    if !session.csrf_matches(given) {
        return Err(ApiError::new(StatusCode::FORBIDDEN, BAD_CSRF));
    }
    if !session.role.may(right) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            role_refusal(session.role, right, what),
        ));
    }
    Ok(Authority::Session)
}

/// "the role viewer may not pause jobs: it needs operator or admin".
pub(super) fn role_refusal(role: Role, right: Right, what: &str) -> String {
    let needed = Role::needed_for(right);
    let higher: Vec<&str> = Role::ALL
        .iter()
        .filter(|r| **r >= needed)
        .map(|r| r.as_str())
        .collect();
    format!(
        "the role {role} may not {what}: it needs {}",
        higher.join(" or ")
    )
}

/// The audit log's name of a job kind (the API's).
pub(super) fn job_ref(kind: Kind, id: &str) -> JobRef {
    JobRef {
        kind: match kind {
            Kind::Job => "job_exec",
            Kind::Http => "job_http",
        }
        .to_string(),
        id: id.to_string(),
    }
}

/// The job a request names, when its `id` is a well-formed job ID (a refused request is
/// recorded with the job it was for; anything else is left out, not echoed).
pub(super) fn named_job(kind: Kind, pairs: &[(String, String)]) -> Option<JobRef> {
    let id = super::query::job_id(super::query::param(pairs, "id")).ok()?;
    Some(job_ref(kind, id))
}

/// Runs an action (its check, its effect and its audit entry) to its end on a task of
/// its own, even when the client goes away meanwhile: the connection's handler is then
/// dropped, and with it anything it awaits, so an action whose effect happened (a
/// pause saved on a blocking thread, a reload the daemon did) would lose its entry.
/// This starts once the handler is first polled; the server's `answer` (`server.rs`)
/// covers the time before, from the moment hyper hands the request over.
pub(super) async fn to_completion(
    action: impl std::future::Future<Output = Result<Response, ApiError>> + Send + 'static,
) -> Result<Response, ApiError> {
    tokio::spawn(action)
        .await
        .unwrap_or_else(|err| Err(ApiError::internal("an action's task failed", err)))
}

/// Records the answer to an action in the audit log. A 401 is counted instead
/// (`svc_unauthenticated_total`): it carried no valid signature and no session, so anyone
/// can send it, and a flood of them must not push people's actions out of the rotated
/// files (webhooks that fail their checks are treated the same way).
pub(super) fn record(
    state: &AppState,
    client: &Client,
    actor: Actor,
    action: audit::Action,
    job: Option<JobRef>,
    answer: &Result<Response, ApiError>,
) {
    let (status, message) = match answer {
        Ok(response) => (response.status(), String::new()),
        Err(err) => (err.status, err.message.clone()),
    };
    if status == StatusCode::UNAUTHORIZED {
        crate::metrics::unauthenticated("action");
        return;
    }
    record_status(state, client, actor, action, job, status, &message);
}

/// Records an answer given as its status and message (a login's).
pub(super) fn record_status(
    state: &AppState,
    client: &Client,
    actor: Actor,
    action: audit::Action,
    job: Option<JobRef>,
    status: StatusCode,
    message: &str,
) {
    state.audit.record(Entry::answered(
        actor,
        action,
        job,
        client.shown(),
        status.as_u16(),
        message,
    ));
}

/// Marks an answer not to be cached (answers that depend on the session).
pub(super) fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_is_taken_from_x_forwarded_proto() {
        use axum::http::HeaderValue;
        let mut headers = HeaderMap::new();
        assert!(!forwarded_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("HTTPS"));
        assert!(forwarded_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https, http"));
        assert!(forwarded_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
        assert!(!forwarded_https(&headers));
        // Believed from a trusted proxy only.
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let direct = Client {
            address: None,
            via_trusted_proxy: false,
        };
        assert!(!direct.forwarded_https(&headers));
        let proxied = Client {
            via_trusted_proxy: true,
            ..direct
        };
        assert!(proxied.forwarded_https(&headers));
    }

    #[test]
    fn a_role_refusal_says_what_is_needed() {
        assert_eq!(
            role_refusal(Role::Viewer, Right::Operate, "pause jobs"),
            "the role viewer may not pause jobs: it needs operator or admin"
        );
        assert_eq!(
            role_refusal(
                Role::Operator,
                Right::Administer,
                "reload the configuration"
            ),
            "the role operator may not reload the configuration: it needs admin"
        );
    }
}
