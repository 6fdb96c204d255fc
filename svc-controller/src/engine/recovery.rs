//! Crash repair, the step after a job's saved state is loaded: runs a stop interrupted
//! are recorded as failed, the state is brought up to date with the logs (rebuilt from
//! them without a state file), and a queued trigger that a run took before the stop is
//! not run again.

use std::path::Path;

use super::persistence::Saved;
use super::{Engine, Kind, syncer};
use crate::store::history::RunRecord;
use crate::store::logstore::{LogDir, LogMeta, LogStatus};
use crate::store::state::{JobState, RunResult, RunStatus};

impl Engine {
    /// Repairs what a stop or a crash left of a job, before it is used: runs it
    /// interrupted are recorded as failed ([`Engine::repair_interrupted_runs`]), its state
    /// is brought up to date with its logs, or rebuilt from them without a state file
    /// ([`Engine::state_on_disk`]), and a queued trigger that a run took before the stop
    /// is not run again ([`forget_taken_trigger`]). Returns the repaired state; `saved`'s
    /// logs are repaired in place.
    pub(super) fn repair(&self, kind: Kind, id: &str, saved: &mut Saved) -> JobState {
        self.repair_interrupted_runs(kind, id, &saved.log_dir, &mut saved.logs);
        let Saved {
            log_dir,
            state_path,
            logs,
            loaded,
        } = &*saved;
        let newest = logs.last().cloned();
        let mut state = self.state_on_disk(kind, id, loaded.as_ref(), newest.as_ref(), log_dir);
        forget_taken_trigger(id, state_path, &mut state);
        state
    }

    /// Finishes the logs of runs that a stop of the controller interrupted (left
    /// `started`) as failures, and records them in the history; a run whose end the
    /// history recorded just before the stop has its log finished as recorded.
    fn repair_interrupted_runs(
        &self,
        kind: Kind,
        id: &str,
        log_dir: &LogDir,
        logs: &mut [LogMeta],
    ) {
        // When each interrupted run began and was last heard of, read before the repair
        // writes to its log.
        let interrupted: Vec<_> = logs
            .iter()
            .filter(|log| log.status == LogStatus::Started)
            .map(|log| (log.counter, log_dir.written_between(log.counter)))
            .collect();
        // Runs whose end the history recorded just before a stop (the line is queued
        // before the log's rename): their logs are finished as recorded, and they get no
        // second line. Read only when a log was left `started`.
        let recorded: std::collections::HashMap<u64, (RunResult, String)> = if interrupted
            .is_empty()
        {
            Default::default()
        } else {
            self.history_file(kind, id)
                .page(crate::store::history::MAX_PAGE, None)
                .map(|page| {
                    page.into_iter()
                        .map(|record| (record.counter, (record.status.result(), record.summary)))
                        .collect()
                })
                .unwrap_or_default()
        };
        match log_dir.recover_interrupted(logs, &recorded) {
            Ok(repaired) => {
                let mut lines = String::new();
                for (counter, was_recorded) in repaired {
                    if was_recorded {
                        tracing::info!(
                            job = id,
                            counter,
                            "run ended just before a stop of the controller; its log is \
                             finished as its history recorded"
                        );
                        continue;
                    }
                    tracing::warn!(
                        job = id,
                        counter,
                        "run was interrupted by a stop of the controller; recorded as failed"
                    );
                    let now = self.inner.clock.now();
                    let times = interrupted
                        .iter()
                        .find(|(c, _)| *c == counter)
                        .and_then(|(_, times)| *times)
                        .unwrap_or((now, now));
                    let record = RunRecord::lost(
                        counter,
                        RunStatus::Interrupted,
                        times,
                        crate::store::logstore::INTERRUPTED,
                    );
                    crate::metrics::run_finished(kind.as_str(), id, &record);
                    lines.push_str(&record.to_line());
                }
                if !lines.is_empty() {
                    self.inner.syncer.run_end(syncer::RunEnd {
                        history: Some((self.history_file(kind, id), lines)),
                        ..Default::default()
                    });
                }
            }
            Err(err) => tracing::error!(job = id, error = %err, "cannot repair interrupted logs"),
        }
    }

    /// The job's state as its file says (rebuilt from the newest log without one),
    /// brought up to date with what runs left on disk: a run the stop interrupted is
    /// failed, and the counter is the highest number any run of the job used, so that
    /// the next run neither reuses a number nor leaves a gap.
    fn state_on_disk(
        &self,
        kind: Kind,
        id: &str,
        loaded: Option<&JobState>,
        newest: Option<&LogMeta>,
        log_dir: &LogDir,
    ) -> JobState {
        let mut state = loaded.cloned().unwrap_or_else(|| {
            let mut state = JobState::default();
            if let Some(log) = newest {
                state.counter = log.counter;
                state.last_run = log_dir.first_line_time(log.counter, log.status);
                if let LogStatus::Finished(result) = log.status {
                    state.last_result = Some(result);
                }
            }
            state
        });
        if state.started {
            // The controller stopped during a run. If that run's log was finished (the
            // stop came between the log's rename and the state write), its result
            // stands; otherwise the run was interrupted (its log is now `.fail`).
            state.started = false;
            state.last_result = match newest {
                Some(log) if log.counter == state.counter => match log.status {
                    LogStatus::Finished(result) => Some(result),
                    LogStatus::Started => Some(RunResult::Fail),
                },
                _ => Some(RunResult::Fail),
            };
        }
        if let Some(log) = newest
            && log.counter > state.counter
        {
            // The state file is older than the newest log (a run does not write it when
            // it starts; its log's name, durable first, records its number): the next
            // run follows the newest log, neither reusing a number nor leaving a gap.
            state.counter = log.counter;
            if let LogStatus::Finished(result) = log.status {
                state.last_result = Some(result);
            }
            if let Some(time) = log_dir.first_line_time(log.counter, log.status) {
                state.last_run = Some(time);
            }
        }
        if loaded.is_none() {
            // Without a state file, the history may know a newer run than the logs: one
            // whose log could not be made, whose number the state file alone recorded.
            match self.history_file(kind, id).newest_counter() {
                Ok(recorded) => state.counter = state.counter.max(recorded),
                Err(err) => tracing::error!(job = id, error = %err, "cannot read the run history"),
            }
        }
        state
    }
}

/// A queued trigger whose taking was recorded (the run that took it was interrupted, or
/// its state write was not made) has had its run: it is dropped from `state`, never run
/// again.
fn forget_taken_trigger(id: &str, state_path: &Path, state: &mut JobState) {
    if let Some(queued_id) = state.queued.as_ref().and_then(|queued| queued.id) {
        let taken = crate::store::state::taken_path(state_path);
        match crate::store::state::read_taken(&taken) {
            Ok(Some(taken)) if taken == queued_id => {
                tracing::info!(
                    job = id,
                    "the queued trigger was taken by a run before the stop: not run again"
                );
                state.queued = None;
            }
            Ok(_) => {}
            Err(err) => {
                tracing::error!(job = id, path = %taken.display(), error = %err, "cannot read the take record");
            }
        }
    }
}
