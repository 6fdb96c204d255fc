//! A cluster node's part of the engine: triggers go through the shared queue, a claimer
//! starts this node's share of the queued runs, the ends of runs go back to the store,
//! timer slots are offered to it, pauses and cancels reach every node, and one node at a
//! time does the housekeeping under a lease. Nothing here runs on a single node.

use std::time::Duration;

use super::cluster_link::{ClusterLink, job_key, new_trigger, trigger_of};
use super::{Accepted, Engine, EngineError, Kind, Trigger, events};
use crate::cluster::{
    ClaimedRun, ClusterError, EnqueueOutcome, Finish, JobKey, JobKind, RunOutcome, Signal, SignalOp,
};
use crate::store::history::RunRecord;
use crate::store::state::RunStatus;

/// A run this node claimed from the shared queue: its row, and the counter the cluster
/// gave it (the run's number on every node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Claim {
    pub run_id: i64,
    pub counter: u64,
}

/// A claimed run's end, waiting for its job to be idle again before it is reported: the
/// cluster then lets another run of the job begin, and this node must be ready for it.
#[derive(Debug, Clone)]
pub(super) struct Finishing {
    pub job: JobKey,
    pub claim: Claim,
    pub outcome: RunOutcome,
    /// The run's log, copied whole to the shared table before the end is reported;
    /// `None` for a run that never began.
    pub log: Option<super::cluster_logs::LogCopy>,
}

/// How often an idle claimer looks at the queue (a wake-up comes sooner: a trigger
/// accepted here, a signal from another node, a run ended here): at first, and after a
/// poll that found runs.
const CLAIM_POLL: Duration = Duration::from_millis(250);
/// Each poll that finds nothing doubles the wait to the next, up to this: a safety net
/// (a wake-up lost while the listener reconnected, a run queued while every node was
/// busy) that costs 100 idle nodes a tenth of the claims of a poll every 250 ms.
const CLAIM_POLL_MAX: Duration = Duration::from_secs(2);
/// Up to this much is added to each poll, so that the nodes do not poll in step.
const CLAIM_POLL_JITTER_MS: u64 = 100;
/// Claims at most this many runs per round, whatever the free permits.
const CLAIM_BATCH: u32 = 64;
/// The housekeeping lease: held by one node, renewed by it alone, taken over by another
/// node once it lapsed (within one [`HOUSEKEEPING_EVERY`]).
const HOUSEKEEPING_LEASE: &str = "housekeeping";
const HOUSEKEEPING_TTL: Duration = Duration::from_secs(15);
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(5);
/// Timer slots are kept this long (a slot key older than any catch-up window is no
/// longer offered by anyone).
const SLOTS_KEPT: chrono::TimeDelta = chrono::TimeDelta::days(8);
/// Finished runs kept per job in the shared table (the history's own limit).
const RUNS_KEPT: i64 = 1_000;
/// How often the housekeeping leader prunes: pruning reads every finished run, which at
/// scale is far more work than the reaping done every [`HOUSEKEEPING_EVERY`], and
/// nothing needs it sooner.
const PRUNE_EVERY: Duration = Duration::from_secs(10 * 60);
/// How often the pause states changed since the last read, and the cancels asked of this
/// node's runs, are read back from the store: signals sent while a node's listening
/// connection was down are lost, this repairs what they missed.
const PAUSE_SYNC_EVERY: Duration = Duration::from_secs(5);
/// Every job's pause state is read back this often, beside the reads of the changes
/// since the last one: a safety net should the change numbers ever go back (a database
/// restored from a backup).
const PAUSE_FULL_READ_EVERY: Duration = Duration::from_secs(10 * 60);

/// Where a node's read-back of pause states stands.
#[derive(Debug, Default)]
struct PauseReadBack {
    /// The highest change number read; `None` before the first read.
    mark: Option<i64>,
    /// When every job's state was last read.
    full_at: Option<tokio::time::Instant>,
}

impl PauseReadBack {
    /// What the next read asks for: the changes since the mark, or everything when it is
    /// the first read or the full read is due.
    fn since(&self) -> Option<i64> {
        let full_due = self
            .full_at
            .is_none_or(|at| at.elapsed() >= PAUSE_FULL_READ_EVERY);
        if full_due { None } else { self.mark }
    }
}

/// The longest wait between two attempts to report a run's end while the database is
/// away.
const FINISH_RETRY_MAX: Duration = Duration::from_secs(30);

