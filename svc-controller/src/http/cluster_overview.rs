//! `GET /svc/api/cluster`: where this node stands in its cluster, for the dashboard's
//! cluster panel and its warnings on jobs: the nodes and their liveness, and the jobs
//! whose definitions differ between live nodes (hashes only: no secret goes into a
//! definition hash). In single-node mode an answer that says cluster mode is off.
//!
//! The store answers domain types (`crate::cluster::ClusterOverview`); the JSON is built
//! here.

use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};

use super::access::no_store;
use super::{ApiError, AppState, ok, wrapper};
use crate::cluster::{ClusterOverview, JobKey};
use crate::engine::EngineError;

/// Most jobs listed in each of the answer's lists; the totals count the rest. Enough for
/// any rollout a person reads; a bounded answer for a cluster where every job drifts.
const LIST_LIMIT: u32 = 1000;

/// The reads' bound beyond the pool's own for a connection: a database that accepted
/// the query but does not answer is told as unavailable rather than holding the request.
const READ_LIMIT: Duration = Duration::from_secs(10);

/// `GET /svc/api/cluster`. 503 with `Retry-After` while the cluster's database is away.
pub(super) async fn overview(State(state): State<AppState>) -> Result<Response, ApiError> {
    let Some(link) = state.engine.cluster() else {
        return Ok(no_store(wrapper(
            axum::http::StatusCode::OK,
            "cluster mode is off: this node has no database_url",
            json!({ "enabled": false }),
        )));
    };
    let read = tokio::time::timeout(READ_LIMIT, link.store.overview(&link.node, LIST_LIMIT)).await;
    match read {
        Ok(Ok(overview)) => Ok(no_store(ok(overview_json(&link.node, &overview)))),
        Ok(Err(err)) if err.is_unavailable() => Err(ApiError::from(EngineError::Unavailable)),
        Err(_elapsed) => Err(ApiError::from(EngineError::Unavailable)),
        Ok(Err(err)) => Err(ApiError::internal(
            "reading the cluster overview failed",
            err,
        )),
    }
}

fn job_fields(job: &JobKey) -> (&'static str, &str) {
    (job.kind.as_str(), job.id.as_str())
}

/// The answer's `data` in cluster mode.
fn overview_json(node: &str, overview: &ClusterOverview) -> Value {
    let nodes: Vec<Value> = overview
        .nodes
        .iter()
        .map(|info| {
            json!({
                "name": info.name,
                "started": crate::time::timezone::utc_text(info.started_at),
                "heartbeat": crate::time::timezone::utc_text(info.heartbeat_at),
                "live": info.live,
                "max_job_running": info.max_job_running,
            })
        })
        .collect();
    let differ: Vec<Value> = overview
        .differ
        .iter()
        .map(|job| {
            let (kind, id) = job_fields(&job.job);
            let defs: Vec<Value> = job
                .defs
                .iter()
                .map(|def| json!({ "hash": def.hash, "nodes": def.nodes }))
                .collect();
            json!({
                "kind": kind,
                "id": id,
                // This node's hash, so that a client tells a job that differs here from
                // one that differs between two other nodes.
                "here": job.hash_of(node),
                "definitions": defs,
            })
        })
        .collect();
    let missing: Vec<Value> = overview
        .missing_here
        .iter()
        .map(|(job, nodes)| {
            let (kind, id) = job_fields(job);
            json!({ "kind": kind, "id": id, "nodes": nodes })
        })
        .collect();
    json!({
        "enabled": true,
        "node": node,
        "nodes": nodes,
        "differ": differ,
        "differ_total": overview.differ_total,
        "missing_here": missing,
        "missing_here_total": overview.missing_here_total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{DefHolders, DifferingJob, JobKind, NodeInfo};
    use chrono::{TimeZone, Utc};

    #[test]
    fn the_overview_names_nodes_hashes_and_this_nodes_own() {
        let at = Utc
            .with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
            .single()
            .expect("time");
        let overview = ClusterOverview {
            nodes: vec![
                NodeInfo {
                    name: "a".into(),
                    started_at: at,
                    heartbeat_at: at,
                    live: true,
                    max_job_running: 4,
                },
                NodeInfo {
                    name: "b".into(),
                    started_at: at,
                    heartbeat_at: at,
                    live: false,
                    max_job_running: 1,
                },
            ],
            differ: vec![
                DifferingJob {
                    job: JobKey::new(JobKind::Job, "shared"),
                    defs: vec![
                        DefHolders {
                            hash: "h1".into(),
                            nodes: vec!["a".into()],
                        },
                        DefHolders {
                            hash: "h2".into(),
                            nodes: vec!["c".into()],
                        },
                    ],
                },
                DifferingJob {
                    job: JobKey::new(JobKind::Http, "other"),
                    defs: vec![
                        DefHolders {
                            hash: "h3".into(),
                            nodes: vec!["c".into()],
                        },
                        DefHolders {
                            hash: "h4".into(),
                            nodes: vec!["d".into()],
                        },
                    ],
                },
            ],
            differ_total: 2,
            missing_here: vec![(JobKey::new(JobKind::Job, "elsewhere"), vec!["c".into()])],
            missing_here_total: 1,
        };
        let data = overview_json("a", &overview);
        assert_eq!(data["enabled"], true);
        assert_eq!(data["node"], "a");
        assert_eq!(data["nodes"][0]["name"], "a");
        assert_eq!(data["nodes"][0]["live"], true);
        assert_eq!(data["nodes"][0]["max_job_running"], 4);
        assert_eq!(data["nodes"][1]["live"], false);
        assert_eq!(
            data["nodes"][0]["started"],
            crate::time::timezone::utc_text(at).as_str()
        );
        assert_eq!(data["differ"][0]["kind"], "job");
        assert_eq!(data["differ"][0]["id"], "shared");
        assert_eq!(data["differ"][0]["here"], "h1");
        assert_eq!(data["differ"][0]["definitions"][1]["nodes"][0], "c");
        assert_eq!(data["differ"][1]["kind"], "job_http");
        assert_eq!(data["differ"][1]["here"], Value::Null);
        assert_eq!(data["differ_total"], 2);
        assert_eq!(data["missing_here"][0]["id"], "elsewhere");
        assert_eq!(data["missing_here"][0]["nodes"][0], "c");
        assert_eq!(data["missing_here_total"], 1);
    }
}
