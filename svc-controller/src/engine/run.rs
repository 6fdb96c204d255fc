//! One run task per busy job: waits for a permit, runs, records, then takes the queued
//! trigger if there is one.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, watch};

use super::executor::{Runner, SpareStart};
use super::pings::RunPinger;
use super::run_begin::{Begun, Work, begin, begin_on_disk};
use super::run_end::{Announce, history_record, run_ended};
use super::sandbox_watch::SandboxWatch;
use super::{Engine, Kind, Trigger, TriggerSource};
use crate::runner::exec::{Outcome, RunEvent};
use crate::store::history::RunRecord;
use crate::store::logstore::RunLog;
use crate::store::state::{RunResult, RunStatus};
use crate::util::fsutil::Durability;

pub(super) async fn run_task(
    engine: Engine,
    kind: Kind,
    id: String,
    mut trigger: Trigger,
    mut runner: Option<Box<dyn Runner>>,
    mut cancel: watch::Receiver<Option<String>>,
) {
    let mut guard = RunTaskGuard {
        engine: engine.clone(),
        kind,
        id: id.clone(),
        ended: false,
    };
    // The permit and the begun run of the queued trigger, when the end of the run before
    // began it in the same trip (see `follow` in `run_begun`).
    let mut carried: Option<(Option<OwnedSemaphorePermit>, Box<Begun>)> = None;
    loop {
        let (permit, begun, may_run) = match carried.take() {
            Some((permit, begun)) => (permit, Some(begun), true),
            None => acquire_and_begin(&engine, kind, &id, &trigger, &mut runner, &mut cancel).await,
        };
        if begun.is_none() && not_begun(&engine, kind, &id, &trigger, may_run).await {
            // Resumed while this task found it paused: a resume finds the job busy
            // with this very task and leaves the trigger to it, so it starts now.
            continue;
        }
        if let Some(begun) = begun {
            // Boxed, like `begin`: a run task waits for its permit in the size of its
            // largest state, and 1,000 timers due at once spawn 1,000 of them.
            let after = Box::pin(run_begun(
                &engine,
                kind,
                &id,
                &trigger,
                begun,
                &mut cancel,
                permit.is_some(),
            ))
            .await;
            match after {
                AfterEnd::Next(next) => {
                    let Next {
                        trigger: next_trigger,
                        cancel: next_cancel,
                        begun,
                    } = *next;
                    trigger = next_trigger;
                    cancel = next_cancel;
                    match begun {
                        Some(begun) => carried = Some((permit, begun)),
                        // Its begin was refused (paused, or the service stopping): the
                        // loop's own begin finds that again and puts the trigger back.
                        None => drop(permit),
                    }
                    continue;
                }
                AfterEnd::Ended => {
                    guard.ended = true;
                    return;
                }
                AfterEnd::Separate => {}
            }
        }
        drop(permit);
        match engine.take_next(kind, &id) {
            Some((next, next_cancel)) => {
                trigger = next;
                cancel = next_cancel;
            }
            None => {
                guard.ended = true;
                return;
            }
        }
    }
}

/// Waits for a permit of `max_job_running` (a Job's run; a JobHttp call takes none),
/// unless the run is cancelled meanwhile, then begins the run when it may run. Returns
/// the permit, the begun run (`None` when it must not happen) and whether it may run.
async fn acquire_and_begin(
    engine: &Engine,
    kind: Kind,
    id: &str,
    trigger: &Trigger,
    runner: &mut Option<Box<dyn Runner>>,
    cancel: &mut watch::Receiver<Option<String>>,
) -> (Option<OwnedSemaphorePermit>, Option<Box<Begun>>, bool) {
    let permit = if kind == Kind::Job {
        let _waiting = Waiting::new(&engine.inner.permit_waiters);
        tokio::select! {
            permit = engine.inner.job_slots.clone().acquire_owned() => permit.ok(),
            _ = wait_cancelled(cancel) => None,
        }
    } else {
        None
    };
    let may_run = kind == Kind::Http || permit.is_some();
    #[cfg(test)]
    tests::before_begin(engine, kind, id);
    // Boxed, like `run_begun`: a run task waits for its permit in the size of its
    // largest state, and 1,000 timers due at once spawn 1,000 of them.
    let begun = if may_run {
        Box::pin(begin(engine, kind, id, trigger, runner.take())).await
    } else {
        None
    };
    (permit, begun, may_run)
}

