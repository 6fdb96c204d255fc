//! Reads of how the nodes' job definitions stand against each other, writing nothing:
//! [`ClusterStore::compare_job_defs`] for `--check` (a configuration against the other
//! live nodes' recorded hashes) and [`ClusterStore::overview`] for the API and the UI
//! (the nodes, and the jobs whose definitions differ). Recording a node's own
//! definitions stays `ClusterStore::sync_job_defs`'s.
//!
//! Each read is one transaction, `REPEATABLE READ, READ ONLY`: its queries see one
//! snapshot, and PostgreSQL itself refuses any write in it, so a check can never change
//! the cluster it looks at.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use super::error::ClusterError;
use super::model::{
    ClusterOverview, DefComparison, DefHolders, DifferingJob, JobDef, JobKey, NodeInfo,
};
use super::store::ClusterStore;
use super::store_rows::parse_kind;

impl ClusterStore {
    /// How `defs` (a configuration's jobs and hashes, for node `node`) stand against the
    /// hashes the other live nodes recorded in `svc_job_defs`. `node`'s own rows are left
    /// out: they are what the running node recorded, not the configuration checked. Live
    /// means a heartbeat within one lease, as for `sync_job_defs`. Writes nothing.
    pub async fn compare_job_defs(
        &self,
        node: &str,
        defs: &[JobDef],
    ) -> Result<DefComparison, ClusterError> {
        let (kinds, ids, hashes) = super::store_rows::def_columns(defs);
        let mut tx = self.read_only().await?;
        let live_nodes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM svc_nodes
             WHERE name <> $1 AND heartbeat_at > now() - make_interval(secs => $2)
             ORDER BY name",
        )
        .bind(node)
        .bind(self.lease_secs())
        .fetch_all(&mut *tx)
        .await?;
        let differing: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT o.kind, o.id, o.node
             FROM svc_job_defs o
             JOIN svc_nodes n ON n.name = o.node
             JOIN UNNEST($3::text[], $4::text[], $5::text[]) AS m(kind, id, def_hash)
               ON m.kind = o.kind AND m.id = o.id
             WHERE o.node <> $1 AND n.heartbeat_at > now() - make_interval(secs => $2)
               AND o.def_hash <> m.def_hash
             ORDER BY o.kind, o.id, o.node",
        )
        .bind(node)
        .bind(self.lease_secs())
        .bind(&kinds)
        .bind(&ids)
        .bind(&hashes)
        .fetch_all(&mut *tx)
        .await?;
        let missing: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT o.kind, o.id, o.node
             FROM svc_job_defs o
             JOIN svc_nodes n ON n.name = o.node
             WHERE o.node <> $1 AND n.heartbeat_at > now() - make_interval(secs => $2)
               AND NOT EXISTS (SELECT 1 FROM UNNEST($3::text[], $4::text[]) AS m(kind, id)
                               WHERE m.kind = o.kind AND m.id = o.id)
             ORDER BY o.kind, o.id, o.node",
        )
        .bind(node)
        .bind(self.lease_secs())
        .bind(&kinds)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(DefComparison {
            live_nodes,
            differ: group_nodes(keyed(differing)?),
            missing_here: group_nodes(keyed(missing)?),
        })
    }

    /// What node `node` reports of its cluster: every registered node, the jobs whose
    /// definitions differ between live nodes (`node` counted even when its own heartbeat
    /// lapsed, so that it still sees where it stands), and the jobs other live nodes
    /// define and `node` does not; of each list the first `limit` jobs and the total, so
    /// that a cluster of 100,000 drifting jobs still answers in bounded size. Writes
    /// nothing.
    pub async fn overview(&self, node: &str, limit: u32) -> Result<ClusterOverview, ClusterError> {
        let limit = i64::from(limit.max(1));
        let mut tx = self.read_only().await?;
        let nodes: Vec<NodeRow> = sqlx::query_as(
            "SELECT name, started_at, heartbeat_at, max_job_running,
                    heartbeat_at > now() - make_interval(secs => $1) AS live
             FROM svc_nodes ORDER BY name",
        )
        .bind(self.lease_secs())
        .fetch_all(&mut *tx)
        .await?;
        let differing: Vec<(String, String, String, String, i64)> = sqlx::query_as(
            "WITH defs AS (
                 SELECT d.kind, d.id, d.node, d.def_hash
                 FROM svc_job_defs d JOIN svc_nodes n ON n.name = d.node
                 WHERE d.node = $1 OR n.heartbeat_at > now() - make_interval(secs => $2)
             ),
             differ AS (
                 SELECT kind, id FROM defs GROUP BY kind, id
                 HAVING count(DISTINCT def_hash) > 1
             ),
             shown AS (SELECT kind, id FROM differ ORDER BY kind, id LIMIT $3)
             SELECT defs.kind, defs.id, defs.def_hash, defs.node,
                    (SELECT count(*) FROM differ) AS total
             FROM defs JOIN shown ON shown.kind = defs.kind AND shown.id = defs.id
             ORDER BY defs.kind, defs.id, defs.def_hash, defs.node",
        )
        .bind(node)
        .bind(self.lease_secs())
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let missing: Vec<(String, String, String, i64)> = sqlx::query_as(
            "WITH live AS (
                 SELECT name FROM svc_nodes
                 WHERE name <> $1 AND heartbeat_at > now() - make_interval(secs => $2)
             ),
             missing AS (
                 SELECT DISTINCT d.kind, d.id
                 FROM svc_job_defs d JOIN live ON live.name = d.node
                 WHERE NOT EXISTS (SELECT 1 FROM svc_job_defs mine
                                   WHERE mine.node = $1 AND mine.kind = d.kind
                                     AND mine.id = d.id)
             ),
             shown AS (SELECT kind, id FROM missing ORDER BY kind, id LIMIT $3)
             SELECT d.kind, d.id, d.node, (SELECT count(*) FROM missing) AS total
             FROM svc_job_defs d
             JOIN live ON live.name = d.node
             JOIN shown ON shown.kind = d.kind AND shown.id = d.id
             ORDER BY d.kind, d.id, d.node",
        )
        .bind(node)
        .bind(self.lease_secs())
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let differ_total = differing.first().map_or(0, |row| row.4);
        let missing_here_total = missing.first().map_or(0, |row| row.3);
        let mut held = Vec::with_capacity(differing.len());
        for (kind, id, hash, holder, _) in differing {
            held.push((JobKey::new(parse_kind(&kind)?, id), hash, holder));
        }
        let missing = missing
            .into_iter()
            .map(|(kind, id, holder, _)| (kind, id, holder))
            .collect();
        Ok(ClusterOverview {
            nodes: nodes
                .into_iter()
                .map(
                    |(name, started_at, heartbeat_at, max_job_running, live)| NodeInfo {
                        name,
                        started_at,
                        heartbeat_at,
                        live,
                        max_job_running: u32::try_from(max_job_running).unwrap_or(0),
                    },
                )
                .collect(),
            differ: group_holders(held),
            differ_total: u64::try_from(differ_total).unwrap_or(0),
            missing_here: group_nodes(keyed(missing)?),
            missing_here_total: u64::try_from(missing_here_total).unwrap_or(0),
        })
    }

    /// A transaction that sees one snapshot and may not write.
    async fn read_only(&self) -> Result<Transaction<'static, Postgres>, ClusterError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }
}

