//! JobHttp endpoints: view (5), recent log lines (6), signed pause and resume (7, 8),
//! and one log by counter.

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use base64::Engine as _;
use serde_json::json;

use super::job_exec::{job_id, param, params};
use super::{ApiError, AppState, ok};
use crate::auth;
use crate::engine::Kind;

/// Lines endpoint 6 returns at most.
pub const RECENT_LINES: usize = 100;

fn query_id(query: &Option<String>) -> Result<String, ApiError> {
    let pairs = params(query.as_deref().unwrap_or_default().as_bytes());
    job_id(param(&pairs, "id")).map(str::to_string)
}

pub(super) async fn view(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = query_id(&query)?;
    let view = state
        .engine
        .job_json(Kind::Http, &id)
        .ok_or_else(|| ApiError::not_found("job not found"))?;
    Ok(ok(view))
}

pub(super) async fn recent_logs(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = query_id(&query)?;
    let counters = state.engine.log_counters(Kind::Http, &id)?;
    let mut lines: Vec<String> = Vec::new();
    for counter in counters.iter().rev() {
        if lines.len() >= RECENT_LINES {
            break;
        }
        let Some((_, _, content)) = state.engine.read_log(Kind::Http, &id, *counter)? else {
            continue;
        };
        let text = String::from_utf8_lossy(&content);
        let mut log_lines: Vec<String> = text.lines().map(str::to_string).collect();
        log_lines.reverse();
        lines.extend(log_lines);
    }
    lines.truncate(RECENT_LINES);
    lines.reverse();
    Ok(ok(json!(lines)))
}

pub(super) async fn log(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    super::job_exec::log_of(&state, Kind::Http, query).await
}

/// Checks `X-Svc-Sign` over the raw query string with the main secret.
fn signed_query(
    state: &AppState,
    headers: &HeaderMap,
    query: &Option<String>,
) -> Result<String, ApiError> {
    let raw = query.as_deref().unwrap_or_default();
    let signature = headers.get("x-svc-sign").and_then(|v| v.to_str().ok());
    auth::verify_hmac_sha256(
        state.secret.as_bytes(),
        raw.as_bytes(),
        "x-svc-sign",
        signature,
    )
    .map_err(|e| ApiError::unauthorized(e.to_string()))?;
    query_id(query)
}

pub(super) async fn pause(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = signed_query(&state, &headers, &query)?;
    Ok(ok(state.engine.pause(Kind::Http, &id)?))
}

pub(super) async fn resume(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = signed_query(&state, &headers, &query)?;
    Ok(ok(state.engine.resume(Kind::Http, &id)?))
}

/// Base64 content of a log, as JobLog carries it.
pub(super) fn encode_content(content: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(content)
}