/// What becomes of the trigger of a run that did not begin: a claimed run goes back to
/// the shared queue, which keeps it (and its trigger) for whichever node can run it; an
/// accepted trigger of a job paused, or of a service stopping, between its acceptance
/// and its start waits in the queue (and the state file) instead of vanishing. True when
/// the job is runnable again and the task is to begin the run at once.
async fn not_begun(
    engine: &Engine,
    kind: Kind,
    id: &str,
    trigger: &Trigger,
    may_run: bool,
) -> bool {
    if let Some((claim, link)) = engine.take_claim(kind, id) {
        engine.release_claim(&link, claim);
    } else if trigger.source != TriggerSource::Timer && (may_run || engine.is_shutting_down()) {
        #[cfg(test)]
        tests::before_requeue(engine, kind, id);
        let (requeue, queued) = (engine.clone(), trigger.clone());
        let job = id.to_string();
        return on_disk(move || requeue.requeue(kind, &job, queued)).await == Requeued::RunNow;
    }
    false
}

/// Does a begun run and records its end; then what follows it: its retry or chained
/// jobs, its notifications and its ping. Returns what the end did besides ending it.
/// `has_permit`: the run holds a permit of `max_job_running`.
async fn run_begun(
    engine: &Engine,
    kind: Kind,
    id: &str,
    trigger: &Trigger,
    begun: Box<Begun>,
    cancel: &mut watch::Receiver<Option<String>>,
    has_permit: bool,
) -> AfterEnd {
    #[cfg(test)]
    tests::maybe_panic(id);
    let started = std::time::Instant::now();
    let counter = begun.context.counter;
    let started_at = begun.context.started_at;
    // Retries and chains follow the definition the run began with, as its log
    // and notifications do.
    let def = begun.context.def.clone();
    let files = begun.files.clone();
    let announce = Announce::new(engine, kind, &begun.context);
    let context = &begun.context;
    let ping = RunPinger::new(engine, kind, &def, counter, &context.log_dir);
    if let Some(ping) = &ping {
        ping.start(engine);
    }
    let (outcome, log) = perform(begun, cancel).await;
    let duration = started.elapsed();
    // Cancelled, whatever the runner saw of it, when the engine asked (cancel,
    // `on_busy = replace`, shutdown) and the run did not succeed anyway.
    let status = outcome.status(cancel.borrow().is_some());
    let result = status.result();
    let record = history_record(
        trigger,
        counter,
        &outcome,
        status,
        (started_at, engine.inner.clock.now()),
        duration,
    );
    let ended_at = record.ended_at;
    // With a trigger in the queue and no other run waiting for a permit, this
    // run's end and the next run's begin are one piece of file work, done on
    // this thread ([`on_disk_in_place`]), and the permit is kept: on the way
    // from one run of a busy job to the next, no hand-over between threads.
    let follow = (kind == Kind::Http
        || (has_permit && engine.inner.permit_waiters.load(Ordering::SeqCst) == 0))
        && engine.has_runnable_queue(kind, id);
    let next_runner = if follow {
        Some(engine.take_runner(kind, id, SpareStart::Now).await)
    } else {
        None
    };
    let after = {
        let (engine, id) = (engine.clone(), id.to_string());
        on_disk_in_place(move || {
            engine.end_run(kind, &id, record, log, files);
            let Some(runner) = next_runner else {
                return AfterEnd::Separate;
            };
            match engine.take_next(kind, &id) {
                Some((trigger, cancel)) => {
                    let begun = begin_on_disk(&engine, kind, &id, &trigger, true)
                        .map(|disk| Begun::new(disk, runner));
                    AfterEnd::Next(Box::new(Next {
                        trigger,
                        cancel,
                        begun,
                    }))
                }
                // (The runner taken for it is ended as it is dropped.)
                None => AfterEnd::Ended,
            }
        })
        .await
    };
    // A failed attempt with a retry left is not the outcome: its notifications
    // and chains wait for the last attempt.
    if engine.retry_or_chain(&def, counter, result, trigger.attempt) {
        if let Some(announce) = announce {
            announce.send(engine, result, ended_at);
        }
        if let Some(ping) = ping {
            ping.end(engine, status, outcome.detail);
        }
    }
    if outcome.success {
        tracing::info!(job = id, counter, "run succeeded");
    } else {
        tracing::warn!(job = id, counter, summary = %outcome.summary, "run failed");
    }
    after
}

