//! JobHttp endpoints: view (5), recent log lines (6), signed pause and resume (7, 8),
//! and one log by counter.

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;

use super::error::names;
use super::query::{job_id, param, params};
use super::{ApiError, AppState, ok, signed};
use crate::engine::{EngineError, Kind, Trigger, TriggerSource};

/// Lines endpoint 6 returns at most.
pub const RECENT_LINES: usize = 100;
/// Bytes read from the end of each log for endpoint 6: room for [`RECENT_LINES`] long
/// lines, without reading a long log whole.
const RECENT_BYTES: u64 = 256 * 1024;

/// Endpoints 5 to 8 answer an unknown JobHttp ID with 400, as the spec and upstream do
/// (a Job's unknown ID is 404).
fn unknown_id() -> ApiError {
    ApiError::bad_request("no JobHttp has this ID").named(names::INVALID_JOB_ID)
}

fn unknown_is_invalid(err: EngineError) -> ApiError {
    match err {
        EngineError::NotFound => unknown_id(),
        other => ApiError::from(other),
    }
}

fn query_id(query: &Option<String>) -> Result<String, ApiError> {
    let pairs = params(query.as_deref().unwrap_or_default().as_bytes());
    job_id(param(&pairs, "id")).map(str::to_string)
}

pub(super) async fn view(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = query_id(&query)?;
    let view = super::view::job_json(&state.engine, Kind::Http, &id).ok_or_else(unknown_id)?;
    Ok(ok(view))
}

pub(super) async fn recent_logs(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = query_id(&query)?;
    let counters = state
        .engine
        .log_counters(Kind::Http, &id)
        .map_err(unknown_is_invalid)?;
    let engine = state.engine.clone();
    super::blocking(move || recent_lines(&engine, &id, &counters)).await?
}

/// The last [`RECENT_LINES`] lines of the newest logs, from the end of each (a log's
/// last [`RECENT_BYTES`], a cut first line left out: [`crate::logstore::last_lines`]).
/// Blocking.
fn recent_lines(
    engine: &crate::engine::Engine,
    id: &str,
    counters: &[u64],
) -> Result<Response, ApiError> {
    let mut lines: Vec<String> = Vec::new();
    for counter in counters.iter().rev() {
        if lines.len() >= RECENT_LINES {
            break;
        }
        let Some(content) = engine.read_log_end(Kind::Http, id, *counter, RECENT_BYTES)? else {
            continue;
        };
        let wanted = RECENT_LINES - lines.len();
        let mut log_lines = crate::logstore::last_lines(&content, RECENT_BYTES, wanted);
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
    super::job_log::log_of(&state, Kind::Http, query).await
}

/// Checks `X-Svc-Sign` over the raw query string with the main secret, and its
/// `_svc_epoch` when there is one, whose signature is then spent (one-time); see
/// [`signed::Epoch::Optional`]. Returns the JobHttp ID.
async fn signed_query(
    state: &AppState,
    action: signed::Action,
    epoch: signed::Epoch,
    headers: &HeaderMap,
    query: &Option<String>,
) -> Result<String, ApiError> {
    let raw = query.as_deref().unwrap_or_default();
    signed::check(state, action, epoch, headers, raw.as_bytes()).await?;
    query_id(query)
}

/// `POST /svc/api/job_http/trigger?id=&_svc_epoch=`: calls a JobHttp now (signed like
/// its pause, the epoch required: the request is one-time). An unknown ID is 400, as on
/// the other JobHttp endpoints.
pub(super) async fn trigger(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = signed_query(
        &state,
        signed::Action::HttpTrigger,
        signed::Epoch::Required,
        &headers,
        &query,
    )
    .await?;
    let run = Trigger::new(TriggerSource::Manual);
    state
        .engine
        .trigger(Kind::Http, &id, run)
        .await
        .map_err(unknown_is_invalid)?;
    Ok(super::job_answer(&state.engine, Kind::Http, &id))
}

pub(super) async fn pause(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = signed_query(
        &state,
        signed::Action::HttpPause,
        signed::Epoch::Optional,
        &headers,
        &query,
    )
    .await?;
    let engine = state.engine.clone();
    super::blocking(move || {
        engine
            .pause(Kind::Http, &id)
            .map(|()| super::job_answer(&engine, Kind::Http, &id))
    })
    .await?
    .map_err(unknown_is_invalid)
}

pub(super) async fn resume(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = signed_query(
        &state,
        signed::Action::HttpResume,
        signed::Epoch::Optional,
        &headers,
        &query,
    )
    .await?;
    let engine = state.engine.clone();
    super::blocking(move || {
        engine
            .resume(Kind::Http, &id)
            .map(|()| super::job_answer(&engine, Kind::Http, &id))
    })
    .await?
    .map_err(unknown_is_invalid)
}
