//! Triggers: what starts a run, what becomes of it when the job is busy (queued,
//! skipped, or replacing the run), and what the engine asks for itself (retries, chained
//! jobs, missed slots); pause, resume and cancel.

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::executor::Runner;
use super::read::JobRef;
use super::{ActiveRun, Def, Engine, Entry, Kind, Taken, events, run};
use crate::config::OnBusy;
use crate::store::delivery::DeliveryFacts;
use crate::store::state::{QueuedTrigger, RunResult};
use crate::time::schedule::Timer;
use crate::util::fsutil::Durability;

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerSource {
    Timer,
    Webhook,
    /// A request of an earlier release's API (kept for queued triggers it saved).
    Api,
    /// Run now: a signed request (`job_exec/trigger`, `job_http/trigger`).
    Manual,
    /// The end of another job's run (`on_success`, `on_failure`).
    Chain,
    /// Another attempt after a failed run (`retry`).
    Retry,
    /// A schedule slot missed while the service was down or the job paused
    /// (`catch_up = once`).
    CatchUp,
}

impl TriggerSource {
    /// The spelling in the state file.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerSource::Timer => "timer",
            TriggerSource::Webhook => "webhook",
            TriggerSource::Api => "api",
            TriggerSource::Manual => "manual",
            TriggerSource::Chain => "chain",
            TriggerSource::Retry => "retry",
            TriggerSource::CatchUp => "catch-up",
        }
    }

    pub(super) fn parse(text: &str) -> Option<TriggerSource> {
        [
            TriggerSource::Timer,
            TriggerSource::Webhook,
            TriggerSource::Api,
            TriggerSource::Manual,
            TriggerSource::Chain,
            TriggerSource::Retry,
            TriggerSource::CatchUp,
        ]
        .into_iter()
        .find(|source| source.as_str() == text)
    }
}

/// A request to run a job.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub source: TriggerSource,
    /// Raw body of a webhook request, handed to the commands in a file.
    pub body: Option<Bytes>,
    /// What a webhook delivery said of itself, handed to the commands.
    pub facts: DeliveryFacts,
    /// For a chained run or a retry, the run that started it (`run 4 of job build,
    /// success`); for the log's first line, not kept with a queued trigger.
    pub cause: Option<String>,
    /// Which attempt of a failing job this is: 1, then 2 for its first retry (`retry`).
    pub attempt: u32,
}

impl Trigger {
    pub fn new(source: TriggerSource) -> Trigger {
        Trigger {
            source,
            body: None,
            facts: DeliveryFacts::default(),
            cause: None,
            attempt: 1,
        }
    }

    /// As the state file keeps a queued trigger.
    pub(super) fn to_queued(&self) -> QueuedTrigger {
        QueuedTrigger {
            source: self.source.as_str().to_string(),
            facts: self.facts.clone(),
            body: self.body.as_ref().map(|body| body.to_vec()),
            id: None,
        }
    }

    /// Back from the state file; `None` for a source this release does not know.
    pub(super) fn from_queued(queued: QueuedTrigger) -> Option<Trigger> {
        Some(Trigger {
            source: TriggerSource::parse(&queued.source)?,
            body: queued.body.map(Bytes::from),
            facts: queued.facts,
            cause: None,
            attempt: 1,
        })
    }
}

/// Why a trigger, pause, resume or cancel was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("job not found")]
    NotFound,
    #[error("job is paused")]
    Paused,
    #[error("job is running and a run is already queued")]
    Busy,
    #[error("the service is shutting down")]
    ShuttingDown,
    /// The queued trigger could not be saved, so it was not accepted.
    #[error("cannot save the queued trigger; try again later")]
    NotSaved,
    /// A job's stored records (its run history) could not be read; the cause is logged.
    #[error("cannot read the job's records")]
    Unreadable,
    /// Cluster mode: the cluster's database, which holds the queue, cannot be reached,
    /// so the trigger was not accepted (the cause is logged). Passing: try again later.
    #[error("the cluster database is unreachable; try again later")]
    Unavailable,
    /// The disk a job filled has not had room since: runs are refused (the reason says
    /// which disk and how much room they wait for). Passing: try again later.
    #[error("{0}")]
    DiskFull(String),
}

