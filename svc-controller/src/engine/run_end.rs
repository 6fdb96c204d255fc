//! A run's end: recorded (log finished, history line, state) and made durable off the
//! run path, told to live watchers, and handed to the notifications.

use chrono::{DateTime, Utc};

use super::run_begin::{RunContext, RunFiles};
use super::{Def, Engine, Kind, Trigger};
use crate::runner::exec::Outcome;
use crate::store::history::RunRecord;
use crate::store::logstore::{LogDir, RunLog};
use crate::store::state::{RunResult, RunStatus};

/// The end of a run whose job lists notifications for its result, as the engine hands it
/// over ([`Engine::announce_run_ends_to`]): domain data only; whoever sends the
/// notifications reads the log and builds the messages, off the run path.
#[derive(Debug, Clone)]
pub struct RunEnded {
    pub kind: Kind,
    pub job_id: String,
    pub job_name: String,
    pub counter: u64,
    pub result: RunResult,
    /// When the run began (the job's `last_run`).
    pub started_at: DateTime<Utc>,
    /// When its end was recorded.
    pub ended_at: DateTime<Utc>,
    /// The job's log directory, where the run's log is (unless retention removed it
    /// since, which a later run may do).
    pub log_dir: LogDir,
    /// The names of the `[notif]` sections to tell: `notif_on_success` or
    /// `notif_on_failed`, as the result selects.
    pub notifs: Vec<String>,
}

/// What the end of a run tells its notifications ([`RunEnded`]), taken as the
/// run begins. Only made when someone listens and the job lists notifications: other
/// runs pay nothing for them.
pub(super) struct Announce {
    kind: Kind,
    def: Def,
    counter: u64,
    log_dir: LogDir,
    started_at: chrono::DateTime<chrono::Utc>,
}

impl Announce {
    pub(super) fn new(engine: &Engine, kind: Kind, context: &RunContext) -> Option<Announce> {
        engine.inner.run_ends.get()?;
        context.def.has_notifs().then(|| Announce {
            kind,
            def: context.def.clone(),
            counter: context.counter,
            log_dir: context.log_dir.clone(),
            started_at: context.started_at,
        })
    }

    /// Hands the end over, without waiting; nothing when the job lists no notification
    /// for `result`.
    pub(super) fn send(
        self,
        engine: &Engine,
        result: RunResult,
        ended_at: chrono::DateTime<chrono::Utc>,
    ) {
        let notifs = self.def.notifs_for(result);
        if notifs.is_empty() {
            return;
        }
        let (job_id, job_name) = match &self.def {
            Def::Job(job) => (job.id.clone(), job.name.clone()),
            Def::Http(job) => (job.id.clone(), job.name.clone()),
        };
        engine.announce(RunEnded {
            kind: self.kind,
            job_id,
            job_name,
            counter: self.counter,
            result,
            started_at: self.started_at,
            ended_at,
            notifs: notifs.to_vec(),
            log_dir: self.log_dir,
        });
    }
}

/// The event that tells watchers how run `record` of job `id` ended.
pub(super) fn run_ended(kind: Kind, id: &str, record: &RunRecord) -> super::events::EngineEvent {
    super::events::EngineEvent::RunEnded {
        kind,
        job_id: id.to_string(),
        counter: record.counter,
        status: record.status,
        started_at: record.started_at,
        ended_at: record.ended_at,
        duration_ms: record.duration_ms,
        exit_code: record.exit_code,
        signal: record.signal,
        http_status: record.http_status,
    }
}

/// What the history keeps of a run that ended `status` between `started_at` and
/// `ended_at`.
pub(super) fn history_record(
    trigger: &Trigger,
    counter: u64,
    outcome: &Outcome,
    status: RunStatus,
    (started_at, ended_at): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    duration: std::time::Duration,
) -> RunRecord {
    RunRecord {
        counter,
        status,
        trigger: trigger.source.as_str().to_string(),
        delivery: trigger.facts.id.clone(),
        cause: trigger.cause.clone(),
        attempt: trigger.attempt,
        started_at,
        ended_at,
        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        exit_code: outcome.detail.exit_code,
        signal: outcome.detail.signal,
        http_status: outcome.detail.http_status,
        summary: String::new(),
        usage: outcome.detail.usage.clone(),
        reason: outcome.detail.oom.then(|| "oom".to_string()),
    }
    .with_summary(&outcome.summary)
}

