//! A cluster node's runs as every node shows them: the logs of the runs this node runs,
//! copied into the shared table while they grow (every [`COPY_EVERY`]) and whole before
//! the run's end is recorded; and the reads of the shared runs and logs that the HTTP
//! layer serves when a run was not this node's; and the runs of other nodes as this
//! node's jobs show them (a run going on there, then its result in the job's state),
//! told by their signals. Nothing here runs on a single node.
//!
//! Each node still writes its own log files, as on a single node: a run never waits for
//! the database, and an outage loses no line. The copy is what the other nodes read.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::time::Duration;

use super::cluster_link::{ClusterLink, TriggerSummary, job_key, trigger_summary};
use super::events::EngineEvent;
use super::{Engine, EngineError, Kind, TriggerSource};
use crate::cluster::{
    ClusterError, ClusterStore, JobKey, LOG_CHUNK, SharedLog, SharedRun, SharedRunState,
};
use crate::store::logstore::LogDir;
use crate::store::state::RunStatus;

/// How often the logs of running runs are copied: how far behind another node's view of
/// a running log may be.
const COPY_EVERY: Duration = Duration::from_secs(1);
/// Most bytes of one log read and copied at a time (a multiple of [`LOG_CHUNK`]).
const COPY_STEP: usize = 64 * LOG_CHUNK;
/// Most runs a page of the shared history holds.
pub const MAX_SHARED_PAGE: u32 = crate::store::history::MAX_PAGE as u32;

/// The log of a claimed run whose end is to be reported: copied whole first.
#[derive(Debug, Clone)]
pub(super) struct LogCopy {
    pub dir: LogDir,
    pub counter: u64,
    /// The job's `log_retention`: the shared table keeps as many logs of the job.
    pub keep: usize,
}

/// A run of the shared table as the HTTP layer shows it: the run, and what its
/// trigger's payload says of how it was started.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterRun {
    pub run: SharedRun,
    pub trigger: TriggerSummary,
}

/// The shared log's status as a log file name says it.
pub fn shared_log_status(state: SharedRunState) -> &'static str {
    match state {
        SharedRunState::Running => "started",
        SharedRunState::Done(status) => status.result().log_status(),
    }
}

/// Reads the log of run `counter` in `dir` from `from` to its end (at most `max` bytes).
/// `None` when the log is gone. Blocking.
fn read_log_from(
    dir: &LogDir,
    counter: u64,
    from: u64,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let Some((_, mut file)) = dir.open(counter)? else {
        return Ok(None);
    };
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(u64::try_from(max).unwrap_or(u64::MAX))
        .read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Copies run `run_id`'s log from byte `copied` to its end, a step at a time; answers how
/// far it is copied. The copy starts at the chunk that holds byte `copied`, so a chunk
/// that was copied while shorter is written again whole.
async fn copy_rest(
    store: &ClusterStore,
    run_id: i64,
    dir: &LogDir,
    counter: u64,
    mut copied: u64,
) -> Result<u64, ClusterError> {
    loop {
        let from = copied - copied % LOG_CHUNK as u64;
        let read = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || read_log_from(&dir, counter, from, COPY_STEP)).await
        };
        let bytes = match read {
            Ok(Ok(Some(bytes))) => bytes,
            // Gone (retention) or unreadable: nothing more to copy.
            Ok(Ok(None)) => return Ok(copied),
            Ok(Err(err)) => {
                tracing::warn!(run_id, counter, error = %err, "cannot read a log to copy it to the cluster");
                return Ok(copied);
            }
            Err(_) => return Ok(copied),
        };
        let end = from + bytes.len() as u64;
        if end <= copied {
            return Ok(copied);
        }
        store.copy_log(run_id, from, &bytes).await?;
        copied = end;
        if bytes.len() < COPY_STEP {
            return Ok(copied);
        }
    }
}