impl EngineError {
    /// Its name in metrics (`svc_triggers_refused_total`).
    pub fn reason(&self) -> &'static str {
        match self {
            EngineError::NotFound => "not_found",
            EngineError::Paused => "paused",
            EngineError::Busy => "busy",
            EngineError::ShuttingDown => "shutting_down",
            EngineError::NotSaved => "not_saved",
            EngineError::Unreadable => "unreadable",
            EngineError::Unavailable => "cluster_unavailable",
            EngineError::DiskFull(_) => "disk_full",
        }
    }
}

/// What became of an accepted trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Its run has begun.
    Started,
    /// It waits for the running run to end (with `on_busy = replace`, that run is
    /// being cancelled).
    Queued,
    /// The job is running and `on_busy = skip`: dropped.
    Skipped,
}

impl Engine {
    /// Starts a run of a job now, or queues it when the job is busy. A queued trigger
    /// is saved durably (in the job's state file) before this returns, so an accepted
    /// trigger survives a pause, a reload and a restart; once accepted, it is saved (and
    /// its run begun when it waits for a permit) even if the caller stops waiting.
    pub async fn trigger(
        &self,
        kind: Kind,
        id: &str,
        trigger: Trigger,
    ) -> Result<Accepted, EngineError> {
        if let Some(reason) = crate::util::space_reserve::runs_refused_now().await {
            let refused = EngineError::DiskFull(reason);
            crate::metrics::trigger_refused(refused.reason());
            return Err(refused);
        }
        if let Some(link) = self.cluster() {
            return self
                .enqueue_trigger(link, kind, id, trigger)
                .await
                .inspect_err(|err| crate::metrics::trigger_refused(err.reason()));
        }
        let source = trigger.source;
        let (id, accepted, waits_for_a_permit) = self
            .accept_trigger(kind, id, trigger)
            .inspect_err(|err| crate::metrics::trigger_refused(err.reason()))?;
        if accepted != Accepted::Queued {
            return Ok(accepted);
        }
        // The save and what follows it, on a task of the engine's own runtime that this
        // call only awaits: a caller that stops waiting (an HTTP client gone) must not
        // stop it half way, where a trigger waiting for a permit would be queued (and
        // saved) with no run task to begin it: the job would refuse every later trigger
        // as busy until a resume or a restart.
        let keep = self
            .clone()
            .keep_queued(kind, id.clone(), source, waits_for_a_permit);
        match self.inner.runtime.spawn(keep).await {
            Ok(kept) => kept.map(|()| accepted),
            Err(err) => {
                tracing::error!(job = id, error = %err, "cannot save a queued trigger: refused");
                self.take_back(kind, &id);
                Err(EngineError::NotSaved)
            }
        }
    }

    /// Saves the job's state with its trigger just queued, durably; then announces it,
    /// and begins the run of a trigger that waits for a permit. A trigger that cannot be
    /// saved is taken back: not accepted, so not kept.
    async fn keep_queued(
        self,
        kind: Kind,
        id: String,
        source: TriggerSource,
        waits_for_a_permit: bool,
    ) -> Result<(), EngineError> {
        let saved = {
            let (engine, id) = (self.clone(), id.clone());
            // On the engine's own blocking threads (a thread inherits the priority of
            // the thread that starts it).
            tokio::task::spawn_blocking(move || engine.try_persist(kind, &id, Durability::Durable))
                .await
        };
        if !matches!(saved, Ok(Ok(()))) {
            tracing::error!(job = id, "cannot save a queued trigger: refused");
            self.take_back(kind, &id);
            return Err(EngineError::NotSaved);
        }
        self.publish(|| events::EngineEvent::Queued {
            kind,
            job_id: id.clone(),
            trigger: source,
        });
        if waits_for_a_permit {
            // On disk now: its run may wait for the permit as long as it takes.
            let mut registry = self.lock();
            if let Some(entry) = registry.map(kind).get_mut(&id)
                && self.start_queued(kind, &id, entry)
            {
                registry.run_tasks += 1;
            }
        }
        Ok(())
    }

