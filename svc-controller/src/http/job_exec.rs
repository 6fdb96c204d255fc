//! Environment, job log, and the signed pause / resume endpoints.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::query::{job_id, param};
use super::{ApiError, AppState, signed};
use crate::engine::{Accepted, Kind, Trigger, TriggerSource};

pub(super) async fn environment(State(state): State<AppState>, headers: HeaderMap) -> Response {
    use axum::http::{HeaderValue, header};
    let answer = state.environment.answer(&state.engine).await;
    let gzip = accepts_gzip(&headers);
    let body = if gzip {
        axum::body::Body::from(answer.gzip.clone())
    } else {
        axum::body::Body::from_stream(answer.json_chunks())
    };
    let mut response = Response::new(body);
    let response_headers = response.headers_mut();
    response_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response_headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if gzip {
        response_headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

/// True when `Accept-Encoding` lists gzip (or `*`) without `q=0`.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
}

pub(super) async fn log(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    super::job_log::log_of(&state, Kind::Job, query).await
}

/// Checks a signed form body (its `_svc_epoch` required) and spends its signature;
/// returns the form pairs.
async fn signed_form(
    state: &AppState,
    action: signed::Action,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Vec<(String, String)>, ApiError> {
    signed::check(state, action, signed::Epoch::Required, headers, body).await
}

/// A signed action on a Job named by the form's `id`.
async fn signed_job_action(
    state: &AppState,
    signed_action: signed::Action,
    headers: &HeaderMap,
    body: &[u8],
    action: impl FnOnce(&crate::engine::Engine, &str) -> Result<(), crate::engine::EngineError>
    + Send
    + 'static,
) -> Result<Response, ApiError> {
    let pairs = signed_form(state, signed_action, headers, body).await?;
    let id = job_id(param(&pairs, "id"))?.to_owned();
    let engine = state.engine.clone();
    // The state file is saved durably: blocking work.
    super::blocking(move || {
        action(&engine, &id).map(|()| super::job_answer(&engine, Kind::Job, &id))
    })
    .await?
    .map_err(ApiError::from)
}

pub(super) async fn pause(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    signed_job_action(
        &state,
        signed::Action::Pause,
        &headers,
        &body,
        |engine, id| engine.pause(Kind::Job, id),
    )
    .await
}

pub(super) async fn resume(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    signed_job_action(
        &state,
        signed::Action::Resume,
        &headers,
        &body,
        |engine, id| engine.resume(Kind::Job, id),
    )
    .await
}

/// `POST /svc/api/job_exec/trigger`: runs any Job now (signed like pause), whether it
/// has a trigger path or not. Answers like a webhook: 200 with the Job once the run is
/// started or queued, 412 when paused, 429 when a trigger already waits.
pub(super) async fn trigger(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let pairs = signed_form(&state, signed::Action::Trigger, &headers, &body).await?;
    let id = job_id(param(&pairs, "id"))?.to_owned();
    let run = Trigger::new(TriggerSource::Manual);
    if state.engine.trigger(Kind::Job, &id, run).await? == Accepted::Skipped {
        return Ok(super::webhook::skipped_answer(
            &id,
            "trigger",
            super::webhook::BUSY_SKIP,
        ));
    }
    Ok(super::job_answer(&state.engine, Kind::Job, &id))
}

pub(super) async fn cancel(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    signed_job_action(
        &state,
        signed::Action::Cancel,
        &headers,
        &body,
        // Nothing running: 200 and nothing changes, as upstream answers.
        |engine, id| {
            engine
                .cancel(Kind::Job, id, "cancelled through the API")
                .map(|_| ())
        },
    )
    .await
}
