//! [`ClusterStore`]: what the nodes of a cluster do to the shared database, each
//! operation one transaction (or one statement, which PostgreSQL runs as one), taking and
//! answering domain types.
//!
//! All times that are compared with each other (leases, heartbeats, slots' claims) are
//! the database's `now()`, never a node's clock, so nodes whose clocks drift apart still
//! agree on which lease has lapsed.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};

use super::error::ClusterError;
use super::failover::{Hosts, watch};
use super::model::{
    ClaimedRun, DefDrift, EnqueueOutcome, Finish, JobDef, JobKey, NewTrigger, PauseChanges,
    ReapedRun, RunOutcome, Signal,
};
use super::store_rows::{claimed_run, def_columns, defs_digest, parse_kind, reaped_run};
use super::store_slots::wake_channel;
use crate::store::state::RunStatus;

/// How long a running run stays its node's without a heartbeat.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a claim that lost a race on a unique key is tried again before giving up for
/// this round (the next round tries anew).
const CLAIM_ATTEMPTS: usize = 10;

/// The `LISTEN/NOTIFY` channel of the nodes' signals (pause, resume, cancel, work queued).
pub const SIGNAL_CHANNEL: &str = "svc_cluster";

/// The key of the transaction lock that orders pause changes (an arbitrary constant,
/// "svcpause" in ASCII, unlikely to meet another application's advisory locks).
const PAUSE_CHANGE_LOCK: i64 = 0x7376_6370_6175_7365;

/// How a store connects and how long its leases last.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most connections of the node's pool.
    pub max_connections: u32,
    /// How long an operation waits for a connection before it fails as unavailable.
    pub acquire_timeout: Duration,
    /// Lease of a running run, renewed by each heartbeat of its node; a node whose last
    /// heartbeat is younger than this is live.
    pub lease: Duration,
    /// Who this process is (its machine and state directory; see
    /// [`ClusterStore::register_node`]): a node name held by a live node of another
    /// instance is refused.
    pub instance: String,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(5),
            lease: DEFAULT_LEASE,
            instance: String::new(),
        }
    }
}

/// One node's handle on the cluster's database. Cheap to clone (the pool is shared).
#[derive(Debug, Clone)]
pub struct ClusterStore {
    pool: PgPool,
    /// [`StoreOptions::lease`] in seconds, as `make_interval` takes it.
    lease_secs: f64,
    /// [`StoreOptions::instance`].
    instance: String,
    /// The database's hosts and which one the pool uses.
    hosts: Arc<Hosts>,
    /// Held by every clone: the failover watcher ends once the last one is dropped.
    _alive: Arc<()>,
}

