//! The HTTP API on axum: routes, the shared state handed to handlers, and the fallbacks
//! that keep every answer in the JSON wrapper.

mod error;
mod job_exec;
mod job_http;
mod log_stream;
mod public;
mod response;
pub mod server;
mod ui;
mod webhook;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;

pub use error::ApiError;
pub use response::{ok, wrapper};

use crate::engine::Engine;

/// Largest request body on the webhook routes.
pub const WEBHOOK_BODY_LIMIT: usize = 25 * 1024 * 1024;
/// Time a client has to send a whole request body.
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// Largest request body elsewhere.
pub const API_BODY_LIMIT: usize = 1024 * 1024;

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub engine: Engine,
    /// The main secret, for signed API calls and jobs without their own.
    pub secret: Arc<str>,
    /// Deliveries and nonces already accepted.
    pub replay: Arc<crate::replay::ReplayStores>,
    /// Users and sessions of the optional login (disabled without users).
    pub login: Arc<crate::login::Login>,
}

/// The whole application router.
pub fn router(state: AppState) -> Router {
    let compressed = Router::new()
        .route("/svc/api/job_exec/log", get(job_exec::log))
        .route("/svc/api/job/log", get(job_exec::log))
        .route("/svc/api/job_http/log", get(job_http::log))
        .route("/svc/api/job_http/logs", get(job_http::recent_logs))
        .layer(
            CompressionLayer::new()
                .gzip(true)
                .no_br()
                .no_deflate()
                .no_zstd(),
        );
    let signed = Router::new()
        .route("/svc/api/job_exec/pause", post(job_exec::pause))
        .route("/svc/api/job_exec/resume", post(job_exec::resume))
        .route("/svc/api/job/pause", post(job_exec::pause))
        .route("/svc/api/job/resume", post(job_exec::resume))
        .route("/svc/api/job_exec/cancel", post(job_exec::cancel))
        .route("/svc/api/job_http", get(job_http::view))
        .route("/svc/api/job_http/pause", post(job_http::pause))
        .route("/svc/api/job_http/resume", post(job_http::resume))
        .layer(DefaultBodyLimit::max(API_BODY_LIMIT))
        .layer(RequestBodyLimitLayer::new(API_BODY_LIMIT));
    let webhooks = Router::new()
        .route("/svc/api/job/run/{*path}", post(webhook::trigger))
        .route("/svc/api/job_exec/run/{*path}", post(webhook::trigger))
        .route("/svc/job/{*path}", post(webhook::trigger))
        .layer(DefaultBodyLimit::max(WEBHOOK_BODY_LIMIT))
        .layer(RequestBodyLimitLayer::new(WEBHOOK_BODY_LIMIT));
    Router::new()
        // The Environment brings its own gzip, built once per change.
        .route("/svc/api/environment", get(job_exec::environment))
        .merge(compressed)
        .merge(signed)
        .merge(webhooks)
        .route("/svc/api/metrics", get(metrics))
        .route("/svc/api/job_exec/log/stream", get(log_stream::stream))
        .route("/svc/api/login", post(crate::login::login))
        .route("/svc/api/logout", post(crate::login::logout))
        .route("/svc/api/session", get(crate::login::session))
        .merge(ui::router())
        .route("/svc/{*rest}", get(not_found))
        .route_layer(middleware::from_fn(tag_route))
        .fallback(public::serve)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::login::guard,
        ))
        .layer(middleware::map_response(wrap_plain_errors))
        .layer(RequestBodyTimeoutLayer::new(BODY_READ_TIMEOUT))
        .layer(middleware::from_fn(limit_header_size))
        .layer(middleware::from_fn(count_requests))
        .with_state(state)
}

/// Refuses requests whose headers add up to more than [`server::MAX_HEADER_BYTES`].
async fn limit_header_size(request: axum::extract::Request, next: middleware::Next) -> Response {
    let size: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum::<usize>()
        + request.uri().to_string().len();
    if size > server::MAX_HEADER_BYTES {
        return ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request headers too large",
        )
        .into_response();
    }
    next.run(request).await
}

/// Route template of a matched request, carried out to [`count_requests`].
#[derive(Debug, Clone)]
struct RouteLabel(String);

/// Runs inside routing, where the matched route is known, and hands it outwards.
async fn tag_route(
    matched: axum::extract::MatchedPath,
    request: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    let label = RouteLabel(matched.as_str().to_string());
    let mut response = next.run(request).await;
    response.extensions_mut().insert(label);
    response
}

/// Counts answered requests by route template (never the raw path, which is
/// unbounded); unmatched requests count as `other`.
async fn count_requests(request: axum::extract::Request, next: middleware::Next) -> Response {
    let response = next.run(request).await;
    let route = response
        .extensions()
        .get::<RouteLabel>()
        .map_or("other", |label| label.0.as_str());
    crate::metrics::http_request(route, response.status().as_u16());
    response
}

async fn metrics() -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::render(),
    )
        .into_response()
}

/// Puts every error answer that is not already JSON (axum's extractor rejections, the
/// body limit's 413, ...) into the wrapper. The original text is dropped: it may echo
/// the request.
async fn wrap_plain_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !status.is_client_error() && !status.is_server_error() || is_json {
        return response;
    }
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "request body too large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported content type",
        _ => status.canonical_reason().unwrap_or("request failed"),
    };
    ApiError::new(status, message).into_response()
}

async fn not_found() -> Response {
    ApiError::not_found("no such resource").into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").into_response()
}
