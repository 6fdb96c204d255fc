//! [`ClusterStore`]'s part on cancels: a cancel drops a job's queued run and is kept with
//! its running run, which the node running it reads back ([`ClusterStore::cancels_for`]),
//! so that a cancel whose signal that node missed still ends the run.

use sqlx::Row as _;

use super::error::ClusterError;
use super::model::JobKey;
use super::store::ClusterStore;
use super::store_rows::job_key;

impl ClusterStore {
    /// Records a cancel of `job`, in one transaction: its queued run is dropped (true
    /// when there was one), and its running run, on whichever node, is marked for that
    /// node to end.
    pub async fn record_cancel(&self, job: &JobKey) -> Result<bool, ClusterError> {
        let mut tx = self.pool().begin().await?;
        let dropped = sqlx::query(
            "UPDATE svc_runs
             SET state = 'done', ended_at = now(), status = 'canceled',
                 summary = 'canceled while queued'
             WHERE kind = $1 AND id = $2 AND state = 'queued'",
        )
        .bind(job.kind.as_str())
        .bind(&job.id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE svc_runs SET cancel_requested = true
             WHERE kind = $1 AND id = $2 AND state = 'running'",
        )
        .bind(job.kind.as_str())
        .bind(&job.id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(dropped.rows_affected() > 0)
    }

    /// The runs of node `node` still running that a cancel was asked of: the job and the
    /// run's counter.
    pub async fn cancels_for(&self, node: &str) -> Result<Vec<(JobKey, u64)>, ClusterError> {
        let rows = sqlx::query(
            "SELECT kind, id, counter FROM svc_runs
             WHERE node = $1 AND state = 'running' AND cancel_requested",
        )
        .bind(node)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let counter: i64 = row.try_get("counter")?;
                let counter = u64::try_from(counter)
                    .map_err(|_| ClusterError::BadData(format!("run counter {counter}")))?;
                Ok((job_key(row)?, counter))
            })
            .collect()
    }
}