fn engine_kind(kind: JobKind) -> Kind {
    match kind {
        JobKind::Job => Kind::Job,
        JobKind::Http => Kind::Http,
    }
}

/// An error of the store as the engine answers it: unreachable is a 503, anything else
/// is logged here (redacted) and answered as not saved.
fn refused(err: ClusterError, what: &str) -> EngineError {
    if err.is_unavailable() {
        return EngineError::Unavailable;
    }
    tracing::error!(error = %err, "{what}: the cluster database refused");
    EngineError::NotSaved
}

/// A run's end as the store records it.
pub(super) fn outcome_of(record: &RunRecord) -> RunOutcome {
    let mut outcome = RunOutcome::new(record.status);
    outcome.exit_code = record.exit_code;
    outcome.signal = record.signal;
    outcome.http_status = record.http_status;
    if !record.summary.is_empty() {
        outcome.summary = Some(record.summary.clone());
    }
    outcome.ran = Some((record.started_at, record.ended_at));
    outcome
}

impl Engine {
    /// [`Engine::trigger`] in cluster mode: the trigger becomes a queued run in the
    /// shared queue, which some node claims. The answer is `Queued` in any case: which
    /// node runs it, and when, is not known yet.
    pub(super) async fn enqueue_trigger(
        &self,
        link: &ClusterLink,
        kind: Kind,
        id: &str,
        trigger: Trigger,
    ) -> Result<Accepted, EngineError> {
        if self.is_shutting_down() {
            return Err(EngineError::ShuttingDown);
        }
        let id = self.lock().resolve(kind, id).ok_or(EngineError::NotFound)?;
        let source = trigger.source;
        let wake = self.wake_target(link);
        let queued = link
            .store
            .enqueue_waking(
                &job_key(kind, &id),
                &new_trigger(&trigger, &link.node),
                wake.as_deref(),
            )
            .await
            .map_err(|err| refused(err, "a trigger was not queued"))?;
        match queued {
            EnqueueOutcome::Enqueued { run_id } => {
                tracing::debug!(job = %id, run_id, "trigger queued in the cluster");
                // This node claims it, or the one node the store woke in the same
                // transaction (when this one has no free permit).
                self.inner.claim_wake.notify_one();
                self.publish(|| events::EngineEvent::Queued {
                    kind,
                    job_id: id.clone(),
                    trigger: source,
                });
                Ok(Accepted::Queued)
            }
            EnqueueOutcome::QueueFull => Err(EngineError::Busy),
            EnqueueOutcome::Paused => Err(EngineError::Paused),
        }
    }

    /// Wakes this node's claimer, and the other nodes' through a signal (not waited
    /// for: they poll anyway).
    fn wake_claimers(&self, link: &ClusterLink) {
        self.inner.claim_wake.notify_one();
        self.send_signal(link, Signal::wake(&link.node));
    }

    /// Sends a signal to the other nodes, off the caller's path; a signal that cannot be
    /// sent is only a delay (the nodes poll and read pause states back).
    fn send_signal(&self, link: &ClusterLink, signal: Signal) {
        let store = link.store.clone();
        let tracker = self.inner.cluster_work.clone();
        tracker.spawn_on(
            async move {
                if let Err(err) = store.signal(&signal).await {
                    tracing::debug!(error = %err, "a signal to the other nodes was not sent");
                }
            },
            &self.inner.runtime,
        );
    }

    /// Pauses or resumes a job for the whole cluster (the store first, then the other
    /// nodes through a signal); the caller then pauses or resumes it here. A no-op on a
    /// single node.
    pub async fn share_pause(&self, kind: Kind, id: &str, paused: bool) -> Result<(), EngineError> {
        let Some(link) = self.cluster() else {
            return Ok(());
        };
        let job = job_key(
            kind,
            &self.lock().resolve(kind, id).ok_or(EngineError::NotFound)?,
        );
        link.store
            .set_paused(&job, paused)
            .await
            .map_err(|err| refused(err, "a pause or resume was not recorded"))?;
        let op = if paused {
            SignalOp::Pause
        } else {
            SignalOp::Resume
        };
        self.send_signal(link, Signal::about(op, &job, &link.node));
        if !paused {
            // Its queued run, if any, may be claimed now (the other nodes claim on the
            // resume signal).
            self.inner.claim_wake.notify_one();
        }
        Ok(())
    }