    /// Takes back a queued trigger that could not be saved: the caller answers with an
    /// error.
    fn take_back(&self, kind: Kind, id: &str) {
        crate::metrics::trigger_refused(EngineError::NotSaved.reason());
        let mut registry = self.lock();
        if let Some(entry) = registry.get(kind, id) {
            entry.take_queued();
        }
        registry.publish_queue_length();
    }

    /// The in-memory part of [`Engine::trigger`], with the configured ID of the job that
    /// `id` names in any case; a queued trigger must then be saved. True besides when the
    /// job is idle but every permit of `max_job_running` is taken: the trigger is queued
    /// (so that it is on disk while its run waits), and its run is to start once it is
    /// saved.
    ///
    /// A job holds one accepted trigger that has not begun, in its queue's slot (and its
    /// state file): a trigger whose run waits for a permit takes it, so the next one is
    /// refused as busy. Were it queued behind, the state file's one slot would hold only
    /// one of the two, and a stop or a crash before the first began would lose it.
    fn accept_trigger(
        &self,
        kind: Kind,
        id: &str,
        trigger: Trigger,
    ) -> Result<(String, Accepted, bool), EngineError> {
        #[cfg(test)]
        super::run::tests::before_registry(self, id);
        let mut registry = self.lock();
        // Under the registry's lock, where the shutdown sets it: a trigger is either in
        // the registry before the shutdown looks (its run is ended and waited for, its
        // trigger kept) or refused. Checked before the lock, a trigger could pass while
        // the shutdown had already found no run left, and its answer 200 would outlive
        // the process with nothing on disk.
        if self.is_shutting_down() {
            return Err(EngineError::ShuttingDown);
        }
        let id = registry.resolve(kind, id).ok_or(EngineError::NotFound)?;
        let entry = registry.get(kind, &id).ok_or(EngineError::NotFound)?;
        if entry.state.paused {
            return Err(EngineError::Paused);
        }
        let mut waits_for_a_permit = false;
        let accepted = if entry.slot.run.is_some() || entry.slot.queued.is_some() {
            match entry.def.on_busy() {
                OnBusy::Queue => {
                    if entry.slot.queued.is_some() || entry.holds_a_trigger_not_begun() {
                        return Err(EngineError::Busy);
                    }
                    entry.queue(trigger);
                }
                OnBusy::Skip => {
                    tracing::info!(
                        job = %id,
                        source = trigger.source.as_str(),
                        "trigger skipped: the job is running (on_busy = skip)"
                    );
                    crate::metrics::trigger_dropped("busy_skip");
                    return Ok((id, Accepted::Skipped, false));
                }
                OnBusy::Replace => {
                    entry.replace_run(&id, trigger);
                }
            }
            Accepted::Queued
        } else if kind == Kind::Job && self.inner.job_slots.available_permits() == 0 {
            entry.queue(trigger);
            waits_for_a_permit = true;
            Accepted::Queued
        } else {
            self.spawn_run(kind, &id, entry, trigger, Taken::default(), None);
            registry.run_tasks += 1;
            Accepted::Started
        };
        registry.publish_queue_length();
        drop(registry);
        self.changed();
        Ok((id, accepted, waits_for_a_permit))
    }

    /// Starts a run for the queued trigger of an idle, unpaused job; true when it did
    /// (the caller counts the new run task).
    pub(super) fn start_queued(&self, kind: Kind, id: &str, entry: &mut Entry) -> bool {
        if entry.slot.run.is_some() || entry.state.paused || self.is_shutting_down() {
            return false;
        }
        let Some((trigger, queue_id)) = entry.take_queued() else {
            return false;
        };
        // The state file keeps the trigger until its run records that it took it, before
        // its command starts: a crash before that runs it after the restart, after it
        // never again.
        self.spawn_run(
            kind,
            id,
            entry,
            trigger,
            Taken {
                queue_id,
                claim: None,
            },
            None,
        );
        true
    }

