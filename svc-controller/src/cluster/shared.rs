//! What every node of a cluster shows, whichever node did the work: the runs of each job
//! (`svc_runs`), their logs (`svc_log_chunks`) and the audit log (`svc_audit`).
//!
//! A run's log is written by the node that runs it, to its own file as on a single node,
//! and copied into the shared table in fixed chunks of [`LOG_CHUNK`] bytes: chunk `n`
//! holds bytes `n * LOG_CHUNK ..`, so any copy of a log's prefix lands in the same rows.
//! A chunk is only ever replaced by a longer one (the log grows, never changes), which
//! makes each copy idempotent: the copier of a running log and the final copy at the
//! run's end may overlap, and a copy retried after an outage writes what was missing,
//! whatever the order in which they commit.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::error::ClusterError;
use super::model::JobKey;
use super::store::ClusterStore;
use super::store_rows::job_key;
use crate::store::state::RunStatus;

/// Bytes of one row of `svc_log_chunks`. Large enough that a log of `log_max_size`
/// takes few rows, small enough that the growing last chunk of a running log is cheap to
/// write again each time it is copied.
pub const LOG_CHUNK: usize = 64 * 1024;

/// Where a run of the shared table stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedRunState {
    /// Running on its node.
    Running,
    /// Ended, this way.
    Done(RunStatus),
}

/// A run as the shared table holds it, once a node has claimed it (queued runs have no
/// counter yet and are not shown).
#[derive(Debug, Clone, PartialEq)]
pub struct SharedRun {
    pub run_id: i64,
    pub job: JobKey,
    pub counter: u64,
    /// The node that ran (or runs) it.
    pub node: String,
    pub state: SharedRunState,
    /// The trigger's payload, as it was queued.
    pub payload: serde_json::Value,
    pub attempt: u32,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub http_status: Option<u16>,
    pub summary: Option<String>,
    /// Whether any of its log is in the shared table.
    pub has_log: bool,
}

/// Part of a run's log read from the shared table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedLog {
    pub run_id: i64,
    pub node: String,
    /// Read before the bytes: when it says `Done`, the bytes are the whole rest of the
    /// log, up to the length asked for (a node copies the whole log before it records
    /// the end).
    pub state: SharedRunState,
    /// The log from the offset asked for.
    pub bytes: Vec<u8>,
}

/// One entry of the shared audit log.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedAudit {
    /// Numbered by the database, across all nodes.
    pub seq: u64,
    pub at: DateTime<Utc>,
    /// The entry as its node wrote it (with the node's name in it).
    pub entry: serde_json::Value,
}

const RUN_COLUMNS: &str = "r.run_id, r.kind, r.id, r.counter, r.node, r.state, r.status, \
     r.trigger, r.attempt, r.started_at, r.ended_at, r.exit_code, r.signal, r.http_status, \
     r.summary, EXISTS (SELECT 1 FROM svc_log_chunks c WHERE c.run_id = r.run_id) AS has_log";