    /// Cancels a job's run wherever it runs, and drops its queued run; the caller then
    /// cancels it here. A no-op on a single node.
    pub async fn share_cancel(&self, kind: Kind, id: &str) -> Result<(), EngineError> {
        let Some(link) = self.cluster() else {
            return Ok(());
        };
        let job = job_key(
            kind,
            &self.lock().resolve(kind, id).ok_or(EngineError::NotFound)?,
        );
        if link
            .store
            .record_cancel(&job)
            .await
            .map_err(|err| refused(err, "a cancel was not recorded"))?
        {
            crate::metrics::trigger_dropped("canceled");
        }
        self.send_signal(link, Signal::about(SignalOp::Cancel, &job, &link.node));
        Ok(())
    }

    /// Starts the node's cluster tasks: the claimer, the listener for signals (and the
    /// pause states read back), the housekeeping, the copier of running logs and the
    /// offerer of timer slots. They end at shutdown.
    pub(super) fn start_cluster_tasks(&self, link: &ClusterLink) {
        let runtime = &self.inner.runtime;
        runtime.spawn(self.clone().claimer(link.clone()));
        runtime.spawn(self.clone().listener(link.clone()));
        runtime.spawn(self.clone().housekeeper(link.clone()));
        runtime.spawn(self.clone().log_copier(link.clone()));
        runtime.spawn(self.clone().slot_offerer(link.clone()));
    }