    pub(super) fn spawn_run(
        &self,
        kind: Kind,
        id: &str,
        entry: &mut Entry,
        trigger: Trigger,
        taken: Taken,
        runner: Option<Box<dyn Runner>>,
    ) {
        let Taken { queue_id, claim } = taken;
        let (cancel, cancel_rx) = watch::channel(None);
        entry.slot.run = Some(ActiveRun {
            counter: None,
            ended: false,
            cancel,
            queue_id,
            claim,
        });
        self.inner.runtime.spawn(run::run_task(
            self.clone(),
            kind,
            id.to_string(),
            trigger,
            runner,
            cancel_rx,
        ));
    }

    /// Pauses a job: its timer ticks are skipped and triggers get 412.
    pub fn pause(&self, kind: Kind, id: &str) -> Result<(), EngineError> {
        self.set_paused(kind, id, true, |_| ())
    }

    /// Resumes a paused job.
    pub fn resume(&self, kind: Kind, id: &str) -> Result<(), EngineError> {
        self.set_paused(kind, id, false, |_| ())
    }

    /// Pauses or resumes a job and looks at it as the change left it, under the same
    /// lock: the answer to a pause or resume shows the job as that request made it
    /// (a resumed JobHttp `started`, as endpoint 8 answers), not a run its timer began
    /// and ended while the state was being made durable. `look` must be quick.
    pub fn set_paused<T>(
        &self,
        kind: Kind,
        id: &str,
        paused: bool,
        look: impl FnOnce(JobRef<'_>) -> T,
    ) -> Result<T, EngineError> {
        let mut missed = None;
        let (id, was_paused, seen) = {
            let mut registry = self.lock();
            let id = registry.resolve(kind, id).ok_or(EngineError::NotFound)?;
            let entry = registry.get(kind, &id).ok_or(EngineError::NotFound)?;
            let was_paused = entry.state.paused;
            entry.state.paused = paused;
            if kind == Kind::Http && was_paused && !paused {
                entry.resumed = true;
            }
            // A slot missed while paused runs once, with `catch_up = once`; it is looked
            // for once the registry is unlocked.
            if was_paused && !paused {
                let (window, _) = entry.def.timing();
                if let (Some(window), Some(timer)) = (window, entry.def.timer()) {
                    missed = Some((timer.clone(), entry.state.last_run, window));
                }
            }
            // A trigger accepted before the pause runs now.
            let started = !paused && self.start_queued(kind, &id, entry);
            let seen = look(JobRef::new(kind, &id, entry));
            if started {
                registry.run_tasks += 1;
            }
            // `svc_job_paused` is counted with the queue.
            registry.publish_queue_length();
            (id, was_paused, seen)
        };
        self.persist(kind, &id, Durability::Durable);
        self.changed();
        // A pause of a paused job changes nothing, and tells nothing.
        if was_paused != paused {
            self.publish(|| match paused {
                true => events::EngineEvent::Paused {
                    kind,
                    job_id: id.clone(),
                },
                false => events::EngineEvent::Resumed {
                    kind,
                    job_id: id.clone(),
                },
            });
        }
        if let Some((timer, last_run, window)) = missed {
            self.catch_up(kind, &id, &timer, last_run, window);
        }
        Ok(seen)
    }

    /// Ends the running execution of a job, which is recorded as failed, and drops its
    /// queued trigger. False when nothing was running (as upstream, not an error): a run
    /// whose end is already recorded shows its result and is not cancelled either.
    pub fn cancel(&self, kind: Kind, id: &str, reason: &str) -> Result<bool, EngineError> {
        let mut registry = self.lock();
        let id = registry.resolve(kind, id).ok_or(EngineError::NotFound)?;
        let entry = registry.get(kind, &id).ok_or(EngineError::NotFound)?;
        let Some(run) = entry.slot.run.as_ref().filter(|run| !run.ended) else {
            return Ok(false);
        };
        run.cancel.send_replace(Some(reason.to_string()));
        if entry.take_queued().is_some() {
            crate::metrics::trigger_dropped("canceled");
        }
        registry.publish_queue_length();
        Ok(true)
    }

    /// What follows the end of a run, decided by the definition the run began with: the
    /// next attempt when a Job's run failed with `retry` left, else the Jobs it lists in
    /// `on_success` or `on_failure` for `result`. False when a retry follows: the run
    /// is not the outcome yet, so nothing is announced for it.
    pub(super) fn retry_or_chain(
        &self,
        def: &Def,
        counter: u64,
        result: RunResult,
        attempt: u32,
    ) -> bool {
        let Def::Job(job) = def else {
            return true;
        };
        if result == RunResult::Fail && attempt <= job.retry && !self.is_shutting_down() {
            let next = attempt + 1;
            let wait = job.retry_wait(next);
            tracing::info!(job = %job.id, counter, attempt = next, wait = ?wait, "run failed: retry scheduled");
            let mut trigger = Trigger::new(TriggerSource::Retry);
            trigger.attempt = next;
            trigger.cause = Some(format!("run {counter} failed"));
            self.trigger_later(Kind::Job, job.id.clone(), trigger, wait);
            return false;
        }
        let targets = match result {
            RunResult::Success => &job.on_success,
            RunResult::Fail => &job.on_failure,
        };
        for target in targets {
            let mut trigger = Trigger::new(TriggerSource::Chain);
            trigger.cause = Some(format!(
                "run {counter} of job {}, {}",
                job.id,
                result.log_status()
            ));
            self.trigger_later(Kind::Job, target.clone(), trigger, Duration::ZERO);
        }
        true
    }

    /// `catch_up = once`: runs the latest slot of `timer` missed since `last_run` within
    /// `window` (while the service was down or the job paused), if any, as a trigger of
    /// its own, without waiting.
    pub(super) fn catch_up(
        &self,
        kind: Kind,
        id: &str,
        timer: &Timer,
        last_run: Option<DateTime<Utc>>,
        window: Duration,
    ) {
        let Some(slot) = timer.missed_slot(last_run, self.inner.clock.now(), window) else {
            return;
        };
        let mut trigger = Trigger::new(TriggerSource::CatchUp);
        trigger.cause = Some(format!(
            "missed slot {}",
            crate::time::timezone::utc_text(slot)
        ));
        if self.cluster().is_some() {
            // The slot's key makes it once, whichever nodes find it missed.
            self.offer_slot(kind, id, slot, trigger);
            return;
        }
        self.trigger_later(kind, id.to_string(), trigger, Duration::ZERO);
    }

    /// Starts a run that the engine itself asks for (a missed slot, a retry, a chained
    /// Job) after `wait`, in a task of its own. No caller waits for the answer, so the
    /// service log tells what became of it, a refusal included (paused, busy, gone, or
    /// the service stopping).
    fn trigger_later(&self, kind: Kind, id: String, trigger: Trigger, wait: Duration) {
        let engine = self.clone();
        self.inner.runtime.spawn(async move {
            if !wait.is_zero() {
                // A length of time, not a wall time: the monotonic clock, whatever the
                // wall clock does meanwhile.
                tokio::time::sleep(wait).await;
            }
            let source = trigger.source.as_str();
            let cause = trigger.cause.clone().unwrap_or_default();
            match engine.trigger(kind, &id, trigger).await {
                Ok(Accepted::Started) => {
                    tracing::info!(job = %id, source, cause = %cause, "run started")
                }
                Ok(Accepted::Queued) => {
                    tracing::info!(job = %id, source, cause = %cause, "run queued: the job is busy")
                }
                // [`Engine::trigger`] has said so.
                Ok(Accepted::Skipped) => {}
                Err(err) => tracing::warn!(
                    job = %id,
                    source,
                    cause = %cause,
                    error = %err,
                    "run not started"
                ),
            }
        });
    }
}
