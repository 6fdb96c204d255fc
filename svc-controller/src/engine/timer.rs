//! Timers: one task per job with an interval or schedule, started and restarted with
//! the job, and what the engine does when one falls due.

use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::ahead::AheadRunner;
use super::executor::Runner;
use super::{Engine, Entry, Kind, Taken, Trigger, TriggerSource};
use crate::config::OnBusy;
use crate::time::schedule::Timer;
use crate::util::fsutil::Durability;

/// How long before a due time the timer starts the run's runner, so that at the due
/// time only the run's own work is left: starting a runner (exec, dynamic loading,
/// connecting) costs a millisecond or more of CPU, which adds up when many jobs fall due
/// together. The runner waits, doing nothing, until the due time hands it the work.
const LAUNCH_AHEAD: Duration = Duration::from_millis(250);

impl Engine {
    /// Starts the timer of every job that has one, and the runs of triggers that were
    /// queued when the controller stopped (those of paused jobs wait for the resume).
    pub fn start_timers(&self) {
        if let Some(link) = self.cluster() {
            self.start_cluster_tasks(link);
        }
        let mut registry = self.lock();
        for kind in [Kind::Job, Kind::Http] {
            let ids: Vec<String> = registry.map(kind).keys().cloned().collect();
            for id in ids {
                if let Some(entry) = registry.get(kind, &id) {
                    self.restart_timer(kind, &id, entry);
                    if self.start_queued(kind, &id, entry) {
                        registry.run_tasks += 1;
                    }
                }
            }
        }
    }

    pub(super) fn restart_timer(&self, kind: Kind, id: &str, entry: &mut Entry) {
        if let Some(handle) = entry.slot.timer.take() {
            handle.abort();
        }
        entry.slot.next_run = None;
        if entry.def.timer().is_none() {
            // The timer task exports the gap of a timer; a job without one has none.
            crate::metrics::job_interval(kind.as_str(), id, None);
        }
        if let Some(timer) = entry.def.timer().cloned() {
            let task =
                self.inner
                    .runtime
                    .spawn(timer_task(self.clone(), kind, id.to_string(), timer));
            entry.slot.timer = Some(task.abort_handle());
        }
    }

    /// Whether a timer firing now would start a run (the job idle and not paused).
    fn timer_would_fire(&self, kind: Kind, id: &str) -> bool {
        if self.is_shutting_down() {
            return false;
        }
        let mut registry = self.lock();
        registry
            .get(kind, id)
            .is_some_and(|entry| !entry.state.paused && entry.slot.run.is_none())
    }

    /// Called by a timer when a job is due, with the runner it started ahead if any.
    fn timer_fired(&self, kind: Kind, id: &str, runner: Option<Box<dyn Runner>>) {
        if self.inner.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let mut registry = self.lock();
        let Some(entry) = registry.get(kind, id) else {
            return;
        };
        if entry.state.paused {
            tracing::debug!(job = id, "timer fired while paused: skipped");
            crate::metrics::timer_tick_skipped("paused");
            return;
        }
        if entry.slot.run.is_some() {
            match entry.def.on_busy() {
                OnBusy::Queue => {
                    // Counted rather than logged: with many jobs on short intervals, a
                    // line per tick flooded the log, and writing it held up the other
                    // timers.
                    tracing::debug!(
                        job = id,
                        "timer fired while the previous run is still going on: skipped"
                    );
                    crate::metrics::timer_tick_skipped("running");
                }
                OnBusy::Skip => {
                    tracing::info!(
                        job = id,
                        "timer slot skipped: the job is running (on_busy = skip)"
                    );
                    crate::metrics::timer_tick_skipped("running");
                }
                OnBusy::Replace => {
                    entry.replace_run(id, Trigger::new(TriggerSource::Timer));
                    registry.publish_queue_length();
                    drop(registry);
                    // Kept in the state file like any queued trigger, off this thread.
                    let (engine, id) = (self.clone(), id.to_string());
                    self.inner.runtime.spawn_blocking(move || {
                        engine.persist(kind, &id, Durability::Durable);
                    });
                    self.changed();
                }
            }
            return;
        }
        self.spawn_run(
            kind,
            id,
            entry,
            Trigger::new(TriggerSource::Timer),
            Taken::default(),
            runner,
        );
        registry.run_tasks += 1;
        registry.publish_queue_length();
        drop(registry);
        self.changed();
    }
}