    /// Claims queued runs while this node has free permits, and starts them.
    async fn claimer(self, link: ClusterLink) {
        // A node that ran alone before keeps its run numbers (and log names) unique.
        let counters: Vec<(JobKey, i64)> = {
            let registry = self.lock();
            let jobs = registry.jobs.iter().map(|(id, e)| (Kind::Job, id, e));
            let http = registry.http.iter().map(|(id, e)| (Kind::Http, id, e));
            jobs.chain(http)
                .map(|(kind, id, entry)| {
                    (
                        job_key(kind, id),
                        i64::try_from(entry.state.counter).unwrap_or(i64::MAX),
                    )
                })
                .collect()
        };
        let stop = self.inner.cluster_stop.clone();
        loop {
            match link.store.raise_counters(&counters).await {
                Ok(()) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot record the run counters in the cluster; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = stop.cancelled() => return,
                    }
                }
            }
        }
        let mut outage = false;
        // Polls in a row that found nothing (the wait doubles with each), and whether the
        // last claim followed a wake-up rather than a poll.
        let (mut empty_polls, mut woken) = (0u32, false);
        loop {
            if self.is_shutting_down() {
                return;
            }
            let free = self.inner.job_slots.available_permits();
            let waiting = self
                .inner
                .permit_waiters
                .load(std::sync::atomic::Ordering::SeqCst);
            let limit = u32::try_from(free.saturating_sub(waiting))
                .unwrap_or(u32::MAX)
                .min(CLAIM_BATCH);
            let mut claimed_some = false;
            match link.store.claim_runs(&link.node, limit).await {
                Ok(runs) => {
                    if outage {
                        tracing::info!("the cluster database answers again: claiming runs");
                        outage = false;
                    }
                    claimed_some = !runs.is_empty();
                    for run in runs {
                        self.start_claimed(&link, run);
                    }
                }
                Err(err) => {
                    if !outage {
                        tracing::warn!(error = %err, "cannot claim runs from the cluster; trying again");
                        outage = true;
                    }
                }
            }
            if claimed_some && limit == CLAIM_BATCH {
                // There may be more: claim again at once.
                continue;
            }
            let jitter = Duration::from_millis(rand::random_range(0..=CLAIM_POLL_JITTER_MS));
            // A wake-up's claim says nothing of the queue: only a poll that found runs
            // (runs no wake-up announced) brings the polls back to their fastest.
            if !woken {
                empty_polls = if claimed_some {
                    0
                } else {
                    empty_polls.saturating_add(1)
                };
            }
            let poll = CLAIM_POLL
                .saturating_mul(1 << empty_polls.min(3))
                .min(CLAIM_POLL_MAX);
            woken = tokio::select! {
                _ = tokio::time::sleep(poll + jitter) => false,
                _ = self.inner.claim_wake.notified() => true,
                _ = stop.cancelled() => return,
            };
        }
    }

    /// Starts a claimed run here, or gives it back when it cannot start here.
    fn start_claimed(&self, link: &ClusterLink, run: ClaimedRun) {
        let kind = engine_kind(run.job.kind);
        let id = run.job.id.clone();
        let claim = Claim {
            run_id: run.run_id,
            counter: u64::try_from(run.counter).unwrap_or(0),
        };
        let trigger = match trigger_of(&run) {
            Ok(trigger) => trigger,
            Err(err) => {
                // Not left claimed until its lease is reaped: recorded as failed now.
                tracing::error!(job = %id, run_id = run.run_id, error = %err, "a claimed run cannot start");
                let mut outcome = RunOutcome::new(RunStatus::Fail);
                outcome.summary = Some(err.to_string());
                self.report_end(
                    link,
                    Finishing {
                        job: run.job.clone(),
                        claim,
                        outcome,
                        log: None,
                    },
                );
                return;
            }
        };
        let mut registry = self.lock();
        match registry.get(kind, &id) {
            Some(entry) if entry.slot.run.is_none() && !entry.retired => {
                let taken = super::Taken {
                    queue_id: None,
                    claim: Some(claim),
                };
                // Followed by the log copier from now until its end is reported.
                link.copied
                    .track(claim.run_id, entry.log_dir.clone(), claim.counter);
                self.spawn_run(kind, &id, entry, trigger, taken, None);
                registry.run_tasks += 1;
                registry.publish_queue_length();
                drop(registry);
                self.changed();
                // The other nodes show it as the job's running run.
                let began = Signal::about_run(SignalOp::Began, &run.job, &link.node, claim.counter);
                self.send_signal(link, began);
            }
            _ => {
                // Gone from this node's configuration since its definitions were recorded,
                // or still ending its previous run here: some node takes it again.
                drop(registry);
                tracing::debug!(job = %id, run_id = run.run_id, "a claimed run goes back to the queue");
                self.release_claim(link, claim);
            }
        }
    }

    /// Gives a claimed run that did not begin back to the queue.
    pub(super) fn release_claim(&self, link: &ClusterLink, claim: Claim) {
        link.copied.forget(claim.run_id);
        let store = link.store.clone();
        let node = link.node.clone();
        self.inner.cluster_work.spawn_on(
            async move {
                if let Err(err) = store.release_run(claim.run_id, &node).await {
                    tracing::warn!(run_id = claim.run_id, error = %err,
                        "a claimed run that did not begin could not go back to the queue; \
                         it is recorded as interrupted once its lease lapses");
                }
            },
            &self.inner.runtime,
        );
    }

    /// Reports a claimed run's end to the store, its whole log copied first, retried
    /// while the database is away (the run's lease holds meanwhile, renewed by the
    /// heartbeat).
    pub(super) fn report_end(&self, link: &ClusterLink, finishing: Finishing) {
        let link = link.clone();
        let wake = self.clone();
        self.inner.cluster_work.spawn_on(
            async move {
                let (store, node) = (&link.store, &link.node);
                let Finishing {
                    job,
                    claim,
                    outcome,
                    log,
                } = finishing;
                let mut wait = Duration::from_secs(1);
                loop {
                    let copied = match &log {
                        Some(log) => Engine::copy_final_log(&link, claim.run_id, log).await,
                        None => Ok(()),
                    };
                    // Only an outage waits: a log the store refuses must not keep the
                    // run's end (and the job's next run) from being recorded.
                    let copied = match copied {
                        Err(err) if !err.is_unavailable() => {
                            tracing::warn!(run_id = claim.run_id, error = %err,
                                "a run's log was not copied to the cluster; its end is recorded");
                            Ok(())
                        }
                        other => other,
                    };
                    let finished = match copied {
                        Ok(()) => store.finish_run(claim.run_id, node, &outcome).await,
                        Err(err) => Err(err),
                    };
                    match finished {
                        Ok(Finish::Recorded) => {
                            // The other nodes show the job's new result.
                            let ended =
                                Signal::about_run(SignalOp::Ended, &job, node, claim.counter);
                            if let Err(err) = store.signal(&ended).await {
                                tracing::debug!(error = %err, "a run's end was not signalled to the other nodes");
                            }
                            break;
                        }
                        Ok(Finish::LeaseLost) => {
                            tracing::warn!(
                                run_id = claim.run_id,
                                counter = claim.counter,
                                "a run ended after its lease lapsed: the cluster recorded it as interrupted"
                            );
                            break;
                        }
                        Err(err) if err.is_unavailable() => {
                            tokio::time::sleep(wait).await;
                            wait = (wait * 2).min(FINISH_RETRY_MAX);
                        }
                        Err(err) => {
                            tracing::error!(run_id = claim.run_id, error = %err, "cannot record a run's end in the cluster");
                            break;
                        }
                    }
                }
                link.copied.forget(claim.run_id);
                if let Some(log) = &log {
                    Engine::after_final_log(&link, &job, log).await;
                }
                // A permit is free and the job idle: the next run may be claimed.
                wake.inner.claim_wake.notify_one();
            },
            &self.inner.runtime,
        );
    }

    /// Acts on the other nodes' signals, and reads the pause states back now and then.
    async fn listener(self, link: ClusterLink) {
        let stop = self.inner.cluster_stop.clone();
        let mut read_back = PauseReadBack::default();
        loop {
            let mut listener = match link.store.listen_as(&link.node).await {
                Ok(listener) => listener,
                Err(err) => {
                    tracing::debug!(error = %err, "cannot listen for the other nodes' signals; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        _ = stop.cancelled() => return,
                    }
                }
            };
            // A listener left on a host the pool moved away from (a failover while its
            // session lived) would hear nothing more: it reconnects at the next read-back.
            let host_generation = link.store.host_generation();
            let mut sync = tokio::time::interval(PAUSE_SYNC_EVERY);
            loop {
                tokio::select! {
                    received = listener.recv() => match received {
                        Ok(note) => self.on_signal(&link, note.payload()),
                        Err(err) => {
                            tracing::debug!(error = %err, "the signal connection broke; reconnecting");
                            break;
                        }
                    },
                    _ = sync.tick() => {
                        if link.store.host_generation() != host_generation {
                            break;
                        }
                        self.sync_pauses(&link, &mut read_back).await;
                        self.sync_cancels(&link).await;
                        self.recheck_remote_runs(&link);
                    }
                    _ = stop.cancelled() => return,
                }
            }
        }
    }

    fn on_signal(&self, link: &ClusterLink, text: &str) {
        let Some(signal) = Signal::parse(text) else {
            tracing::debug!("an unreadable signal from another node: ignored");
            return;
        };
        // A wake, and a resume (its job's queued run may be claimed now).
        if matches!(signal.op, SignalOp::Wake | SignalOp::Resume) {
            if signal.node != link.node {
                crate::metrics::cluster_wakeup();
            }
            self.inner.claim_wake.notify_one();
        }
        // The sending node acted on its own signal already.
        if signal.op == SignalOp::Wake || signal.node == link.node {
            return;
        }
        let Some(job) = signal.job() else {
            return;
        };
        let (kind, id) = (engine_kind(job.kind), job.id);
        if let (op @ (SignalOp::Began | SignalOp::Ended), Some(counter)) =
            (signal.op, signal.counter)
        {
            let ended = op == SignalOp::Ended;
            let task = self
                .clone()
                .remote_run(link.clone(), kind, id, counter, ended);
            self.inner.runtime.spawn(task);
            return;
        }
        let engine = self.clone();
        // Pauses are saved durably and cancels take the registry's lock: blocking work.
        self.inner.runtime.spawn_blocking(move || {
            let done = match signal.op {
                SignalOp::Pause => engine.pause(kind, &id),
                SignalOp::Resume => engine.resume(kind, &id),
                SignalOp::Cancel => engine
                    .cancel(kind, &id, "cancelled through the API on another node")
                    .map(|_| ()),
                SignalOp::Wake | SignalOp::Began | SignalOp::Ended => Ok(()),
            };
            if let Err(err) = done {
                tracing::debug!(job = %id, error = %err, "a signal from another node did not apply here");
            }
        });
    }

    /// Applies the cluster's pause states to this node's jobs where they differ: those
    /// changed since the last read, or every job's at the first read and every
    /// [`PAUSE_FULL_READ_EVERY`].
    async fn sync_pauses(&self, link: &ClusterLink, read_back: &mut PauseReadBack) {
        let since = read_back.since();
        let Ok(changes) = link.store.pause_changes(since).await else {
            return;
        };
        if since.is_none() {
            read_back.full_at = Some(tokio::time::Instant::now());
        }
        read_back.mark = Some(changes.mark);
        let states = changes.changed;
        let differing: Vec<(Kind, String, bool)> = {
            let mut registry = self.lock();
            states
                .into_iter()
                .filter_map(|(job, paused)| {
                    let kind = engine_kind(job.kind);
                    let entry = registry.get(kind, &job.id)?;
                    (entry.state.paused != paused).then_some((kind, job.id, paused))
                })
                .collect()
        };
        if differing.is_empty() {
            return;
        }
        let engine = self.clone();
        let _ = self
            .inner
            .runtime
            .spawn_blocking(move || {
                for (kind, id, paused) in differing {
                    let _ = if paused {
                        engine.pause(kind, &id)
                    } else {
                        engine.resume(kind, &id)
                    };
                }
            })
            .await;
    }

    /// Ends the runs of this node that a cancel was asked of, on any node, whose signal
    /// this node missed: a run already being cancelled is left as it is.
    async fn sync_cancels(&self, link: &ClusterLink) {
        let Ok(cancels) = link.store.cancels_for(&link.node).await else {
            return;
        };
        for (job, counter) in cancels {
            let kind = engine_kind(job.kind);
            let missed = self.lock().get(kind, &job.id).is_some_and(|entry| {
                entry.slot.run.as_ref().is_some_and(|run| {
                    run.counter == Some(counter) && !run.ended && run.cancel.borrow().is_none()
                })
            });
            if missed {
                tracing::info!(job = %job.id, counter, "a cancel whose signal was missed: ending the run");
                let _ = self.cancel(kind, &job.id, "cancelled through the API on another node");
            }
        }
    }

    /// Under the housekeeping lease: records the runs of nodes that stopped renewing
    /// their leases as interrupted, and prunes old slots and runs.
    async fn housekeeper(self, link: ClusterLink) {
        let stop = self.inner.cluster_stop.clone();
        let mut held = false;
        // When this node last pruned; `None`: not since it took the lease.
        let mut pruned: Option<tokio::time::Instant> = None;
        loop {
            match link
                .store
                .try_lease(HOUSEKEEPING_LEASE, &link.node, HOUSEKEEPING_TTL)
                .await
            {
                Ok(true) => {
                    if !held {
                        tracing::info!("this node does the cluster's housekeeping now");
                        held = true;
                    }
                    let prune = pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY);
                    if self.housekeeping(&link, prune).await && prune {
                        pruned = Some(tokio::time::Instant::now());
                    }
                }
                Ok(false) => (held, pruned) = (false, None),
                Err(err) => {
                    tracing::debug!(error = %err, "cannot take the housekeeping lease");
                    (held, pruned) = (false, None);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(HOUSEKEEPING_EVERY) => {}
                _ = stop.cancelled() => {
                    if held {
                        // Another node takes over at once rather than after the TTL.
                        let _ = link.store.release_lease(HOUSEKEEPING_LEASE, &link.node).await;
                    }
                    return;
                }
            }
        }
    }

    /// One round: reaps, and prunes when `prune`; true when the database answered.
    async fn housekeeping(&self, link: &ClusterLink, prune: bool) -> bool {
        let store = &link.store;
        let Ok(now) = store.db_now().await else {
            return false;
        };
        match store.reap_expired(now).await {
            Ok(reaped) => {
                for run in &reaped {
                    tracing::warn!(
                        job = %run.job.id,
                        counter = run.counter,
                        node = %run.node,
                        "a run is recorded as interrupted: its node stopped renewing its lease"
                    );
                }
                if !reaped.is_empty() {
                    self.wake_claimers(link);
                }
            }
            Err(err) => tracing::debug!(error = %err, "cannot reap lapsed runs"),
        }
        if prune && let Err(err) = store.prune(now - SLOTS_KEPT, RUNS_KEPT).await {
            tracing::debug!(error = %err, "cannot prune old slots and runs");
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pause_states_are_read_whole_first_then_by_change_with_a_full_read_now_and_then() {
        let mut read_back = PauseReadBack::default();
        assert_eq!(read_back.since(), None, "the first read is every job's");
        read_back.full_at = Some(tokio::time::Instant::now());
        read_back.mark = Some(0);
        assert_eq!(read_back.since(), Some(0));
        read_back.mark = Some(41);
        tokio::time::advance(PAUSE_FULL_READ_EVERY - Duration::from_secs(1)).await;
        assert_eq!(read_back.since(), Some(41));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(read_back.since(), None, "the full read is due");
    }
}