/// Counts a run task among those waiting for a permit for as long as it lives, also
/// when the task is dropped while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(waiters: &'a AtomicUsize) -> Waiting<'a> {
        waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(waiters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the end of a run did besides ending it.
enum AfterEnd {
    /// Nothing: the task takes the next trigger itself.
    Separate,
    /// It took the queued trigger and began its run (`begun`, or `None` when the run
    /// must not happen).
    Next(Box<Next>),
    /// It found the queue empty: the task is over.
    Ended,
}

/// The queued trigger that the end of a run took, and its begun run.
struct Next {
    trigger: Trigger,
    cancel: watch::Receiver<Option<String>>,
    begun: Option<Box<Begun>>,
}

/// What became of the trigger of a run that could not begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requeued {
    /// It waits in the queue (and the state file) for the resume or the next start.
    Queued,
    /// Its job is gone, or the queue was full: logged and counted.
    Dropped,
    /// The job is runnable again: the task starts the run itself.
    RunNow,
}

/// Reason written into the log of a run whose task ended abnormally.
const ABANDONED: &str = "internal error: the run's task ended abnormally (see the service log)";

/// Makes a run task's end certain: if the task unwinds from a panic, or is dropped while
/// the service runs, the run in progress is recorded as failed (log and state) and the
/// job is freed, so that its queued trigger and every later one still run. Without it,
/// such a job would show `started` for ever and refuse every trigger. The permit of
/// `max_job_running` needs no help: it is released when the task's stack unwinds.
struct RunTaskGuard {
    engine: Engine,
    kind: Kind,
    id: String,
    /// Set on the task's normal way out.
    ended: bool,
}

impl Drop for RunTaskGuard {
    fn drop(&mut self) {
        if self.ended || self.engine.is_shutting_down() {
            // At shutdown the next start repairs a `.started` log as interrupted.
            return;
        }
        tracing::error!(
            job = self.id,
            panicking = std::thread::panicking(),
            "a run task ended abnormally: its run is recorded as failed"
        );
        let (engine, kind, id) = (self.engine.clone(), self.kind, self.id.clone());
        match tokio::runtime::Handle::try_current() {
            // File work: on the blocking pool, not on the worker that is unwinding.
            Ok(_) => {
                let runtime = engine.inner.runtime.clone();
                drop(runtime.spawn_blocking(move || engine.abandon_run(kind, &id)));
            }
            Err(_) => engine.abandon_run(kind, &id),
        }
    }
}

/// Runs file work that syncs to disk on tokio's blocking pool, so that a slow disk does
/// not stall the runtime's worker threads (and with them every HTTP request). Only file
/// work goes there: runners are spawned from the workers, since a runner's parent-death
/// signal follows the thread that spawned it and blocking threads exit when idle.
async fn on_disk<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    join_blocking(tokio::task::spawn_blocking(work)).await
}

/// Like [`on_disk`], for file work on the way from one run of a job to the next: on a
/// multi-threaded runtime the work runs on this very thread, after tokio has handed the
/// worker's other tasks to another thread (`block_in_place`), so the run task goes on
/// without two hand-overs between threads. Under load each hand-over waits for a CPU
/// (0.3 to 0.6 ms behind a flood of requests), and the next run's command waits for
/// both. A current-thread runtime (some tests) has no other worker to hand its tasks
/// to: there the work goes to the blocking pool.
async fn on_disk_in_place<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => on_disk(work).await,
    }
}

/// Waits for blocking work, passing a panic in it on to the caller.
pub(super) async fn join_blocking<T>(handle: tokio::task::JoinHandle<T>) -> T {
    match handle.await {
        Ok(value) => value,
        Err(err) => match err.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            Err(err) => panic!("disk work cancelled: {err}"),
        },
    }
}

