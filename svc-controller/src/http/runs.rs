//! A job's run history (`GET /svc/api/job_exec/runs`, `/svc/api/job_http/runs`): pages of
//! its last runs, newest first, kept beyond the retention of their logs. In cluster mode
//! the runs of every node, from the shared table: each also names its `node` and says
//! whether its `log` can be read, and a run going on has the status `running`.

use axum::extract::{RawQuery, State};
use axum::response::Response;

use super::query::{job_id, number_up_to, param, params};
use super::{ApiError, AppState, ok};
use serde_json::{Value, json};

use crate::cluster::SharedRunState;
use crate::engine::Kind;
use crate::engine::cluster_logs::ClusterRun;
use crate::store::history::MAX_PAGE;

/// Runs in a page when the query does not say.
const DEFAULT_LIMIT: usize = 50;

/// `?id=&limit=&before=`: at most `limit` runs (1 to 1000, default 50), those whose
/// counter is below `before` when given; `data` is the array of runs.
async fn runs_of(state: AppState, kind: Kind, query: Option<String>) -> Result<Response, ApiError> {
    let pairs = params(query.unwrap_or_default().as_bytes());
    let id = job_id(param(&pairs, "id"))?.to_owned();
    let limit = number_up_to(&pairs, "limit", DEFAULT_LIMIT, MAX_PAGE)?;
    let before =
        match param(&pairs, "before") {
            None | Some("") => None,
            Some(text) => Some(text.parse::<u64>().map_err(|_| {
                ApiError::bad_request("before must be a run counter (a whole number)")
            })?),
        };
    // In cluster mode every node's runs, from the shared table.
    let shared = state
        .engine
        .cluster_runs(kind, &id, u32::try_from(limit).unwrap_or(u32::MAX), before)
        .await?;
    if let Some(runs) = shared {
        return Ok(ok(Value::Array(runs.iter().map(cluster_run).collect())));
    }
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

/// A run of the shared table: the fields of a history record (`ended_at` and
/// `duration_ms` only once it ended), its node, and whether its log can be read.
fn cluster_run(shown: &ClusterRun) -> Value {
    let (run, trigger) = (&shown.run, &shown.trigger);
    let status = match run.state {
        SharedRunState::Running => None,
        SharedRunState::Done(status) => Some(status),
    };
    let mut value = json!({
        "counter": run.counter,
        "status": status.map_or("running", |status| status.as_str()),
        "trigger": trigger.source,
        "attempt": run.attempt,
        "started_at": run.started_at,
        "exit_code": run.exit_code,
        "signal": run.signal,
        "summary": run.summary.as_deref().unwrap_or_default(),
        "node": run.node,
        "log": run.has_log,
    });
    let Some(fields) = value.as_object_mut() else {
        return value;
    };
    if let Some(delivery) = &trigger.delivery {
        fields.insert("delivery".into(), json!(delivery));
    }
    if let Some(cause) = &trigger.cause {
        fields.insert("cause".into(), json!(cause));
    }
    if let Some(status) = run.http_status {
        fields.insert("http_status".into(), json!(status));
    }
    if status.is_some() {
        fields.insert("ended_at".into(), json!(run.ended_at));
        let duration = match (run.started_at, run.ended_at) {
            (Some(start), Some(end)) => {
                u64::try_from((end - start).num_milliseconds()).unwrap_or(0)
            }
            _ => 0,
        };
        fields.insert("duration_ms".into(), json!(duration));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{JobKey, JobKind, SharedRun};
    use crate::engine::cluster_link::TriggerSummary;
    use crate::store::state::RunStatus;

    fn run(status: Option<RunStatus>) -> ClusterRun {
        let start = chrono::DateTime::parse_from_rfc3339("2026-11-28T04:00:00Z")
            .expect("time")
            .to_utc();
        ClusterRun {
            run: SharedRun {
                run_id: 3,
                job: JobKey::new(JobKind::Job, "talk"),
                counter: 7,
                node: "b".into(),
                state: status.map_or(SharedRunState::Running, SharedRunState::Done),
                payload: json!({ "source": "webhook" }),
                attempt: 1,
                started_at: Some(start),
                ended_at: status.map(|_| start + chrono::TimeDelta::milliseconds(1500)),
                exit_code: status.map(|_| 0),
                signal: None,
                http_status: None,
                summary: None,
                has_log: true,
            },
            trigger: TriggerSummary {
                source: "webhook".into(),
                delivery: Some("d-1".into()),
                cause: None,
            },
        }
    }

    #[test]
    fn a_shared_run_has_the_history_fields_and_its_node() {
        let value = cluster_run(&run(Some(RunStatus::Success)));
        assert_eq!(value["status"], "success");
        assert_eq!(value["node"], "b");
        assert_eq!(value["log"], true);
        assert_eq!(value["delivery"], "d-1");
        assert_eq!(value["summary"], "");
        assert_eq!(value["duration_ms"], 1500);
        assert_eq!(value["ended_at"], "2026-11-28T04:00:01.500Z");
        assert!(value.get("cause").is_none() && value.get("http_status").is_none());
    }

    #[test]
    fn a_run_going_on_is_running_without_an_end() {
        let value = cluster_run(&run(None));
        assert_eq!(value["status"], "running");
        assert!(value.get("ended_at").is_none() && value.get("duration_ms").is_none());
    }
}