/// Sleeps until each due time and fires the job; `next_run` is kept exact throughout.
pub(super) async fn timer_task(engine: Engine, kind: Kind, id: String, timer: Timer) {
    let (last_run, paused, (catch_up, random_delay)) = {
        let mut registry = engine.lock();
        match registry.get(kind, &id) {
            Some(entry) => (entry.state.last_run, entry.state.paused, entry.def.timing()),
            None => return,
        }
    };
    let clock = engine.inner.clock.clone();
    // Here rather than under the registry's lock: a schedule's gap takes some slot
    // searches. `random_delay` may push a run that much later.
    let gap = timer
        .longest_gap(clock.now())
        .map(|gap| gap.saturating_add(random_delay));
    {
        // Under the lock, as a reload removes a job's series: a job removed meanwhile
        // does not get its gap back.
        let mut registry = engine.lock();
        if registry.get(kind, &id).is_none() {
            return;
        }
        crate::metrics::job_interval(kind.as_str(), &id, gap);
    }
    // In cluster mode each slot is offered by its owner (another node when the owner
    // stops beating) and the first to claim it runs it, so all nodes must compute the
    // same slots (see `Timer::first_due_on_grid`).
    let cluster = engine.cluster().is_some();
    // `catch_up = once`: a slot missed while the service was down runs once, now.
    if let Some(window) = catch_up
        && !paused
    {
        engine.catch_up(kind, &id, &timer, last_run, window);
    }
    let mut due = if cluster {
        timer.first_due_on_grid(clock.now())
    } else {
        timer.first_due(clock.now(), last_run)
    };
    loop {
        // `random_delay`: this slot starts up to that much later; the next slot is
        // still counted from `due`, so the delays do not add up.
        let fire = due.checked_add_signed(jitter(random_delay)).unwrap_or(due);
        if !set_next_run(&engine, kind, &id, fire) {
            return;
        }
        if cluster {
            // No runner ahead: the node that claims the slot may not be this one.
            clock.sleep_until(fire).await;
            engine.offer_slot(
                kind,
                &id,
                due,
                super::Trigger::new(super::TriggerSource::Timer),
            );
            crate::metrics::timer_fired((clock.now() - fire).to_std().unwrap_or_default());
            due = offer_slots_slept_through(&engine, kind, &id, &timer, due);
            due = timer.next_due(due, clock.now());
            continue;
        }
        let mut runner = None;
        if let Ok(ahead) = chrono::Duration::from_std(LAUNCH_AHEAD)
            && fire - clock.now() > ahead
        {
            clock.sleep_until(fire - ahead).await;
            if engine.timer_would_fire(kind, &id) {
                runner = engine.launch_ahead(kind, &id).await;
                // As many as runners ahead, which free permits bound (10,000 timers due
                // together would hold 10,000 files open).
                if runner.is_some() {
                    engine.make_log_ahead(kind, &id).await;
                }
            }
        }
        clock.sleep_until(fire).await;
        if let Some(reason) = crate::util::space_reserve::runs_refused_now().await {
            tracing::warn!(job = %id, %reason, "timer slot skipped");
            due = timer.next_due(due, clock.now());
            continue;
        }
        engine.timer_fired(kind, &id, runner.map(AheadRunner::into_runner));
        crate::metrics::timer_fired((clock.now() - fire).to_std().unwrap_or_default());
        due = timer.next_due(due, clock.now());
    }
}

/// Most slots a node woken late offers beside the one it woke for.
const LATE_SLOTS_OFFERED: usize = 10;

/// In cluster mode, the slots after `due` that a node woken late slept through, offered
/// now (at most [`LATE_SLOTS_OFFERED`]): every node may have been as late (a stalled
/// machine, a node killed while the others were busy), and a slot no node offers never
/// runs. Each is claimed once as any slot; one found busy (the run of the slot before
/// is queued or running) is skipped as a tick of a busy job is. Answers the last slot
/// offered.
fn offer_slots_slept_through(
    engine: &Engine,
    kind: Kind,
    id: &str,
    timer: &Timer,
    mut due: DateTime<Utc>,
) -> DateTime<Utc> {
    let now = engine.inner.clock.now();
    for _ in 0..LATE_SLOTS_OFFERED {
        let next = timer.next_due(due, due);
        if next > now || next <= due {
            break;
        }
        engine.offer_slot(
            kind,
            id,
            next,
            super::Trigger::new(super::TriggerSource::Timer),
        );
        due = next;
    }
    due
}

/// A random delay of at most `max` (whole milliseconds); zero for zero.
fn jitter(max: Duration) -> chrono::Duration {
    let millis = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if millis == 0 {
        return chrono::Duration::zero();
    }
    let pick = rand::random_range(0..=millis);
    chrono::Duration::milliseconds(i64::try_from(pick).unwrap_or(i64::MAX))
}

fn set_next_run(engine: &Engine, kind: Kind, id: &str, due: DateTime<Utc>) -> bool {
    let mut registry = engine.lock();
    let Some(entry) = registry.get(kind, id) else {
        return false;
    };
    entry.slot.next_run = Some(due);
    drop(registry);
    engine.changed();
    true
}
