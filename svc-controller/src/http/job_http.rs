//! JobHttp endpoints: view (5), recent log lines (6), pause and resume (7, 8), run now,
//! and one log by counter. The actions are signed with the main secret or done with an
//! operator's session (see [`super::access`]), and recorded in the audit log.

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;

use super::access::{self, Authority, Client};
use super::error::names;
use super::query::{job_id, param, params};
use super::{ApiError, AppState, ok, signed};
use crate::access::audit;
use crate::engine::{EngineError, Kind, Trigger, TriggerSource};
use crate::security::rights::Right;

/// Lines endpoint 6 returns at most.
pub const RECENT_LINES: usize = 100;
/// Bytes read from the end of each log for endpoint 6: room for [`RECENT_LINES`] long
/// lines, without reading a long log whole.
const RECENT_BYTES: u64 = 256 * 1024;
/// Logs read from the cluster's shared table for endpoint 6 at most (a JobHttp's log is
/// a few lines: the request and the response).
const RECENT_LOGS: u32 = 20;

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
    // In cluster mode the newest logs of the cluster, whichever node made the calls.
    let shared = state
        .engine
        .cluster_recent_logs(Kind::Http, &id, RECENT_LOGS, RECENT_BYTES as usize)
        .await?;
    if let Some(logs) = shared {
        return Ok(ok(json!(recent_lines(logs.into_iter().map(Ok))?)));
    }
    let engine = state.engine.clone();
    super::blocking(move || {
        let logs = counters.iter().rev().filter_map(|counter| {
            engine
                .read_log_end(Kind::Http, &id, *counter, RECENT_BYTES)
                .transpose()
        });
        Ok::<_, ApiError>(ok(json!(recent_lines(logs)?)))
    })
    .await?
}

/// The last [`RECENT_LINES`] lines of `logs` (newest first), from the end of each (a
/// log's last [`RECENT_BYTES`], a cut first line left out:
/// [`crate::store::logstore::last_lines`]), oldest first. Reads only as many logs as it needs.
fn recent_lines(
    logs: impl Iterator<Item = Result<Vec<u8>, EngineError>>,
) -> Result<Vec<String>, ApiError> {
    let mut lines: Vec<String> = Vec::new();
    for content in logs {
        if lines.len() >= RECENT_LINES {
            break;
        }
        let content = content?;
        let wanted = RECENT_LINES - lines.len();
        let mut log_lines = crate::store::logstore::last_lines(&content, RECENT_BYTES, wanted);
        log_lines.reverse();
        lines.extend(log_lines);
    }
    lines.truncate(RECENT_LINES);
    lines.reverse();
    Ok(lines)
}

pub(super) async fn log(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    super::job_log::log_of(&state, Kind::Http, query).await
}

/// A JobHttp action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HttpAction {
    Pause,
    Resume,
    Cancel,
    RunNow,
}

impl HttpAction {
    fn signed(self) -> signed::Action {
        match self {
            HttpAction::Pause => signed::Action::HttpPause,
            HttpAction::Resume => signed::Action::HttpResume,
            HttpAction::Cancel => signed::Action::HttpCancel,
            HttpAction::RunNow => signed::Action::HttpTrigger,
        }
    }

    /// Upstream's clients send pause and resume without an epoch ([`signed::Epoch`]);
    /// cancel and run now are new, and one-time.
    fn epoch(self) -> signed::Epoch {
        match self {
            HttpAction::Pause | HttpAction::Resume => signed::Epoch::Optional,
            HttpAction::Cancel | HttpAction::RunNow => signed::Epoch::Required,
        }
    }

    fn audited(self) -> audit::Action {
        match self {
            HttpAction::Pause => audit::Action::Pause,
            HttpAction::Resume => audit::Action::Resume,
            HttpAction::Cancel => audit::Action::Cancel,
            HttpAction::RunNow => audit::Action::RunNow,
        }
    }

    fn what(self) -> &'static str {
        match self {
            HttpAction::Pause => "pause jobs",
            HttpAction::Resume => "resume jobs",
            HttpAction::Cancel => "cancel runs",
            HttpAction::RunNow => "run jobs now",
        }
    }
}

/// A JobHttp action on the JobHttp named by the query's `id`: with a signature,
/// `X-Svc-Sign` over the raw query string with the main secret (and its `_svc_epoch`,
/// whose signature is then spent); or with a session, its CSRF token and role. Recorded
/// in the audit log whatever the answer.
async fn http_action(
    state: &AppState,
    client: &Client,
    headers: &HeaderMap,
    query: &Option<String>,
    action: HttpAction,
) -> Result<Response, ApiError> {
    let raw = query.as_deref().unwrap_or_default();
    let actor = access::claimed_actor(state, headers);
    let job = access::named_job(Kind::Http, &params(raw.as_bytes()));
    let answer = async {
        if let Authority::Signature =
            access::authority(state, headers, Right::Operate, action.what())?
        {
            signed::check(
                state,
                action.signed(),
                action.epoch(),
                headers,
                raw.as_bytes(),
            )
            .await?;
        }
        let id = query_id(query)?;
        perform(state, action, id).await
    }
    .await;
    access::record(state, client, actor, action.audited(), job, &answer);
    answer
}

/// Does an authorised action. An unknown ID is 400, as on the other JobHttp endpoints.
async fn perform(state: &AppState, action: HttpAction, id: String) -> Result<Response, ApiError> {
    if action == HttpAction::RunNow {
        let run = Trigger::new(TriggerSource::Manual);
        state
            .engine
            .trigger(Kind::Http, &id, run)
            .await
            .map_err(unknown_is_invalid)?;
        return Ok(super::job_answer(&state.engine, Kind::Http, &id));
    }
    // In cluster mode the whole cluster first (a no-op on a single node).
    let shared = match action {
        HttpAction::Cancel => state.engine.share_cancel(Kind::Http, &id).await,
        _ => {
            let paused = action == HttpAction::Pause;
            state.engine.share_pause(Kind::Http, &id, paused).await
        }
    };
    shared.map_err(unknown_is_invalid)?;
    let engine = state.engine.clone();
    super::blocking(move || {
        match action {
            // The JobHttp as the request left it (resumed: `started`, endpoint 8).
            HttpAction::Pause | HttpAction::Resume => {
                let paused = action == HttpAction::Pause;
                super::view::paused_job_json(&engine, Kind::Http, &id, paused).map(super::ok)
            }
            // Nothing going on: 200 and nothing changes, as for a Job.
            HttpAction::Cancel => engine
                .cancel(Kind::Http, &id, "cancelled through the API")
                .map(|_| super::job_answer(&engine, Kind::Http, &id)),
            // Answered above.
            HttpAction::RunNow => Ok(super::job_answer(&engine, Kind::Http, &id)),
        }
    })
    .await?
    .map_err(unknown_is_invalid)
}

/// `POST /svc/api/job_http/trigger?id=&_svc_epoch=`: calls a JobHttp now.
pub(super) async fn trigger(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        http_action(&state, &client, &headers, &query, HttpAction::RunNow).await
    })
    .await
}

pub(super) async fn pause(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        http_action(&state, &client, &headers, &query, HttpAction::Pause).await
    })
    .await
}

pub(super) async fn resume(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        http_action(&state, &client, &headers, &query, HttpAction::Resume).await
    })
    .await
}

/// `POST /svc/api/job_http/cancel?id=&_svc_epoch=`: ends the JobHttp's call going on,
/// recorded as canceled, and drops its queued trigger.
pub(super) async fn cancel(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        http_action(&state, &client, &headers, &query, HttpAction::Cancel).await
    })
    .await
}
