//! [`ClusterStore`]'s part on the nodes themselves: a node's registration at its start
//! (refused to a second process using a live node's name) and its heartbeat.

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::{Postgres, Transaction};

use super::error::ClusterError;
use super::model::ReapedRun;
use super::store::ClusterStore;
use super::store_rows::reaped_run;

impl ClusterStore {
    /// Announces node `name` at its start. Whatever the cluster still records as running
    /// on it cannot be running (the node is starting): those runs are recorded as
    /// interrupted and returned.
    ///
    /// Node names are unique among live nodes: a name whose last heartbeat is younger
    /// than the lease and which another instance registered is refused
    /// ([`ClusterError::NodeNameInUse`]); the same instance registering again is this
    /// node's restart (one process per state directory, which its lock ensures).
    pub async fn register_node(
        &self,
        name: &str,
        max_job_running: u32,
    ) -> Result<Vec<ReapedRun>, ClusterError> {
        let max_job_running = i32::try_from(max_job_running.max(1)).unwrap_or(i32::MAX);
        let mut tx = self.pool().begin().await?;
        self.refuse_a_live_namesake(&mut tx, name).await?;
        sqlx::query(
            "INSERT INTO svc_nodes (name, started_at, heartbeat_at, max_job_running, instance)
             VALUES ($1, now(), now(), $2, $3)
             ON CONFLICT (name) DO UPDATE
             SET started_at = now(), heartbeat_at = now(),
                 max_job_running = EXCLUDED.max_job_running, instance = EXCLUDED.instance",
        )
        .bind(name)
        .bind(max_job_running)
        .bind(self.instance())
        .execute(&mut *tx)
        .await?;
        let rows = sqlx::query(
            "UPDATE svc_runs
             SET state = 'done', ended_at = now(), status = 'interrupted',
                 summary = 'interrupted: its node restarted'
             WHERE node = $1 AND state = 'running'
             RETURNING run_id, kind, id, counter, node",
        )
        .bind(name)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.iter().map(reaped_run).collect()
    }

    /// Fails with [`ClusterError::NodeNameInUse`] when node `name` is live and another
    /// instance's. Holds a lock on the name until the transaction ends, so that of two
    /// namesakes starting at once, also the very first time, the second sees the first.
    async fn refuse_a_live_namesake(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        name: &str,
    ) -> Result<(), ClusterError> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('svc_nodes:' || $1, 0))")
            .bind(name)
            .execute(&mut **tx)
            .await?;
        let holder: Option<(String, DateTime<Utc>, f64)> = sqlx::query_as(
            "SELECT instance, heartbeat_at,
                    EXTRACT(EPOCH FROM now() - heartbeat_at)::float8
             FROM svc_nodes WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&mut **tx)
        .await?;
        match holder {
            Some((instance, heartbeat_at, age))
                if age < self.lease_secs() && instance != self.instance() =>
            {
                Err(ClusterError::NodeNameInUse {
                    node: name.to_string(),
                    heartbeat_at: heartbeat_at.to_rfc3339_opts(SecondsFormat::Secs, true),
                    seconds_ago: age.max(0.0).round() as u64,
                })
            }
            _ => Ok(()),
        }
    }

    /// Node `name` is alive: its heartbeat and the leases of its running runs are renewed.
    /// Returns how many runs were renewed. A run already reaped is not renewed: its end
    /// will be reported as [`Finish::LeaseLost`].
    pub async fn heartbeat(&self, name: &str) -> Result<u64, ClusterError> {
        let mut tx = self.pool().begin().await?;
        let node = sqlx::query("UPDATE svc_nodes SET heartbeat_at = now() WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        if node.rows_affected() == 0 {
            return Err(ClusterError::UnknownNode(name.to_string()));
        }
        let runs = sqlx::query(
            "UPDATE svc_runs SET lease_until = now() + make_interval(secs => $2)
             WHERE node = $1 AND state = 'running'",
        )
        .bind(name)
        .bind(self.lease_secs())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(runs.rows_affected())
    }
}