/// A row of `svc_nodes` with its liveness: name, started, heartbeat, `max_job_running`,
/// live.
type NodeRow = (String, DateTime<Utc>, DateTime<Utc>, i32, bool);

/// `(kind, id, node)` rows as `(job, node)`.
fn keyed(rows: Vec<(String, String, String)>) -> Result<Vec<(JobKey, String)>, ClusterError> {
    rows.into_iter()
        .map(|(kind, id, node)| Ok((JobKey::new(parse_kind(&kind)?, id), node)))
        .collect()
}

/// `(job, node)` rows sorted by job into one entry per job with its nodes, in the rows'
/// order.
fn group_nodes(rows: Vec<(JobKey, String)>) -> Vec<(JobKey, Vec<String>)> {
    let mut grouped: Vec<(JobKey, Vec<String>)> = Vec::new();
    for (job, node) in rows {
        match grouped.last_mut() {
            Some((last, nodes)) if *last == job => nodes.push(node),
            _ => grouped.push((job, vec![node])),
        }
    }
    grouped
}

/// `(job, hash, node)` rows sorted by job then hash into one entry per job, each hash
/// with its nodes.
fn group_holders(rows: Vec<(JobKey, String, String)>) -> Vec<DifferingJob> {
    let mut grouped: Vec<DifferingJob> = Vec::new();
    for (job, hash, node) in rows {
        let entry = match grouped.last_mut() {
            Some(last) if last.job == job => last,
            _ => {
                grouped.push(DifferingJob {
                    job,
                    defs: Vec::new(),
                });
                // Just pushed.
                let at = grouped.len() - 1;
                &mut grouped[at]
            }
        };
        match entry.defs.last_mut() {
            Some(def) if def.hash == hash => def.nodes.push(node),
            _ => entry.defs.push(DefHolders {
                hash,
                nodes: vec![node],
            }),
        }
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::JobKind;

    fn job(id: &str) -> JobKey {
        JobKey::new(JobKind::Job, id)
    }

    #[test]
    fn rows_are_grouped_by_job_in_their_order() {
        let rows = vec![
            (job("a"), "n1".to_string()),
            (job("a"), "n2".to_string()),
            (JobKey::new(JobKind::Http, "a"), "n1".to_string()),
            (job("b"), "n3".to_string()),
        ];
        assert_eq!(
            group_nodes(rows),
            vec![
                (job("a"), vec!["n1".to_string(), "n2".to_string()]),
                (JobKey::new(JobKind::Http, "a"), vec!["n1".to_string()]),
                (job("b"), vec!["n3".to_string()]),
            ]
        );
        assert!(group_nodes(Vec::new()).is_empty());
    }

    #[test]
    fn holders_are_grouped_by_job_then_hash() {
        let row = |id: &str, hash: &str, node: &str| (job(id), hash.to_string(), node.to_string());
        let grouped = group_holders(vec![
            row("a", "h1", "n1"),
            row("a", "h1", "n3"),
            row("a", "h2", "n2"),
            row("b", "h1", "n1"),
            row("b", "h3", "n2"),
        ]);
        assert_eq!(grouped.len(), 2);
        assert_eq!(grouped[0].job, job("a"));
        assert_eq!(
            grouped[0].defs,
            vec![
                DefHolders {
                    hash: "h1".into(),
                    nodes: vec!["n1".into(), "n3".into()],
                },
                DefHolders {
                    hash: "h2".into(),
                    nodes: vec!["n2".into()],
                },
            ]
        );
        assert_eq!(grouped[0].hash_of("n3"), Some("h1"));
        assert_eq!(grouped[0].hash_of("n2"), Some("h2"));
        assert_eq!(grouped[0].hash_of("elsewhere"), None);
        assert_eq!(grouped[1].defs.len(), 2);
    }

    #[test]
    fn an_unknown_kind_is_bad_data() {
        let rows = vec![("hook".to_string(), "a".to_string(), "n1".to_string())];
        assert!(matches!(keyed(rows), Err(ClusterError::BadData(_))));
    }
}
