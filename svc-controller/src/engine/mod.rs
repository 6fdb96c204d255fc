//! The job engine: every Job and JobHttp with its state, logs, timer and runs.
//!
//! [`Engine`] is a cheap-to-clone handle. All mutable job data sits in one registry
//! behind a std mutex that is only held for short, synchronous sections (never across an
//! `.await`). Each job has at most one run task at a time; a trigger that arrives while
//! the job is busy takes the one queue slot, a further one is refused. Job runs (not
//! JobHttp calls) share `max_job_running` permits, handed out in arrival order.

mod ahead;
pub mod clock;
pub mod cluster_link;
pub mod cluster_logs;
mod cluster_node;
mod cluster_slots;
#[cfg(test)]
mod counter_tests;
mod entry;
pub mod events;
pub mod executor;
mod persistence;
mod pings;
#[cfg(test)]
mod policy_tests;
mod queue_gauge;
pub mod read;
mod recovery;
mod registry;
mod reload;
#[cfg(test)]
mod reload_tests;
pub mod request;
mod run;
mod run_begin;
mod run_end;
mod sandbox_watch;
mod shutdown;
mod syncer;
#[cfg(test)]
mod task_sizes;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;
mod timer;
#[cfg(test)]
mod trigger_tests;
mod triggers;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, Semaphore, watch};

use crate::config::{Config, MainConfig};
use crate::util::lock::MutexExt as _;
use clock::Clock;
use entry::{ActiveRun, ClusterSide, Entry, Queued, RunSlot, Saving, Taken};
use executor::Executor;
use registry::Registry;

pub use crate::store::delivery::DeliveryFacts;
pub use cluster_link::ClusterLink;
pub use entry::{Def, Kind};
pub use pings::{PingEvent, RunPing};
pub use read::OpenLog;
pub use run_end::RunEnded;
pub use triggers::{Accepted, EngineError, Trigger, TriggerSource};

struct Inner {
    main: MainConfig,
    /// Starts the runners of runs: `svc-runner` processes in the service.
    executor: Arc<dyn Executor>,
    /// The wall time that timers and run records go by.
    clock: Arc<dyn Clock>,
    job_slots: Arc<Semaphore>,
    /// Run tasks waiting for a `job_slots` permit: while there is one, a run task hands
    /// its permit back between two runs instead of keeping it for its queued trigger.
    permit_waiters: std::sync::atomic::AtomicUsize,
    ahead: ahead::AheadBudget,
    registry: Mutex<Registry>,
    shutting_down: AtomicBool,
    /// Woken whenever a run task ends.
    run_task_ended: Notify,
    /// Bumped on every change visible in the Environment.
    generation: watch::Sender<u64>,
    /// Makes the ends of runs durable, off the run path.
    syncer: syncer::Syncer,
    /// The runtime that runs the engine's tasks (runs, timers, runner connections): the
    /// one current when the engine was made, whatever runtime calls into it later.
    runtime: tokio::runtime::Handle,
    /// Where the ends of runs that have notifications go, once set.
    run_ends: std::sync::OnceLock<tokio::sync::mpsc::Sender<RunEnded>>,
    /// Runs started and ended, pauses, resumes, reloads, for live watchers.
    events: events::EventBus,
    /// Where the health pings of jobs with a `ping_url` go, once set.
    pings: pings::PingSink,
    /// Cluster mode's store and node name; `None` on a single node. Given at creation
    /// and never changed: a node does not switch modes while it runs (the keys are read
    /// at start only).
    cluster: Option<ClusterLink>,
    /// Wakes the cluster claimer (work queued, a permit freed).
    claim_wake: Notify,
    /// Ends the cluster tasks at shutdown.
    cluster_stop: tokio_util::sync::CancellationToken,
    /// Reports to the cluster under way (runs' ends, released claims, signals), which the
    /// shutdown waits for.
    cluster_work: tokio_util::task::TaskTracker,
}

