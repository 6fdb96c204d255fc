//! The model: a job's entry in the registry (its definition, state, logs, run, queue)
//! and its parts.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::{Trigger, cluster_node};
use crate::config::{HttpJobConfig, JobConfig, OnBusy};
use crate::store::logstore::{LogDir, LogMeta};
use crate::store::state::{JobState, RunResult};
use crate::time::schedule::Timer;

/// Which namespace a job lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Job,
    Http,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Job => "job",
            Kind::Http => "job_http",
        }
    }

    /// What a run of this kind needs its runner for.
    pub fn runner_work(self) -> crate::runner::exec::RunnerWork {
        match self {
            Kind::Job => crate::runner::exec::RunnerWork::Commands,
            Kind::Http => crate::runner::exec::RunnerWork::HttpCall,
        }
    }
}

/// The definition of an entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Def {
    Job(Arc<JobConfig>),
    Http(Arc<HttpJobConfig>),
}

impl Def {
    pub(super) fn timer(&self) -> Option<&Timer> {
        match self {
            Def::Job(job) => job.timer.as_ref(),
            Def::Http(job) => job.timer.as_ref(),
        }
    }
    pub fn name(&self) -> &str {
        match self {
            Def::Job(job) => &job.name,
            Def::Http(job) => &job.name,
        }
    }
    pub(super) fn log_retention(&self) -> usize {
        match self {
            Def::Job(job) => job.log_retention,
            Def::Http(job) => job.log_retention,
        }
    }
    /// The notifications a run that ends with `result` is announced to
    /// (`notif_on_success` or `notif_on_failed`).
    pub(super) fn notifs_for(&self, result: RunResult) -> &[String] {
        let (success, failed) = match self {
            Def::Job(job) => (&job.notif_on_success, &job.notif_on_failed),
            Def::Http(job) => (&job.notif_on_success, &job.notif_on_failed),
        };
        match result {
            RunResult::Success => success,
            RunResult::Fail => failed,
        }
    }
    /// Whether a run of it may be announced at all.
    pub(super) fn has_notifs(&self) -> bool {
        !self.notifs_for(RunResult::Success).is_empty()
            || !self.notifs_for(RunResult::Fail).is_empty()
    }
    /// `catch_up_window` with `catch_up = once`, and `random_delay` (a JobHttp has
    /// neither).
    pub(super) fn timing(&self) -> (Option<Duration>, Duration) {
        match self {
            Def::Job(job) => (job.catch_up, job.random_delay),
            Def::Http(_) => (None, Duration::ZERO),
        }
    }
    /// What a trigger or timer slot that finds it running does (a JobHttp queues).
    pub(super) fn on_busy(&self) -> OnBusy {
        match self {
            Def::Job(job) => job.on_busy,
            Def::Http(_) => OnBusy::Queue,
        }
    }
}

/// The reason a run replaced by a newer trigger ends with.
const REPLACED: &str = "replaced by a newer trigger (on_busy = replace)";

/// Where a run's trigger was taken from, when it waited somewhere: the run records it.
#[derive(Debug, Default)]
pub(super) struct Taken {
    /// The ID of the trigger taken off the job's queue (see [`ActiveRun::queue_id`]).
    pub(super) queue_id: Option<u64>,
    /// The shared queue's run claimed in cluster mode.
    pub(super) claim: Option<cluster_node::Claim>,
}

/// A run in progress or waiting for a permit.
#[derive(Debug)]
pub(super) struct ActiveRun {
    /// Set once the run got its counter (it is `started`).
    pub(super) counter: Option<u64>,
    /// Set once the run's end is recorded; the task is only handing over to the queued
    /// trigger (or ending). The run can no longer be cancelled.
    pub(super) ended: bool,
    pub(super) cancel: watch::Sender<Option<String>>,
    /// The ID of the queued trigger this run took off the queue; `None` for a trigger
    /// that did not wait in it.
    pub(super) queue_id: Option<u64>,
    /// In cluster mode, the shared queue's run this is (every run there is claimed).
    pub(super) claim: Option<cluster_node::Claim>,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) def: Def,
    pub(super) state: JobState,
    pub(super) logs: Vec<LogMeta>,
    /// Its run, its queue and its timer.
    pub(super) slot: RunSlot,
    /// A JobHttp shows `started` after a resume until its next run ends (spec).
    pub(super) resumed: bool,
    /// Removed from the configuration while running: dropped when the run ends.
    pub(super) retired: bool,
    pub(super) log_dir: LogDir,
    pub(super) state_path: PathBuf,
    /// What the writes of its state file keep track of.
    pub(super) saving: Saving,
    /// What cluster mode adds.
    pub(super) cluster: ClusterSide,
}