impl ClusterStore {
    /// Up to `limit` runs of `job` that a node has claimed (running or done), newest
    /// first, those numbered below `before` when given.
    pub async fn runs_page(
        &self,
        job: &JobKey,
        limit: u32,
        before: Option<u64>,
    ) -> Result<Vec<SharedRun>, ClusterError> {
        let before = before.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let rows = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM svc_runs r
             WHERE r.kind = $1 AND r.id = $2 AND r.counter IS NOT NULL
               AND ($3::bigint IS NULL OR r.counter < $3)
             ORDER BY r.counter DESC LIMIT $4"
        ))
        .bind(job.kind.as_str())
        .bind(&job.id)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(shared_run).collect()
    }

    /// Copies `bytes`, the log of run `run_id` from byte `offset` (a multiple of
    /// [`LOG_CHUNK`]), into the shared table. Idempotent: a chunk already there is
    /// replaced only by a longer one.
    pub async fn copy_log(
        &self,
        run_id: i64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), ClusterError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if offset % LOG_CHUNK as u64 != 0 {
            return Err(ClusterError::BadData(format!(
                "a log copy starts at {offset}, not at a chunk's start"
            )));
        }
        let first = i32::try_from(offset / LOG_CHUNK as u64)
            .map_err(|_| ClusterError::BadData(format!("a log offset too large: {offset}")))?;
        let mut tx = self.pool().begin().await?;
        for (n, chunk) in (first..).zip(bytes.chunks(LOG_CHUNK)) {
            sqlx::query(
                "INSERT INTO svc_log_chunks (run_id, seq, data) VALUES ($1, $2, $3)
                 ON CONFLICT (run_id, seq) DO UPDATE SET data = EXCLUDED.data
                 WHERE length(EXCLUDED.data) > length(svc_log_chunks.data)",
            )
            .bind(run_id)
            .bind(n)
            .bind(chunk)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The log of `job`'s run `counter` from byte `offset`, at most `max_len` bytes of
    /// it (only the chunks that hold them are read), or `None` when no node claimed such
    /// a run (or it was pruned).
    pub async fn read_log(
        &self,
        job: &JobKey,
        counter: u64,
        offset: u64,
        max_len: usize,
    ) -> Result<Option<SharedLog>, ClusterError> {
        let counter = i64::try_from(counter).unwrap_or(i64::MAX);
        let Some(row) = sqlx::query(
            "SELECT run_id, node, state, status FROM svc_runs
             WHERE kind = $1 AND id = $2 AND counter = $3",
        )
        .bind(job.kind.as_str())
        .bind(&job.id)
        .bind(counter)
        .fetch_optional(self.pool())
        .await?
        else {
            return Ok(None);
        };
        let run_id: i64 = row.try_get("run_id")?;
        let state = run_state(&row)?;
        // Read after the state, in a statement of its own: a run recorded as done had
        // its whole log copied before, so these rows are all of it.
        let first = i32::try_from(offset / LOG_CHUNK as u64).unwrap_or(i32::MAX);
        let skip = usize::try_from(offset % LOG_CHUNK as u64).unwrap_or(0);
        // Only the chunks that hold the bytes asked for.
        let wanted = skip.saturating_add(max_len).div_ceil(LOG_CHUNK);
        let end = first.saturating_add(i32::try_from(wanted).unwrap_or(i32::MAX));
        let chunks = sqlx::query(
            "SELECT data FROM svc_log_chunks
             WHERE run_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq",
        )
        .bind(run_id)
        .bind(first)
        .bind(end)
        .fetch_all(self.pool())
        .await?;
        let mut bytes = Vec::new();
        for chunk in &chunks {
            let data: Vec<u8> = chunk.try_get("data")?;
            bytes.extend_from_slice(&data);
        }
        bytes.drain(..skip.min(bytes.len()));
        bytes.truncate(max_len);
        Ok(Some(SharedLog {
            run_id,
            node: row
                .try_get::<Option<String>, _>("node")?
                .unwrap_or_default(),
            state,
            bytes,
        }))
    }

    /// The last `tail` bytes (at least; whole chunks are read) of the logs of `job`'s
    /// newest `runs` runs that have one, newest first, in one statement: only the chunks
    /// that hold the tails are read.
    pub async fn log_tails(
        &self,
        job: &JobKey,
        runs: u32,
        tail: usize,
    ) -> Result<Vec<Vec<u8>>, ClusterError> {
        // The last chunk may hold a byte only: one more than the tail needs.
        let chunks = i32::try_from(tail.div_ceil(LOG_CHUNK) + 1).unwrap_or(i32::MAX);
        let rows = sqlx::query(
            "WITH recent AS (
                 SELECT run_id, counter FROM svc_runs
                 WHERE kind = $1 AND id = $2 AND counter IS NOT NULL
                 ORDER BY counter DESC LIMIT $3
             ),
             last AS (
                 SELECT c.run_id, max(c.seq) AS top
                 FROM svc_log_chunks c JOIN recent USING (run_id) GROUP BY c.run_id
             )
             SELECT r.counter, c.data
             FROM recent r
             JOIN last l ON l.run_id = r.run_id
             JOIN svc_log_chunks c ON c.run_id = r.run_id AND c.seq > l.top - $4
             ORDER BY r.counter DESC, c.seq",
        )
        .bind(job.kind.as_str())
        .bind(&job.id)
        .bind(i64::from(runs))
        .bind(chunks)
        .fetch_all(self.pool())
        .await?;
        let mut logs: Vec<(i64, Vec<u8>)> = Vec::new();
        for row in &rows {
            let counter: i64 = row.try_get("counter")?;
            let data: Vec<u8> = row.try_get("data")?;
            match logs.last_mut() {
                Some((last, bytes)) if *last == counter => bytes.extend_from_slice(&data),
                _ => logs.push((counter, data)),
            }
        }
        Ok(logs
            .into_iter()
            .map(|(_, mut bytes)| {
                bytes.drain(..bytes.len().saturating_sub(tail));
                bytes
            })
            .collect())
    }

    /// Deletes the logs of `job`'s finished runs but the newest `keep` (the job's
    /// `log_retention`); the runs themselves stay, for the history.
    pub async fn trim_logs(&self, job: &JobKey, keep: u32) -> Result<(), ClusterError> {
        sqlx::query(
            "DELETE FROM svc_log_chunks WHERE run_id IN (
                 SELECT run_id FROM svc_runs
                 WHERE kind = $1 AND id = $2 AND state = 'done' AND counter IS NOT NULL
                 ORDER BY counter DESC OFFSET $3)",
        )
        .bind(job.kind.as_str())
        .bind(&job.id)
        .bind(i64::from(keep))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Appends audit entries, in order, in one transaction.
    pub async fn append_audit(
        &self,
        entries: &[(DateTime<Utc>, serde_json::Value)],
    ) -> Result<(), ClusterError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool().begin().await?;
        for (at, entry) in entries {
            sqlx::query("INSERT INTO svc_audit (at, entry) VALUES ($1, $2)")
                .bind(at)
                .bind(entry)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Up to `limit` audit entries numbered below `before` (all when `None`), newest
    /// first.
    pub async fn audit_page(
        &self,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<SharedAudit>, ClusterError> {
        let before = before.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let rows = sqlx::query(
            "SELECT seq, at, entry FROM svc_audit
             WHERE ($1::bigint IS NULL OR seq < $1) ORDER BY seq DESC LIMIT $2",
        )
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(SharedAudit {
                    seq: u64::try_from(row.try_get::<i64, _>("seq")?).unwrap_or(0),
                    at: row.try_get("at")?,
                    entry: row.try_get("entry")?,
                })
            })
            .collect()
    }
}