/// Handle on the job engine.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Loads the state and logs of every job (repairing what a crash left, and removing
    /// the temporary directories of interrupted runs) and returns the engine, which
    /// executes runs with `executor` and schedules by `clock`. Timers start with
    /// [`Engine::start_timers`]. With `cluster`, the engine is one node of a cluster
    /// (the node has joined it already); without, it runs as a single node.
    pub fn new(
        config: &Config,
        executor: Arc<dyn Executor>,
        clock: Arc<dyn Clock>,
        cluster: Option<ClusterLink>,
    ) -> Engine {
        let main = config.main.clone();
        crate::store::runtmp::remove_leftovers(&main);
        let inner = Arc::new(Inner {
            job_slots: Arc::new(Semaphore::new(main.max_job_running.max(1))),
            permit_waiters: std::sync::atomic::AtomicUsize::new(0),
            ahead: ahead::AheadBudget::default(),
            main,
            executor,
            clock,
            registry: Mutex::new(Registry::default()),
            shutting_down: AtomicBool::new(false),
            run_task_ended: Notify::new(),
            generation: watch::Sender::new(0),
            syncer: syncer::Syncer::start(),
            runtime: tokio::runtime::Handle::current(),
            run_ends: std::sync::OnceLock::new(),
            events: events::EventBus::default(),
            pings: pings::PingSink::new(),
            cluster,
            claim_wake: Notify::new(),
            cluster_stop: tokio_util::sync::CancellationToken::new(),
            cluster_work: tokio_util::task::TaskTracker::new(),
        });
        let engine = Engine { inner };
        engine.count_queue_when_read();
        {
            let mut registry = engine.lock();
            for job in &config.jobs {
                let entry = engine.load_entry(Kind::Job, Def::Job(Arc::new(job.clone())), &job.id);
                registry.jobs.insert(job.id.clone(), entry);
            }
            for job in &config.http_jobs {
                let entry =
                    engine.load_entry(Kind::Http, Def::Http(Arc::new(job.clone())), &job.id);
                registry.http.insert(job.id.clone(), entry);
            }
            registry.rebuild_indexes();
        }
        engine
    }

    pub fn main(&self) -> &MainConfig {
        &self.inner.main
    }

    /// The cluster this engine is a node of, if any.
    pub fn cluster(&self) -> Option<&ClusterLink> {
        self.inner.cluster.as_ref()
    }

    /// From now on, hands the end of every run whose job lists notifications for its
    /// result to `sink` ([`RunEnded`]), without ever waiting for it: when the channel is
    /// full the event is dropped, and the log says so. Set once; a second call is
    /// ignored.
    pub fn announce_run_ends_to(&self, sink: tokio::sync::mpsc::Sender<RunEnded>) {
        if self.inner.run_ends.set(sink).is_err() {
            tracing::warn!("the ends of runs are already announced elsewhere");
        }
    }

    /// From now on, hands the start and the end of every run whose job has a
    /// `ping_url` to `sink` ([`RunPing`]), as [`Engine::announce_run_ends_to`] does: never
    /// waiting, a full channel drops the ping. Set once; a second call is ignored.
    pub fn send_pings_to(&self, sink: tokio::sync::mpsc::Sender<RunPing>) {
        if self.inner.pings.set(sink).is_err() {
            tracing::warn!("health pings are already sent elsewhere");
        }
    }

    /// Follows what happens from now on ([`events::EngineEvent`]), with the sequence
    /// number of the last event before; refused once the service is stopping, whose
    /// [`events::EngineEvent::Stopping`] a later subscriber would never see.
    pub fn subscribe(
        &self,
    ) -> Result<(tokio::sync::broadcast::Receiver<events::Published>, u64), EngineError> {
        let subscribed = self.inner.events.subscribe();
        // After the subscription: a shutdown that began before it is seen here, one that
        // begins after it reaches the subscriber as `Stopping`.
        if self.is_shutting_down() {
            return Err(EngineError::ShuttingDown);
        }
        Ok(subscribed)
    }

    /// Tells live watchers about `make`'s event, when there are any; never waits.
    fn publish(&self, make: impl FnOnce() -> events::EngineEvent) {
        self.inner.events.publish(make);
    }

    fn changed(&self) {
        self.inner
            .generation
            .send_modify(|g| *g = g.wrapping_add(1));
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock leaves consistent data (no multi-step invariants
        // span a panic point), so a poisoned lock is still usable.
        self.inner.registry.locked()
    }

    /// Takes and releases the registry lock: true unless the engine is stuck (the
    /// systemd watchdog pings only while this returns).
    pub fn is_responsive(&self) -> bool {
        drop(self.lock());
        true
    }

    /// Whether the service is stopping (no new run begins).
    fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::SeqCst)
    }

    /// A number that changes whenever something the Environment shows changes: views
    /// built for one generation can be served until it changes.
    pub fn generation(&self) -> u64 {
        *self.inner.generation.borrow()
    }
}
