//! Environment, job log, and the Job actions: pause, resume, cancel and run now, each
//! signed with the main secret or done with an operator's session (see [`super::access`]),
//! and each recorded in the audit log.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::broadcast;

use super::access::{self, Authority, Client};
use super::query::{job_id, param, params};
use super::{ApiError, AppState, signed, view};
use crate::access::audit;
use crate::engine::events::{EngineEvent, Published};
use crate::engine::{Accepted, Kind, Trigger, TriggerSource};
use crate::security::rights::Right;

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

/// A Job action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobAction {
    Pause,
    Resume,
    Cancel,
    RunNow,
}

impl JobAction {
    /// The replay store's action for its signatures.
    fn signed(self) -> signed::Action {
        match self {
            JobAction::Pause => signed::Action::Pause,
            JobAction::Resume => signed::Action::Resume,
            JobAction::Cancel => signed::Action::Cancel,
            JobAction::RunNow => signed::Action::Trigger,
        }
    }

    fn audited(self) -> audit::Action {
        match self {
            JobAction::Pause => audit::Action::Pause,
            JobAction::Resume => audit::Action::Resume,
            JobAction::Cancel => audit::Action::Cancel,
            JobAction::RunNow => audit::Action::RunNow,
        }
    }

    /// For the message of a refused role.
    fn what(self) -> &'static str {
        match self {
            JobAction::Pause => "pause jobs",
            JobAction::Resume => "resume jobs",
            JobAction::Cancel => "cancel runs",
            JobAction::RunNow => "run jobs now",
        }
    }
}

/// A Job action on the Job named by the form's `id`: authorised (signature, or session
/// with CSRF token and role), done, and recorded in the audit log whatever the answer.
async fn job_action(
    state: &AppState,
    client: &Client,
    headers: &HeaderMap,
    body: &[u8],
    action: JobAction,
) -> Result<Response, ApiError> {
    let actor = access::claimed_actor(state, headers);
    let job = access::named_job(Kind::Job, &params(body));
    let answer = async {
        let pairs = match access::authority(state, headers, Right::Operate, action.what())? {
            Authority::Signature => {
                signed::check(
                    state,
                    action.signed(),
                    signed::Epoch::Required,
                    headers,
                    body,
                )
                .await?
            }
            // The cookie and the CSRF token are the proof: nothing is signed or spent.
            Authority::Session => params(body),
        };
        let id = job_id(param(&pairs, "id"))?.to_owned();
        perform(state, action, id).await
    }
    .await;
    access::record(state, client, actor, action.audited(), job, &answer);
    answer
}

/// How long Run now waits for its run to get its number, to tell the caller which log
/// to follow; past it (a runner slow to start) the answer comes without it.
const RUN_COUNTER_WAIT: Duration = Duration::from_secs(5);

/// Run now. Answers like a webhook: 200 with the Job once the run is started or queued,
/// 412 when paused, 429 when a trigger already waits. A run started at once adds its
/// number as `run_counter` to the Job, so that the caller follows that run's log and
/// not a guess (another trigger may have begun a run since the caller last looked).
async fn run_now(state: &AppState, id: &str) -> Result<Response, ApiError> {
    // Before the trigger: its run's start is the first of this job after it.
    let events = state.engine.subscribe().ok().map(|(events, _)| events);
    let run = Trigger::new(TriggerSource::Manual);
    let accepted = state.engine.trigger(Kind::Job, id, run).await?;
    if accepted == Accepted::Skipped {
        return Ok(super::webhook::skipped_answer(
            id,
            "trigger",
            super::webhook::BUSY_SKIP,
        ));
    }
    let configured = view::job_json(&state.engine, Kind::Job, id)
        .and_then(|job| job["id"].as_str().map(str::to_owned));
    let counter = match (accepted, events, configured) {
        (Accepted::Started, Some(events), Some(configured)) => {
            tokio::time::timeout(RUN_COUNTER_WAIT, started_counter(events, &configured))
                .await
                .ok()
                .flatten()
        }
        _ => None,
    };
    let mut job = view::job_json(&state.engine, Kind::Job, id).unwrap_or(Value::Null);
    if let (Some(counter), Some(fields)) = (counter, job.as_object_mut()) {
        fields.insert("run_counter".into(), counter.into());
    }
    Ok(super::ok(job))
}

/// The number of the next run of `job_id` to start; `None` when the service stops first
/// or the receiver fell behind and may have missed it.
async fn started_counter(mut events: broadcast::Receiver<Published>, job_id: &str) -> Option<u64> {
    loop {
        match events.recv().await.ok()?.event {
            EngineEvent::RunStarted {
                kind: Kind::Job,
                job_id: started,
                counter,
                ..
            } if started == job_id => return Some(counter),
            EngineEvent::Stopping => return None,
            _ => {}
        }
    }
}

/// Does an authorised action.
async fn perform(state: &AppState, action: JobAction, id: String) -> Result<Response, ApiError> {
    if action == JobAction::RunNow {
        return run_now(state, &id).await;
    }
    // In cluster mode the whole cluster first (a no-op on a single node).
    match action {
        JobAction::Pause => state.engine.share_pause(Kind::Job, &id, true).await?,
        JobAction::Resume => state.engine.share_pause(Kind::Job, &id, false).await?,
        JobAction::Cancel => state.engine.share_cancel(Kind::Job, &id).await?,
        JobAction::RunNow => {}
    }
    let engine = state.engine.clone();
    // The state file is saved durably: blocking work.
    super::blocking(move || {
        match action {
            // The job as the request left it.
            JobAction::Pause | JobAction::Resume => {
                let paused = action == JobAction::Pause;
                super::view::paused_job_json(&engine, Kind::Job, &id, paused).map(super::ok)
            }
            // Nothing running: 200 and nothing changes, as upstream answers.
            JobAction::Cancel => engine
                .cancel(Kind::Job, &id, "cancelled through the API")
                .map(|_| super::job_answer(&engine, Kind::Job, &id)),
            // Answered above.
            JobAction::RunNow => Ok(super::job_answer(&engine, Kind::Job, &id)),
        }
    })
    .await?
    .map_err(ApiError::from)
}

pub(super) async fn pause(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        job_action(&state, &client, &headers, &body, JobAction::Pause).await
    })
    .await
}

pub(super) async fn resume(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        job_action(&state, &client, &headers, &body, JobAction::Resume).await
    })
    .await
}

/// `POST /svc/api/job_exec/trigger`: runs any Job now, whether it has a trigger path or
/// not.
pub(super) async fn trigger(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        job_action(&state, &client, &headers, &body, JobAction::RunNow).await
    })
    .await
}

pub(super) async fn cancel(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    access::to_completion(async move {
        job_action(&state, &client, &headers, &body, JobAction::Cancel).await
    })
    .await
}
