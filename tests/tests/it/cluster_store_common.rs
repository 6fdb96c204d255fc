//! Helpers of the cluster store tests (`cluster_store.rs`, `cluster_store_runs.rs`,
//! `cluster_store_defs.rs`): one store per node, each with its own pool, as separate
//! controllers would have, over a database of a throwaway PostgreSQL server.

use std::time::Duration;

use svc_controller::cluster::{ClusterStore, JobDef, JobKey, JobKind, NewTrigger, StoreOptions};

/// The nodes' names, one store each.
pub(crate) const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

/// Pool options of each node's store: a few connections, a short wait for one.
pub(crate) fn options() -> StoreOptions {
    StoreOptions {
        max_connections: 6,
        acquire_timeout: Duration::from_secs(5),
        ..StoreOptions::default()
    }
}

/// One store per node over database `url`, the schema applied.
pub(crate) async fn nodes(url: &str) -> Vec<ClusterStore> {
    let stores: Vec<ClusterStore> = NODES
        .iter()
        .map(|_| ClusterStore::new(url, &options()).expect("store"))
        .collect();
    stores[0].migrate().await.expect("migrate");
    stores
}

/// A first attempt accepted by `node`, its payload naming `what` started it.
pub(crate) fn trigger(node: &str, what: &str) -> NewTrigger {
    NewTrigger {
        accepted_by: node.to_string(),
        attempt: 1,
        payload: serde_json::json!({ "source": what }),
    }
}

/// The Job `id`.
pub(crate) fn job(id: &str) -> JobKey {
    JobKey::new(JobKind::Job, id)
}

/// Registers `node` and records it as defining exactly `jobs` (a node claims only runs of
/// jobs it defines).
pub(crate) async fn define(store: &ClusterStore, node: &str, jobs: &[&JobKey]) {
    store.register_node(node, 4).await.expect("register");
    let defs: Vec<JobDef> = jobs
        .iter()
        .map(|&job| JobDef {
            job: job.clone(),
            hash: "same".to_string(),
        })
        .collect();
    store
        .sync_job_defs(node, &defs)
        .await
        .expect("sync_job_defs");
}

/// The one number `sql` selects.
pub(crate) async fn count(store: &ClusterStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(store.pool())
        .await
        .unwrap_or_else(|err| panic!("{sql}: {err}"))
}

/// The definition of job `id` of `kind` with `hash`.
pub(crate) fn def(kind: JobKind, id: &str, hash: &str) -> JobDef {
    JobDef {
        job: JobKey::new(kind, id),
        hash: hash.to_string(),
    }
}