impl Engine {
    /// Hands `ended` to the sink set by [`Engine::announce_run_ends_to`], at once.
    fn announce(&self, ended: RunEnded) {
        use tokio::sync::mpsc::error::TrySendError;
        let Some(sink) = self.inner.run_ends.get() else {
            return;
        };
        match sink.try_send(ended) {
            Ok(()) => {}
            Err(TrySendError::Full(ended)) => tracing::warn!(
                job = ended.job_id,
                counter = ended.counter,
                "the run's notifications are dropped: too many are waiting to be sent"
            ),
            Err(TrySendError::Closed(ended)) => tracing::debug!(
                job = ended.job_id,
                counter = ended.counter,
                "the run's notifications are dropped: the sender has stopped"
            ),
        }
    }

    /// Records the end of a run: finishes its log (renamed to its result), applies
    /// retention and updates the state, then hands the syncs that make all this durable
    /// to the syncer (log data, the log directory once, the state file), and the
    /// clearing of the run's `files`, so that the job's next run need not wait for them.
    /// Blocking.
    pub(super) fn end_run(
        &self,
        kind: Kind,
        id: &str,
        record: RunRecord,
        log: Option<RunLog>,
        files: RunFiles,
    ) {
        let result = record.status.result();
        let had_log = log.is_some();
        // The history line is queued before the log gets its final name: whoever sees the
        // end of the run (the log's name, the job's status) and then reads the history
        // waits for it (`Engine::run_history` flushes the syncer). A crash between the
        // two leaves the line and a `started` log, which the next start repairs without
        // a second line for the run (see `Engine::repair_interrupted_runs`).
        self.inner.syncer.run_end(super::syncer::RunEnd {
            history: Some((self.history_file(kind, id), record.to_line())),
            ..Default::default()
        });
        let mut synced = super::syncer::RunEnd::default();
        if files.body_file.is_some() || files.tmp_dir.is_some() {
            synced.cleanup = Some(Box::new(move || files.remove()));
        }
        let meta = log.and_then(|log| {
            let counter = log.counter();
            match log.finish(result) {
                Ok((meta, file)) => {
                    synced.log_file = Some(file);
                    Some(meta)
                }
                Err(err) => {
                    tracing::error!(job = id, counter, error = %err, "cannot finish the log");
                    None
                }
            }
        });
        let (log_dir, snapshots_at_end) = {
            let mut registry = self.lock();
            let Some(entry) = registry.map(kind).get_mut(id) else {
                // The job is gone: its log and files are still the syncer's to finish.
                drop(registry);
                self.inner.syncer.run_end(synced);
                crate::metrics::run_finished(kind.as_str(), id, &record);
                return;
            };
            entry.state.started = false;
            entry.state.last_result = Some(result);
            if let Some(run) = entry.slot.run.as_mut() {
                run.counter = None;
                run.ended = true;
                if let Some(claim) = run.claim.take() {
                    entry.cluster.finishing = Some(super::cluster_node::Finishing {
                        job: super::cluster_link::job_key(kind, id),
                        claim,
                        outcome: super::cluster_node::outcome_of(&record),
                        log: had_log.then(|| super::cluster_logs::LogCopy {
                            dir: entry.log_dir.clone(),
                            counter: record.counter,
                            keep: entry.def.log_retention(),
                        }),
                    });
                }
            }
            if let Some(meta) = meta {
                entry.logs.push(meta);
            }
            // Unlinking is quick; the directory sync, the slow part, waits for the unlock.
            let keep = entry.def.log_retention();
            if let Err(err) = entry.log_dir.remove_excess(&mut entry.logs, keep) {
                tracing::error!(job = id, error = %err, "cannot delete old logs");
            }
            let ended = (entry.log_dir.clone(), entry.saving.snapshots);
            // The run no longer counts as running in the metrics.
            registry.publish_queue_length();
            ended
        };
        if had_log {
            synced.dir = Some(log_dir.dir().to_path_buf());
        }
        // After the log's sync: if a power failure loses this write, the start-up takes
        // the result from the log.
        let engine = self.clone();
        let key = format!("{}/{id}", kind.as_str());
        let job = id.to_string();
        synced.state = Some((
            key,
            Box::new(move || engine.persist_after(kind, &job, snapshots_at_end)),
        ));
        self.inner.syncer.run_end(synced);
        self.changed();
        self.publish(|| run_ended(kind, id, &record));
        // Counted once the log has its final name and the job its result, so whoever
        // sees the end of a run in the metrics also finds it in the log and the status.
        crate::metrics::run_finished(kind.as_str(), id, &record);
    }
}