impl ClusterStore {
    /// A store over a pool that connects on first use: a database that is down when the
    /// node starts is an [`ClusterError::Unavailable`] of the first operation, not a
    /// failure here. Fails only when `url` does not parse.
    ///
    /// `url` may list several hosts (libpq's multi-host form): the pool then connects to
    /// the first usable one, as `target_session_attrs` says, and a watcher task on the
    /// current Tokio runtime (there must be one) moves it to another host when the one in
    /// use fails or becomes read-only.
    pub fn new(url: &str, options: &StoreOptions) -> Result<ClusterStore, ClusterError> {
        let targets = crate::config::parse_database_url(url).map_err(ClusterError::InvalidUrl)?;
        let target = targets.target();
        let list = targets
            .hosts
            .into_iter()
            .map(|host| host.application_name("svc-controller"))
            .collect();
        let hosts = Hosts::new(list, target);
        let first = hosts
            .first()
            .ok_or_else(|| ClusterError::InvalidUrl("the URL names no host".into()))?;
        let pool = hosts
            .hook(
                PgPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout),
            )
            .connect_lazy_with(first);
        let alive = Arc::new(());
        if hosts.len() > 1 {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(watch(
                    Arc::clone(&hosts),
                    pool.clone(),
                    Arc::downgrade(&alive),
                ));
            }
        }
        Ok(ClusterStore {
            pool,
            lease_secs: options.lease.as_secs_f64(),
            instance: options.instance.clone(),
            hosts,
            _alive: alive,
        })
    }

    /// The database's hosts (for `failover.rs`).
    pub(super) fn hosts(&self) -> &Arc<Hosts> {
        &self.hosts
    }

    /// The pool, for reads the store has no operation for yet.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The lease in seconds, which also tells a live node from a gone one (for the
    /// store's other files: `drift.rs`).
    pub(super) fn lease_secs(&self) -> f64 {
        self.lease_secs
    }

    /// [`StoreOptions::instance`] (for `store_nodes.rs`).
    pub(super) fn instance(&self) -> &str {
        &self.instance
    }

    /// Closes the pool's connections.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Whether the server's socket accepts a connection within `limit`, without logging
    /// in. It tells a server that is not there (nothing listens, the host does not answer)
    /// from one that is there but slow to log in and answer, which a caller such as
    /// `--check` can then wait for longer: a login's time depends on the server's load, a
    /// refused or unanswered connection does not get better by waiting.
    pub async fn reach(&self, limit: Duration) -> Result<(), ClusterError> {
        let options = self.pool.connect_options();
        let port = options.get_port();
        // The same choice of socket as sqlx's own connect: a socket directory, or a host
        // that is a path, means a Unix socket named after the port.
        let unix_dir = match options.get_socket() {
            Some(dir) => Some(dir.display().to_string()),
            None if options.get_host().starts_with('/') => Some(options.get_host().to_owned()),
            None => None,
        };
        let connect = async {
            match &unix_dir {
                Some(dir) => tokio::net::UnixStream::connect(format!("{dir}/.s.PGSQL.{port}"))
                    .await
                    .map(drop),
                None => tokio::net::TcpStream::connect((options.get_host(), port))
                    .await
                    .map(drop),
            }
        };
        match tokio::time::timeout(limit, connect).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(ClusterError::Unavailable(sqlx::Error::Io(err))),
            Err(_elapsed) => Err(ClusterError::Unavailable(sqlx::Error::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {} s", limit.as_secs()),
                ),
            ))),
        }
    }

    /// The database's clock, which every lease is measured by.
    pub async fn db_now(&self) -> Result<DateTime<Utc>, ClusterError> {
        Ok(sqlx::query_scalar("SELECT now()")
            .fetch_one(&self.pool)
            .await?)
    }

    /// Records the jobs node `node` defines, each with its definition hash, in one
    /// transaction: a `svc_jobs` row for each job the cluster does not know yet, this
    /// node's hashes in `svc_job_defs` (its rows of jobs it no longer defines removed),
    /// and answers how they stand against the other live nodes' definitions. Live means
    /// a heartbeat within one lease, the rule reaping goes by: a node whose runs would
    /// be reaped does not count. `node` must be registered.
    pub async fn sync_job_defs(
        &self,
        node: &str,
        defs: &[JobDef],
    ) -> Result<DefDrift, ClusterError> {
        let (kinds, ids, hashes) = def_columns(defs);
        let mut tx = self.pool.begin().await?;
        let known: Option<i32> = sqlx::query_scalar("SELECT 1 FROM svc_nodes WHERE name = $1")
            .bind(node)
            .fetch_optional(&mut *tx)
            .await?;
        if known.is_none() {
            return Err(ClusterError::UnknownNode(node.to_string()));
        }
        sqlx::query(
            "INSERT INTO svc_jobs (kind, id)
             SELECT kind, id FROM UNNEST($1::text[], $2::text[]) AS m(kind, id)
             ON CONFLICT DO NOTHING",
        )
        .bind(&kinds)
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM svc_job_defs d
             WHERE d.node = $1
               AND NOT EXISTS (SELECT 1 FROM UNNEST($2::text[], $3::text[]) AS m(kind, id)
                               WHERE m.kind = d.kind AND m.id = d.id)",
        )
        .bind(node)
        .bind(&kinds)
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO svc_job_defs (kind, id, node, def_hash, seen_at)
             SELECT kind, id, $1, def_hash, now()
             FROM UNNEST($2::text[], $3::text[], $4::text[]) AS m(kind, id, def_hash)
             ON CONFLICT (kind, id, node) DO UPDATE
             SET def_hash = EXCLUDED.def_hash, seen_at = EXCLUDED.seen_at",
        )
        .bind(node)
        .bind(&kinds)
        .bind(&ids)
        .bind(&hashes)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE svc_nodes SET defs_digest = $2 WHERE name = $1")
            .bind(node)
            .bind(defs_digest(&kinds, &ids, &hashes))
            .execute(&mut *tx)
            .await?;
        let differing: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT mine.kind, mine.id, other.node
             FROM svc_job_defs mine
             JOIN svc_job_defs other
               ON other.kind = mine.kind AND other.id = mine.id AND other.node <> mine.node
             JOIN svc_nodes n ON n.name = other.node
             WHERE mine.node = $1 AND other.def_hash <> mine.def_hash
               AND n.heartbeat_at > now() - make_interval(secs => $2)
             ORDER BY mine.kind, mine.id, other.node",
        )
        .bind(node)
        .bind(self.lease_secs)
        .fetch_all(&mut *tx)
        .await?;
        let missing: Vec<(String, String)> = sqlx::query_as(
            "SELECT DISTINCT other.kind, other.id
             FROM svc_job_defs other
             JOIN svc_nodes n ON n.name = other.node
             WHERE other.node <> $1
               AND n.heartbeat_at > now() - make_interval(secs => $2)
               AND NOT EXISTS (SELECT 1 FROM svc_job_defs mine
                               WHERE mine.node = $1 AND mine.kind = other.kind
                                 AND mine.id = other.id)
             ORDER BY other.kind, other.id",
        )
        .bind(node)
        .bind(self.lease_secs)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut drift = DefDrift::default();
        for (kind, id, other) in differing {
            let job = JobKey::new(parse_kind(&kind)?, id);
            match drift.differ.last_mut() {
                Some((last, nodes)) if *last == job => nodes.push(other),
                _ => drift.differ.push((job, vec![other])),
            }
        }
        for (kind, id) in missing {
            drift.missing_here.push(JobKey::new(parse_kind(&kind)?, id));
        }
        Ok(drift)
    }

    /// Offers a trigger to `job`'s queue: queued when the job has no queued run (the
    /// one-slot queue, cluster-wide, kept by a partial unique index), refused when it has
    /// one or when the job is paused. No other node is woken: the accepting node claims
    /// it (or another node at its next poll); see [`enqueue_waking`](Self::enqueue_waking).
    pub async fn enqueue(
        &self,
        job: &JobKey,
        trigger: &NewTrigger,
    ) -> Result<EnqueueOutcome, ClusterError> {
        self.enqueue_waking(job, trigger, None).await
    }

    /// [`enqueue`](Self::enqueue), and when the trigger is queued, a wake-up to node
    /// `wake` alone (on its own channel, [`wake_channel`]), at the commit: one node's
    /// claimer runs for the trigger, not every node's.
    pub async fn enqueue_waking(
        &self,
        job: &JobKey,
        trigger: &NewTrigger,
        wake: Option<&str>,
    ) -> Result<EnqueueOutcome, ClusterError> {
        let mut tx = self.pool.begin().await?;
        ensure_job(&mut tx, job).await?;
        // A pause that commits after this read and before the insert leaves the trigger
        // queued on a paused job, as a trigger accepted just before a pause would be:
        // a paused job keeps its queued trigger.
        if is_paused(&mut tx, job).await? {
            tx.commit().await?;
            return Ok(EnqueueOutcome::Paused);
        }
        let run_id = insert_queued(&mut tx, job, trigger).await?;
        if let (Some(_), Some(node)) = (run_id, wake) {
            // In the transaction, not after it: no second round trip per trigger.
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(wake_channel(node))
                .bind(Signal::wake(&trigger.accepted_by).to_text())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(match run_id {
            Some(run_id) => EnqueueOutcome::Enqueued { run_id },
            None => EnqueueOutcome::QueueFull,
        })
    }

    /// Claims up to `limit` queued runs for `node`, oldest first, of jobs that are neither
    /// paused nor running and that `node` defines (its rows in `svc_job_defs`, written by
    /// [`sync_job_defs`](Self::sync_job_defs)): each becomes running on `node` under a
    /// lease and takes its job's next counter, all in one statement. Why only its own
    /// jobs: any node accepts a trigger for a job the cluster knows, and a node that
    /// claimed a job it does not define could not run it. Rows another node is claiming are skipped
    /// (`SKIP LOCKED`), so claimers never wait for each other. A claim that loses a race
    /// on a unique key is tried again, never reported.
    pub async fn claim_runs(
        &self,
        node: &str,
        limit: u32,
    ) -> Result<Vec<ClaimedRun>, ClusterError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::from(limit);
        for _ in 0..CLAIM_ATTEMPTS {
            let claimed = sqlx::query(
                // `picked` locks the queued rows it takes; the job's counter row is
                // locked by its update, so counters are given one at a time.
                "WITH picked AS (
                     SELECT r.run_id, r.kind, r.id
                     FROM svc_runs r
                     JOIN svc_jobs j ON j.kind = r.kind AND j.id = r.id
                     WHERE r.state = 'queued' AND NOT j.paused
                       AND EXISTS (SELECT 1 FROM svc_job_defs d
                                   WHERE d.kind = r.kind AND d.id = r.id AND d.node = $1)
                       AND NOT EXISTS (SELECT 1 FROM svc_runs x
                                       WHERE x.kind = r.kind AND x.id = r.id
                                         AND x.state = 'running')
                     ORDER BY r.run_id
                     LIMIT $2
                     FOR UPDATE OF r SKIP LOCKED
                 ),
                 numbered AS (
                     UPDATE svc_jobs j SET counter = j.counter + 1
                     FROM picked p
                     WHERE j.kind = p.kind AND j.id = p.id
                     RETURNING j.kind, j.id, j.counter
                 )
                 UPDATE svc_runs r
                 SET state = 'running', node = $1, counter = n.counter, started_at = now(),
                     lease_until = now() + make_interval(secs => $3)
                 FROM picked p
                 JOIN numbered n ON n.kind = p.kind AND n.id = p.id
                 WHERE r.run_id = p.run_id
                 RETURNING r.run_id, r.kind, r.id, r.counter, r.attempt, r.trigger,
                           r.accepted_by, r.accepted_at, r.started_at, r.lease_until",
            )
            .bind(node)
            .bind(limit)
            .bind(self.lease_secs)
            .fetch_all(&self.pool)
            .await;
            match claimed {
                Ok(rows) => {
                    let mut runs = rows
                        .iter()
                        .map(claimed_run)
                        .collect::<Result<Vec<_>, _>>()?;
                    runs.sort_by_key(|run| run.run_id);
                    return Ok(runs);
                }
                Err(err) => match ClusterError::from(err) {
                    ClusterError::Conflict(_) => continue,
                    other => return Err(other),
                },
            }
        }
        Ok(Vec::new())
    }

    /// Records the end of run `run_id`, only if it is still running on `node`, with the
    /// times its node ran it when the outcome has them (else the claim's time and now).
    /// When it is
    /// not (its lease lapsed and it was reaped, or it was never this node's), nothing is
    /// written and [`Finish::LeaseLost`] says so.
    pub async fn finish_run(
        &self,
        run_id: i64,
        node: &str,
        outcome: &RunOutcome,
    ) -> Result<Finish, ClusterError> {
        let done = sqlx::query(
            "UPDATE svc_runs
             SET state = 'done', status = $3, exit_code = $4, signal = $5,
                 http_status = $6, summary = $7,
                 started_at = COALESCE($8, started_at), ended_at = COALESCE($9, now())
             WHERE run_id = $1 AND node = $2 AND state = 'running'",
        )
        .bind(run_id)
        .bind(node)
        .bind(outcome.status.as_str())
        .bind(outcome.exit_code)
        .bind(outcome.signal)
        .bind(outcome.http_status.map(i32::from))
        .bind(outcome.summary.as_deref())
        .bind(outcome.ran.map(|(started, _)| started))
        .bind(outcome.ran.map(|(_, ended)| ended))
        .execute(&self.pool)
        .await?;
        Ok(if done.rows_affected() == 1 {
            Finish::Recorded
        } else {
            Finish::LeaseLost
        })
    }

    /// Gives a claimed run that did not begin (its node is stopping, or the job was
    /// paused there meanwhile) back to the queue, for any node to claim; its counter is
    /// not reused. When the job has another queued run already (the one-slot queue),
    /// the run cannot go back and is recorded as interrupted instead. Only `node`'s own
    /// running run is touched; false when it was no longer `node`'s.
    pub async fn release_run(&self, run_id: i64, node: &str) -> Result<bool, ClusterError> {
        let requeued = sqlx::query(
            "UPDATE svc_runs
             SET state = 'queued', node = NULL, counter = NULL, lease_until = NULL,
                 started_at = NULL
             WHERE run_id = $1 AND node = $2 AND state = 'running'",
        )
        .bind(run_id)
        .bind(node)
        .execute(&self.pool)
        .await;
        match requeued {
            Ok(done) => Ok(done.rows_affected() == 1),
            Err(err) => match ClusterError::from(err) {
                ClusterError::Conflict(_) => {
                    let mut outcome = RunOutcome::new(RunStatus::Interrupted);
                    outcome.summary = Some(
                        "interrupted: released before it began, and the queue was full".into(),
                    );
                    Ok(self.finish_run(run_id, node, &outcome).await? == Finish::Recorded)
                }
                other => Err(other),
            },
        }
    }

    /// Raises each job's counter to at least the given value (never lowers it): a node
    /// that ran as a single node before keeps its run numbers, and its logs, unique.
    pub async fn raise_counters(&self, counters: &[(JobKey, i64)]) -> Result<(), ClusterError> {
        let mut tx = self.pool.begin().await?;
        for (job, counter) in counters {
            sqlx::query(
                "INSERT INTO svc_jobs (kind, id, counter) VALUES ($1, $2, $3)
                 ON CONFLICT (kind, id) DO UPDATE
                 SET counter = GREATEST(svc_jobs.counter, EXCLUDED.counter)",
            )
            .bind(job.kind.as_str())
            .bind(&job.id)
            .bind(*counter)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Deletes timer slots older than `slots_before` (no node offers them any more) and
    /// all but the newest `runs_kept` finished runs of each job (their log chunks go
    /// with them).
    pub async fn prune(
        &self,
        slots_before: DateTime<Utc>,
        runs_kept: i64,
    ) -> Result<(), ClusterError> {
        sqlx::query("DELETE FROM svc_slots WHERE slot < $1")
            .bind(slots_before)
            .execute(&self.pool)
            .await?;
        sqlx::query(
            "DELETE FROM svc_runs r
             USING (SELECT run_id,
                           row_number() OVER (PARTITION BY kind, id ORDER BY run_id DESC) AS n
                    FROM svc_runs WHERE state = 'done') old
             WHERE r.run_id = old.run_id AND old.n > $1",
        )
        .bind(runs_kept)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every job's pause state, as the cluster holds it.
    pub async fn paused_states(&self) -> Result<Vec<(JobKey, bool)>, ClusterError> {
        let rows = sqlx::query("SELECT kind, id, paused FROM svc_jobs ORDER BY kind, id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let kind: String = row.try_get("kind")?;
                Ok((
                    JobKey::new(parse_kind(&kind)?, row.try_get::<String, _>("id")?),
                    row.try_get("paused")?,
                ))
            })
            .collect()
    }

    /// Tells every node listening on [`SIGNAL_CHANNEL`] (`LISTEN/NOTIFY`).
    pub async fn signal(&self, signal: &Signal) -> Result<(), ClusterError> {
        let mut connection = self.pool.acquire().await?;
        notify(&mut connection, signal).await
    }

    /// A listener on [`SIGNAL_CHANNEL`] and on node `node`'s own wake-up channel
    /// ([`wake_channel`]), on a connection of its own; see [`listen`](Self::listen).
    pub async fn listen_as(&self, node: &str) -> Result<sqlx::postgres::PgListener, ClusterError> {
        let mut listener = self.listen().await?;
        listener.listen(&wake_channel(node)).await?;
        Ok(listener)
    }

    /// A listener on [`SIGNAL_CHANNEL`], on a connection of its own. It reconnects by
    /// itself after a lost connection; signals sent meanwhile are lost, which is why
    /// every signal's effect is also read back from the tables now and then.
    pub async fn listen(&self) -> Result<sqlx::postgres::PgListener, ClusterError> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(SIGNAL_CHANNEL).await?;
        Ok(listener)
    }

    /// Records as interrupted every running run whose lease ended at or before `now` and
    /// returns them. `now` is the database's clock ([`db_now`](Self::db_now)), the one
    /// leases are written in; a later time reaps what will have lapsed by then.
    pub async fn reap_expired(&self, now: DateTime<Utc>) -> Result<Vec<ReapedRun>, ClusterError> {
        let rows = sqlx::query(
            "UPDATE svc_runs
             SET state = 'done', ended_at = now(), status = 'interrupted',
                 summary = 'interrupted: the lease of node ' || node || ' lapsed'
             WHERE state = 'running' AND lease_until <= $1
             RETURNING run_id, kind, id, counter, node",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        let mut runs = rows.iter().map(reaped_run).collect::<Result<Vec<_>, _>>()?;
        runs.sort_by_key(|run| run.run_id);
        Ok(runs)
    }

    /// Pauses or resumes `job` for the whole cluster. A queued run stays queued while the
    /// job is paused; claimers skip it until the job is resumed.
    pub async fn set_paused(&self, job: &JobKey, paused: bool) -> Result<(), ClusterError> {
        let mut tx = self.pool.begin().await?;
        // Held to the commit: change numbers commit in the order they are taken, so a
        // reader that saw number N has seen every change below it (`pause_changes`).
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(PAUSE_CHANGE_LOCK)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO svc_jobs (kind, id, paused, paused_change)
             VALUES ($1, $2, $3, nextval('svc_pause_changes'))
             ON CONFLICT (kind, id) DO UPDATE
             SET paused = EXCLUDED.paused, paused_change = EXCLUDED.paused_change",
        )
        .bind(job.kind.as_str())
        .bind(&job.id)
        .bind(paused)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The pause states changed since change number `since` (every job's when `None`),
    /// in the order they changed, and the number to ask from next time.
    pub async fn pause_changes(&self, since: Option<i64>) -> Result<PauseChanges, ClusterError> {
        let rows = sqlx::query(
            "SELECT kind, id, paused, paused_change FROM svc_jobs
             WHERE $1::bigint IS NULL OR paused_change > $1
             ORDER BY paused_change, kind, id",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        let mut changes = PauseChanges {
            changed: Vec::with_capacity(rows.len()),
            mark: since.unwrap_or(0),
        };
        for row in &rows {
            let kind: String = row.try_get("kind")?;
            let job = JobKey::new(parse_kind(&kind)?, row.try_get::<String, _>("id")?);
            changes.changed.push((job, row.try_get("paused")?));
            changes.mark = changes.mark.max(row.try_get("paused_change")?);
        }
        Ok(changes)
    }

    /// Takes or renews lease `name` for `holder` for `ttl`: taken when free or lapsed,
    /// renewed only by its holder. True when `holder` holds it now.
    pub async fn try_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, ClusterError> {
        // The conflict's update locks the row and checks the condition on its latest
        // version, so two nodes taking a lapsed lease at once cannot both win.
        let held = sqlx::query(
            "INSERT INTO svc_leases (name, holder, expires_at)
             VALUES ($1, $2, now() + make_interval(secs => $3))
             ON CONFLICT (name) DO UPDATE
             SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
             WHERE svc_leases.holder = EXCLUDED.holder OR svc_leases.expires_at <= now()",
        )
        .bind(name)
        .bind(holder)
        .bind(ttl.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(held.rows_affected() == 1)
    }

    /// Gives lease `name` up, if `holder` holds it, so another node may take it at once.
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<(), ClusterError> {
        sqlx::query("DELETE FROM svc_leases WHERE name = $1 AND holder = $2")
            .bind(name)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Creates `job`'s row when the cluster does not have it yet (the first node that meets a
/// job makes it; its pause state and counter start from nothing).
async fn ensure_job(tx: &mut Transaction<'_, Postgres>, job: &JobKey) -> Result<(), ClusterError> {
    sqlx::query("INSERT INTO svc_jobs (kind, id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(job.kind.as_str())
        .bind(&job.id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn is_paused(tx: &mut Transaction<'_, Postgres>, job: &JobKey) -> Result<bool, ClusterError> {
    Ok(
        sqlx::query_scalar("SELECT paused FROM svc_jobs WHERE kind = $1 AND id = $2")
            .bind(job.kind.as_str())
            .bind(&job.id)
            .fetch_one(&mut **tx)
            .await?,
    )
}

/// Sends `signal` on [`SIGNAL_CHANNEL`] over `connection` (inside a transaction, at its
/// commit). A payload is a few hundred bytes at most; PostgreSQL takes up to 8,000.
async fn notify(connection: &mut sqlx::PgConnection, signal: &Signal) -> Result<(), ClusterError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(SIGNAL_CHANNEL)
        .bind(signal.to_text())
        .execute(&mut *connection)
        .await?;
    Ok(())
}

/// Inserts `trigger` as `job`'s queued run, behind a running run too, unless one is
/// queued already (the one-slot queue's partial unique index; a timer's slot queues its
/// run only when the job is idle: `store_slots.rs`). The new run's ID, or `None` when
/// nothing was inserted.
async fn insert_queued(
    tx: &mut sqlx::PgConnection,
    job: &JobKey,
    trigger: &NewTrigger,
) -> Result<Option<i64>, ClusterError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO svc_runs (kind, id, state, trigger, attempt, accepted_by, accepted_at)
         VALUES ($1, $2, 'queued', $3, $4, $5, now())
         ON CONFLICT (kind, id) WHERE state = 'queued' DO NOTHING
         RETURNING run_id",
    )
    .bind(job.kind.as_str())
    .bind(&job.id)
    .bind(&trigger.payload)
    .bind(trigger.attempt)
    .bind(&trigger.accepted_by)
    .fetch_optional(&mut *tx)
    .await?)
}
