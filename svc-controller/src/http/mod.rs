//! The HTTP API on axum: routes, the shared state handed to handlers, and the fallbacks
//! that keep every answer in the JSON wrapper.

mod error;
mod job_exec;
mod job_http;
mod response;
mod webhook;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::compression::CompressionLayer;

pub use error::ApiError;
pub use response::{ok, wrapper};

use crate::engine::Engine;

/// Largest request body on the webhook routes.
pub const WEBHOOK_BODY_LIMIT: usize = 25 * 1024 * 1024;
/// Largest request body elsewhere.
pub const API_BODY_LIMIT: usize = 1024 * 1024;

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub engine: Engine,
    /// The main secret, for signed API calls and jobs without their own.
    pub secret: Arc<str>,
}

/// The whole application router.
pub fn router(state: AppState) -> Router {
    let compressed = Router::new()
        .route("/svc/api/environment", get(job_exec::environment))
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
        .layer(DefaultBodyLimit::max(API_BODY_LIMIT));
    let webhooks = Router::new()
        .route("/svc/api/job/run/{*path}", post(webhook::trigger))
        .route("/svc/api/job_exec/run/{*path}", post(webhook::trigger))
        .route("/svc/job/{*path}", post(webhook::trigger))
        .layer(DefaultBodyLimit::max(WEBHOOK_BODY_LIMIT));
    Router::new()
        .merge(compressed)
        .merge(signed)
        .merge(webhooks)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn not_found() -> Response {
    ApiError::not_found("no such resource").into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").into_response()
}
