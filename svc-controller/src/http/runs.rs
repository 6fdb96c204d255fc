//! A job's run history (`GET /svc/api/job_exec/runs`, `/svc/api/job_http/runs`): pages of
//! its last runs, newest first, kept beyond the retention of their logs.

use axum::extract::{RawQuery, State};
use axum::response::Response;

use super::query::{job_id, param, params};
use super::{ApiError, AppState, ok};
use crate::engine::Kind;
use crate::history::MAX_PAGE;

/// Runs in a page when the query does not say.
const DEFAULT_LIMIT: usize = 50;

/// `?id=&limit=&before=`: at most `limit` runs (1 to 1000, default 50), those whose
/// counter is below `before` when given; `data` is the array of runs.
async fn runs_of(state: AppState, kind: Kind, query: Option<String>) -> Result<Response, ApiError> {
    let pairs = params(query.unwrap_or_default().as_bytes());
    let id = job_id(param(&pairs, "id"))?.to_owned();
    let limit = match param(&pairs, "limit") {
        None | Some("") => DEFAULT_LIMIT,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!("limit must be a number from 1 to {MAX_PAGE}"))
            })?,
    };
    let before =
        match param(&pairs, "before") {
            None | Some("") => None,
            Some(text) => Some(text.parse::<u64>().map_err(|_| {
                ApiError::bad_request("before must be a run counter (a whole number)")
            })?),
        };
    let engine = state.engine.clone();
    let records = super::blocking(move || engine.run_history(kind, &id, limit, before)).await??;
    let data = serde_json::to_value(records)
        .map_err(|err| ApiError::internal("cannot encode the run history", err))?;
    Ok(ok(data))
}

pub(super) async fn job_runs(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    runs_of(state, Kind::Job, query).await
}

pub(super) async fn job_http_runs(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    runs_of(state, Kind::Http, query).await
}