impl Engine {
    /// Copies the logs of this node's running claimed runs every [`COPY_EVERY`], so that
    /// every node can show them while they run.
    pub(super) async fn log_copier(self, link: ClusterLink) {
        let stop = self.inner.cluster_stop.clone();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(COPY_EVERY) => {}
                _ = stop.cancelled() => return,
            }
            // Only the runs this node claimed: a walk of the registry every second would
            // hold its lock over every job, 100,000 of them at scale.
            let running = link.copied.tracked();
            for (run_id, log) in running {
                match copy_rest(&link.store, run_id, &log.dir, log.counter, log.copied).await {
                    Ok(now) => link.copied.set(run_id, now),
                    // Copied at the run's end, or the next round.
                    Err(err) => {
                        tracing::debug!(run_id, error = %err, "a running log was not copied to the cluster");
                        break;
                    }
                }
            }
        }
    }

    /// Copies a claimed run's whole log before its end is reported (retried by the
    /// caller while the database is away).
    pub(super) async fn copy_final_log(
        link: &ClusterLink,
        run_id: i64,
        log: &LogCopy,
    ) -> Result<(), ClusterError> {
        let copied = link.copied.get(run_id);
        let copied = copy_rest(&link.store, run_id, &log.dir, log.counter, copied).await?;
        link.copied.set(run_id, copied);
        Ok(())
    }

    /// After a run's end is recorded: the shared table keeps as many logs of the job as
    /// this node does.
    pub(super) async fn after_final_log(link: &ClusterLink, job: &JobKey, log: &LogCopy) {
        let keep = u32::try_from(log.keep).unwrap_or(u32::MAX);
        if let Err(err) = link.store.trim_logs(job, keep).await {
            tracing::debug!(job = %job.id, error = %err, "old logs were not trimmed in the cluster");
        }
    }

    /// Reads back the runs this node shows as going on elsewhere: an `ended` signal lost
    /// while the listener reconnected, or never sent (the node died and its run was
    /// reaped), would otherwise leave the job shown as running for ever. Called with the
    /// pause read-back, every few seconds; the runs are few (one per job at most).
    pub(super) fn recheck_remote_runs(&self, link: &ClusterLink) {
        let remote: Vec<(Kind, String, u64)> = {
            let registry = self.lock();
            let jobs = registry.jobs.iter().map(|(id, e)| (Kind::Job, id, e));
            let http = registry.http.iter().map(|(id, e)| (Kind::Http, id, e));
            jobs.chain(http)
                .filter_map(|(kind, id, entry)| Some((kind, id.clone(), entry.cluster.remote_run?)))
                .collect()
        };
        for (kind, id, counter) in remote {
            let task = self
                .clone()
                .remote_run(link.clone(), kind, id, counter, true);
            self.inner.runtime.spawn(task);
        }
    }

    /// Another node signalled that run `counter` of a job began there (`ended` false) or
    /// that its end is recorded (`ended` true): this node shows it as the job's running
    /// run, then takes its result, time and counter into the job's state, as its own
    /// runs' would be, and tells its watchers. Signals may come in any order: a late
    /// `began` of a run whose end is known is ignored, and a run is read back from the
    /// shared table rather than trusted from the signal.
    pub(super) async fn remote_run(
        self,
        link: ClusterLink,
        kind: Kind,
        id: String,
        counter: u64,
        ended: bool,
    ) {
        let page = link
            .store
            .runs_page(&job_key(kind, &id), 1, Some(counter.saturating_add(1)))
            .await;
        let run = match page {
            Ok(mut runs) if runs.first().is_some_and(|run| run.counter == counter) => {
                runs.remove(0)
            }
            Ok(_) => return,
            Err(err) => {
                tracing::debug!(job = %id, counter, error = %err, "another node's run could not be read");
                return;
            }
        };
        let event = {
            let mut registry = self.lock();
            let Some(entry) = registry.get(kind, &id) else {
                return;
            };
            // Known already: its end raised the counter.
            if counter <= entry.state.counter {
                return;
            }
            match (run.state, ended) {
                (SharedRunState::Running, false) => {
                    entry.cluster.remote_run = Some(counter);
                    run_started_event(kind, &id, &run)
                }
                (SharedRunState::Done(status), true) => {
                    if entry
                        .cluster
                        .remote_run
                        .is_some_and(|remote| remote <= counter)
                    {
                        entry.cluster.remote_run = None;
                    }
                    entry.state.counter = counter;
                    entry.state.last_result = Some(status.result());
                    if let Some(started) = run.started_at {
                        entry.state.last_run = entry.state.last_run.max(Some(started));
                    }
                    run_ended_event(kind, &id, status, &run)
                }
                // Began, but ended by the time it was read: its end signal follows.
                _ => return,
            }
        };
        self.changed();
        self.publish(|| event);
        if ended {
            let engine = self.clone();
            let _ = tokio::task::spawn_blocking(move || {
                engine.persist(kind, &id, crate::util::fsutil::Durability::Atomic);
            })
            .await;
        }
    }

    /// In cluster mode, up to `limit` runs of a job from the shared table (every node's),
    /// newest first, those numbered below `before` when given; `None` on a single node.
    pub async fn cluster_runs(
        &self,
        kind: Kind,
        id: &str,
        limit: u32,
        before: Option<u64>,
    ) -> Result<Option<Vec<ClusterRun>>, EngineError> {
        let Some(link) = self.cluster() else {
            return Ok(None);
        };
        let id = self.lock().resolve(kind, id).ok_or(EngineError::NotFound)?;
        let runs = link
            .store
            .runs_page(&job_key(kind, &id), limit.min(MAX_SHARED_PAGE), before)
            .await
            .map_err(|err| read_refused(err, "the run history"))?;
        Ok(Some(
            runs.into_iter()
                .map(|run| ClusterRun {
                    trigger: trigger_summary(&run.payload),
                    run,
                })
                .collect(),
        ))
    }

    /// In cluster mode, the log of a job's run `counter` from byte `offset`, at most
    /// `max_len` bytes of it, as the shared table has it (whichever node ran it); `None`
    /// on a single node or when the cluster has no such run.
    pub async fn cluster_log(
        &self,
        kind: Kind,
        id: &str,
        counter: u64,
        offset: u64,
        max_len: usize,
    ) -> Result<Option<SharedLog>, EngineError> {
        let Some(link) = self.cluster() else {
            return Ok(None);
        };
        let id = self.lock().resolve(kind, id).ok_or(EngineError::NotFound)?;
        link.store
            .read_log(&job_key(kind, &id), counter, offset, max_len)
            .await
            .map_err(|err| read_refused(err, "a run's log"))
    }
}