/// A job's run slot: the run going on (or waiting for a permit), the one trigger
/// waiting in the queue, and the timer that fires it.
#[derive(Debug)]
pub(super) struct RunSlot {
    pub(super) run: Option<ActiveRun>,
    pub(super) queued: Option<Queued>,
    pub(super) timer: Option<AbortHandle>,
    pub(super) next_run: Option<DateTime<Utc>>,
    /// The file of the next run's log, made ahead of its due time by the job's timer
    /// ([`crate::store::logstore::LogDir::make_ahead`]); the next run's begin names it.
    pub(super) log_ahead: Option<crate::store::logstore::AheadLog>,
}

/// The bookkeeping of a job's state file writes.
#[derive(Debug)]
pub(super) struct Saving {
    /// Serialises state file writes so the newest snapshot is always written last.
    pub(super) save_lock: Arc<Mutex<()>>,
    /// Whether the state file, as last written, holds a queued trigger: the run that
    /// takes it must write the file before it starts (exactly once). Read and written
    /// under `save_lock`.
    pub(super) queue_on_disk: bool,
    /// The ID of that trigger, as written (`None` in a file of an earlier release).
    pub(super) queue_on_disk_id: Option<u64>,
    /// Snapshots of the state taken for writing so far, which numbers them.
    pub(super) snapshots: u64,
    /// The number of the newest snapshot written: a run's end queued for the syncer is
    /// not written again once a snapshot taken after it was.
    pub(super) saved: u64,
}

/// What cluster mode keeps of a job's runs.
#[derive(Debug)]
pub(super) struct ClusterSide {
    /// The end of the run just ended, reported once the job is idle.
    pub(super) finishing: Option<cluster_node::Finishing>,
    /// The counter of the job's run going on on another node (shown as the job's
    /// running run; its log is read from the shared table).
    pub(super) remote_run: Option<u64>,
}

/// The trigger in a job's one-slot queue, and its ID ([`crate::store::state::QueuedTrigger::id`]): each
/// trigger that waits in the queue gets a new one (`None`: read from a state file of an
/// earlier release).
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) trigger: Trigger,
    pub(super) id: Option<u64>,
}

impl Entry {
    /// Puts `trigger` in the queue's one slot, under a new ID.
    pub(super) fn queue(&mut self, trigger: Trigger) {
        self.slot.queued = Some(Queued {
            trigger,
            id: Some(rand::random()),
        });
    }

    /// `on_busy = replace`: cancels the running run (unless its end is recorded already)
    /// and puts `trigger` in the queue in place of any trigger waiting there.
    pub(super) fn replace_run(&mut self, id: &str, trigger: Trigger) {
        if let Some(run) = self.slot.run.as_ref().filter(|run| !run.ended) {
            tracing::info!(
                job = id,
                "running run cancelled: replaced by a newer trigger"
            );
            run.cancel.send_replace(Some(REPLACED.to_string()));
        }
        if self.take_queued().is_some() {
            crate::metrics::trigger_dropped("replaced");
        }
        self.queue(trigger);
    }

    /// Whether the job's run took its trigger off the queue and has not begun yet (it
    /// waits for a permit of `max_job_running`): until it begins, only the state file's
    /// queue slot keeps that accepted trigger, so the slot is not free for another. A
    /// run given its trigger directly (a permit was free) begins at once and leaves the
    /// slot to the next trigger, as it always did.
    pub(super) fn holds_a_trigger_not_begun(&self) -> bool {
        self.slot
            .run
            .as_ref()
            .is_some_and(|run| run.counter.is_none() && !run.ended && run.queue_id.is_some())
    }

    /// Empties the queue's slot: its trigger and the trigger's ID.
    pub(super) fn take_queued(&mut self) -> Option<(Trigger, Option<u64>)> {
        self.slot
            .queued
            .take()
            .map(|queued| (queued.trigger, queued.id))
    }

    /// Whether the queued trigger, if any, may run as soon as the job's run ends: a
    /// paused job keeps it for the resume, a stopping service (`stopping`) keeps it in
    /// the state file for the next start, and a removed job has no more runs.
    pub(super) fn queue_may_run(&self, stopping: bool) -> bool {
        !stopping && !self.retired && !self.state.paused
    }
}