async fn wait_cancelled(cancel: &mut watch::Receiver<Option<String>>) {
    while cancel.borrow_and_update().is_none() {
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Writes log events, remembering the first write error so the run can report it.
struct LogWriter {
    log: Option<RunLog>,
    error: Option<String>,
    /// For a sandboxed run of commands: what its sandbox refused.
    watch: Option<SandboxWatch>,
}

impl LogWriter {
    fn event(&mut self, event: RunEvent<'_>) {
        let Some(log) = self.log.as_mut() else { return };
        let result = match event {
            RunEvent::Line(text) => log.line(&text),
            RunEvent::Output(kind, data) => {
                if let Some(watch) = self.watch.as_mut() {
                    watch.output(data);
                }
                log.output(kind, data)
            }
            RunEvent::HttpStatus(_) => Ok(()),
        };
        if let Err(err) = result
            && self.error.is_none()
        {
            self.error = Some(format!("cannot write the log: {err}"));
        }
    }

    fn line(&mut self, text: String) {
        self.event(RunEvent::Line(text));
    }
}

/// Does the run in its runner and writes its log; returns how it ended and the log,
/// still to be finished.
async fn perform(
    begun: Box<Begun>,
    cancel: &mut watch::Receiver<Option<String>>,
) -> (Outcome, Option<RunLog>) {
    let Begun {
        context,
        prepared,
        runner,
        ..
    } = *begun;
    let counter = context.counter;
    let (mut writer, request) = match prepared {
        Ok((log, request)) => (
            LogWriter {
                log: Some(log),
                error: None,
                watch: None,
            },
            request,
        ),
        Err(err) => {
            let message = format!(
                "cannot create the log in {}: {err}",
                context.log_dir.dir().display()
            );
            tracing::error!(job = context.def.name(), counter, "{message}");
            let writer = LogWriter {
                log: None,
                error: Some(message.clone()),
                watch: None,
            };
            (writer, Err(message))
        }
    };

    let outcome = match request {
        Err(error) => Outcome::fail(error),
        Ok(Work {
            request: exec_request,
            ruleset,
        }) => {
            let commands = matches!(exec_request.action, proto::Action::Commands { .. });
            if let (Some(sandbox), true) = (&exec_request.sandbox, commands) {
                writer.watch = Some(SandboxWatch::new(&sandbox.write_paths));
            }
            if exec_request.sandbox.is_none() && commands {
                writer.line(
                    "--- sandbox: off (the job sets sandbox = false): its commands may read \
                     and write whatever their user may"
                        .into(),
                );
            }
            let mut sink = |event: RunEvent<'_>| writer.event(event);
            runner
                .execute(exec_request, ruleset, cancel, &mut sink)
                .await
        }
    };

    let mut outcome = outcome;
    if let Some(error) = writer.error.clone() {
        outcome = Outcome {
            success: false,
            summary: error,
            ..outcome
        };
    }
    // A failed run whose sandbox refused a write says which key would allow it.
    if let (false, Some(watch)) = (outcome.success, writer.watch.take())
        && let Some(advice) = watch.advice(context.def.name())
    {
        writer.line(advice);
    }
    let end = if outcome.success {
        format!("=== run {counter} finished: success")
    } else {
        format!("=== run {counter} finished: fail: {}", outcome.summary)
    };
    writer.line(end);
    (outcome, writer.log.take())
}

impl Engine {
    /// Puts back into the queue the trigger of a run that could not begin because its
    /// job was paused or the service is stopping, and saves it; tells the run task to
    /// try again at once when the job was resumed meanwhile. Blocking.
    fn requeue(&self, kind: Kind, id: &str, trigger: Trigger) -> Requeued {
        let stopping = self.is_shutting_down();
        {
            let mut registry = self.lock();
            let Some(entry) = registry.map(kind).get_mut(id) else {
                tracing::warn!(job = id, "a trigger is dropped: its job was removed");
                crate::metrics::trigger_dropped("job_removed");
                return Requeued::Dropped;
            };
            if entry.retired {
                tracing::warn!(job = id, "a trigger is dropped: its job was removed");
                crate::metrics::trigger_dropped("job_removed");
                return Requeued::Dropped;
            }
            if !(entry.state.paused || stopping) {
                return Requeued::RunNow;
            }
            if entry.slot.queued.is_some() {
                tracing::warn!(
                    job = id,
                    "a trigger that could not start is dropped: the queue is full"
                );
                crate::metrics::trigger_dropped("queue_full");
                return Requeued::Dropped;
            }
            entry.queue(trigger);
            registry.publish_queue_length();
        }
        tracing::info!(
            job = id,
            "the job was paused before its run began: the trigger waits"
        );
        self.persist(kind, id, Durability::Durable);
        Requeued::Queued
    }

    /// Cleans up after a run task that ended abnormally ([`RunTaskGuard`]): finishes the
    /// log of the run it had begun as a failure, saves the state, and hands a queued
    /// trigger to a new task (or marks the job idle). Blocking.
    fn abandon_run(&self, kind: Kind, id: &str) {
        let begun = {
            let mut registry = self.lock();
            let Some(entry) = registry.map(kind).get_mut(id) else {
                return;
            };
            let counter = entry.slot.run.as_mut().and_then(|run| run.counter.take());
            if let Some(claim) = entry.slot.run.as_mut().and_then(|run| run.claim.take()) {
                let mut outcome = crate::cluster::RunOutcome::new(RunStatus::Fail);
                outcome.summary = Some(ABANDONED.to_string());
                entry.cluster.finishing = Some(super::cluster_node::Finishing {
                    job: super::cluster_link::job_key(kind, id),
                    claim,
                    outcome,
                    log: counter.map(|counter| super::cluster_logs::LogCopy {
                        dir: entry.log_dir.clone(),
                        counter,
                        keep: entry.def.log_retention(),
                    }),
                });
            }
            if counter.is_some() {
                entry.state.started = false;
                entry.state.last_result = Some(RunResult::Fail);
            }
            let started_at = entry.state.last_run;
            counter.map(|counter| (counter, entry.log_dir.clone(), started_at))
        };
        if let Some((counter, log_dir, started_at)) = begun {
            // Begun when the job's `last_run` says (the begin set it), ended now. Its
            // history line is queued before its log is renamed, as in `end_run`.
            let ended_at = self.inner.clock.now();
            let record = RunRecord::lost(
                counter,
                RunStatus::Fail,
                (started_at.unwrap_or(ended_at), ended_at),
                ABANDONED,
            );
            self.inner.syncer.run_end(super::syncer::RunEnd {
                history: Some((self.history_file(kind, id), record.to_line())),
                ..Default::default()
            });
            match log_dir.fail_started(counter, ABANDONED) {
                Ok(status) => {
                    let mut registry = self.lock();
                    if let Some(entry) = registry.map(kind).get_mut(id) {
                        entry.logs.retain(|log| log.counter != counter);
                        entry
                            .logs
                            .push(crate::store::logstore::LogMeta { counter, status });
                    }
                }
                // No log was created (or it is gone): the state alone records the run.
                Err(err) => {
                    tracing::warn!(job = id, counter, error = %err, "cannot finish the log of an abandoned run");
                }
            }
            self.persist(kind, id, Durability::Atomic);
            crate::metrics::run_finished(kind.as_str(), id, &record);
            self.publish(|| run_ended(kind, id, &record));
        }
        if let Some((trigger, cancel)) = self.take_next(kind, id) {
            match tokio::runtime::Handle::try_current() {
                Ok(_) => drop(self.inner.runtime.spawn(run_task(
                    self.clone(),
                    kind,
                    id.to_string(),
                    trigger,
                    None,
                    cancel,
                ))),
                Err(_) => tracing::error!(job = id, "no runtime left: a queued trigger is dropped"),
            }
        }
        self.changed();
    }

    /// Takes the cluster claim of the job's run, with the cluster link (cluster mode).
    fn take_claim(
        &self,
        kind: Kind,
        id: &str,
    ) -> Option<(super::cluster_node::Claim, super::cluster_link::ClusterLink)> {
        let link = self.cluster()?.clone();
        let claim = self
            .lock()
            .map(kind)
            .get_mut(id)?
            .slot
            .run
            .as_mut()?
            .claim
            .take()?;
        Some((claim, link))
    }

    /// Whether the job has a trigger in its queue that [`Engine::take_next`] would hand
    /// over now (a hint: the queue may change before).
    fn has_runnable_queue(&self, kind: Kind, id: &str) -> bool {
        let stopping = self.is_shutting_down();
        self.lock()
            .map(kind)
            .get(id)
            .is_some_and(|entry| entry.slot.queued.is_some() && entry.queue_may_run(stopping))
    }

    /// After a run: hands over the queued trigger with a fresh cancel channel, or marks
    /// the job idle and ends the task.
    fn take_next(
        &self,
        kind: Kind,
        id: &str,
    ) -> Option<(Trigger, watch::Receiver<Option<String>>)> {
        let stopping = self.is_shutting_down();
        let mut registry = self.lock();
        // Reported once the job is idle here (below, under the same lock), so that a
        // claim of the job's next run finds it ready.
        let mut finishing = None;
        let next = match registry.map(kind).get_mut(id) {
            Some(entry) => {
                finishing = entry.cluster.finishing.take();
                let next = if entry.queue_may_run(stopping) {
                    entry.take_queued()
                } else {
                    None
                };
                match next {
                    Some((trigger, queue_id)) => {
                        let (cancel, cancel_rx) = watch::channel(None);
                        entry.slot.run = Some(super::ActiveRun {
                            counter: None,
                            ended: false,
                            cancel,
                            queue_id,
                            claim: None,
                        });
                        Some((trigger, cancel_rx))
                    }
                    None => {
                        entry.slot.run = None;
                        if entry.retired {
                            registry.map(kind).remove(id);
                            // After its last run was counted: none of its series stays.
                            crate::metrics::job_removed(kind.as_str(), id);
                        }
                        None
                    }
                }
            }
            None => None,
        };
        registry.publish_queue_length();
        if let (Some(finishing), Some(link)) = (finishing, self.cluster()) {
            self.report_end(link, finishing);
        }
        if next.is_none() {
            registry.run_tasks = registry.run_tasks.saturating_sub(1);
            drop(registry);
            self.inner.run_task_ended.notify_waiters();
            self.changed();
        }
        next
    }
}

/// Hooks that let the engine's tests (`super::tests`) interleave with a run task at
/// fixed points, chosen by job ID prefix (test builds only: they compile into nothing
/// else).
#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Jobs whose ID starts with this panic right after their run began.
    pub(in crate::engine) const PANIC_PREFIX: &str = "panic_in_run";

    pub(super) fn maybe_panic(id: &str) {
        if id.starts_with(PANIC_PREFIX) {
            panic!("injected panic in the run task of {id}");
        }
    }

    /// Jobs whose ID starts with this are paused once right before their first run
    /// begins, and resumed right after it found the job paused: the interleaving of a
    /// pause and a resume with a run task that is about to start.
    pub(in crate::engine) const PAUSE_RACE_PREFIX: &str = "pause_race";
    pub(in crate::engine) static PAUSE_RACE_PAUSED: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);

    pub(super) fn before_begin(engine: &Engine, kind: Kind, id: &str) {
        if id.starts_with(PAUSE_RACE_PREFIX)
            && !PAUSE_RACE_PAUSED.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            engine.pause(kind, id).expect("pause");
        }
    }

    pub(super) fn before_requeue(engine: &Engine, kind: Kind, id: &str) {
        if id.starts_with(PAUSE_RACE_PREFIX) {
            engine.resume(kind, id).expect("resume");
        }
    }

    /// Jobs whose ID starts with this see the shutdown begin (its flag set, as its first
    /// step does) right before their trigger reaches the registry: the interleaving of a
    /// SIGTERM with a request that is being accepted.
    pub(in crate::engine) const STOP_RACE_PREFIX: &str = "stop_race";

    pub(in crate::engine) fn before_registry(engine: &Engine, id: &str) {
        if id.starts_with(STOP_RACE_PREFIX) {
            engine
                .inner
                .shutting_down
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// What the log of a run whose task ended abnormally ends with.
    pub(in crate::engine) const ABANDONED_REASON: &str = ABANDONED;
}