fn run_started_event(kind: Kind, id: &str, run: &SharedRun) -> EngineEvent {
    EngineEvent::RunStarted {
        kind,
        job_id: id.to_string(),
        counter: run.counter,
        trigger: TriggerSource::parse(&trigger_summary(&run.payload).source)
            .unwrap_or(TriggerSource::Api),
        attempt: run.attempt,
        started_at: run.started_at.unwrap_or_default(),
    }
}

fn run_ended_event(kind: Kind, id: &str, status: RunStatus, run: &SharedRun) -> EngineEvent {
    let started_at = run.started_at.unwrap_or_default();
    let ended_at = run.ended_at.unwrap_or(started_at);
    EngineEvent::RunEnded {
        kind,
        job_id: id.to_string(),
        counter: run.counter,
        status,
        started_at,
        ended_at,
        duration_ms: u64::try_from((ended_at - started_at).num_milliseconds()).unwrap_or(0),
        exit_code: run.exit_code,
        signal: run.signal,
        http_status: run.http_status,
    }
}

impl Engine {
    /// In cluster mode, the last bytes (at most `tail` of each) of the newest logs of a
    /// job in the shared table, newest first, of at most `runs` runs; `None` on a single
    /// node.
    pub async fn cluster_recent_logs(
        &self,
        kind: Kind,
        id: &str,
        runs: u32,
        tail: usize,
    ) -> Result<Option<Vec<Vec<u8>>>, EngineError> {
        let Some(link) = self.cluster() else {
            return Ok(None);
        };
        let id = self.lock().resolve(kind, id).ok_or(EngineError::NotFound)?;
        link.store
            .log_tails(&job_key(kind, &id), runs, tail)
            .await
            .map(Some)
            .map_err(|err| read_refused(err, "the recent logs"))
    }
}

/// A read of the shared table that failed: 503 while the database is away, else logged
/// here and answered as unreadable.
fn read_refused(err: ClusterError, what: &str) -> EngineError {
    if err.is_unavailable() {
        return EngineError::Unavailable;
    }
    tracing::error!(error = %err, "cannot read {what} from the cluster database");
    EngineError::Unreadable
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_read_from_an_offset_to_its_end_in_bounded_steps() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = LogDir::new(tmp.path().to_path_buf(), "j");
        std::fs::write(tmp.path().join("j.4.started"), b"0123456789").expect("write");
        assert_eq!(
            read_log_from(&dir, 4, 3, 100).expect("read"),
            Some(b"3456789".to_vec())
        );
        assert_eq!(
            read_log_from(&dir, 4, 3, 2).expect("read"),
            Some(b"34".to_vec())
        );
        assert_eq!(
            read_log_from(&dir, 4, 10, 2).expect("read"),
            Some(Vec::new())
        );
        assert_eq!(read_log_from(&dir, 5, 0, 2).expect("read"), None);
    }

    #[test]
    fn a_shared_log_is_named_as_a_log_file_would_be() {
        assert_eq!(shared_log_status(SharedRunState::Running), "started");
        assert_eq!(
            shared_log_status(SharedRunState::Done(RunStatus::Success)),
            "success"
        );
        assert_eq!(
            shared_log_status(SharedRunState::Done(RunStatus::Interrupted)),
            "fail"
        );
    }
}