fn run_state(row: &PgRow) -> Result<SharedRunState, ClusterError> {
    let state: String = row.try_get("state")?;
    match state.as_str() {
        "running" => Ok(SharedRunState::Running),
        "done" => {
            let status: Option<String> = row.try_get("status")?;
            let status = status.unwrap_or_default();
            RunStatus::ALL
                .into_iter()
                .find(|known| known.as_str() == status)
                .map(SharedRunState::Done)
                .ok_or_else(|| ClusterError::BadData(format!("unknown run status {status:?}")))
        }
        other => Err(ClusterError::BadData(format!(
            "a run in state {other:?} has a counter"
        ))),
    }
}

fn shared_run(row: &PgRow) -> Result<SharedRun, ClusterError> {
    Ok(SharedRun {
        run_id: row.try_get("run_id")?,
        job: job_key(row)?,
        counter: u64::try_from(row.try_get::<i64, _>("counter")?).unwrap_or(0),
        node: row
            .try_get::<Option<String>, _>("node")?
            .unwrap_or_default(),
        state: run_state(row)?,
        payload: row.try_get("trigger")?,
        attempt: u32::try_from(row.try_get::<i32, _>("attempt")?).unwrap_or(1),
        started_at: row.try_get("started_at")?,
        ended_at: row.try_get("ended_at")?,
        exit_code: row.try_get("exit_code")?,
        signal: row.try_get("signal")?,
        http_status: row
            .try_get::<Option<i32>, _>("http_status")?
            .and_then(|status| u16::try_from(status).ok()),
        summary: row.try_get("summary")?,
        has_log: row.try_get("has_log")?,
    })
}
