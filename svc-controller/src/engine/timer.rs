//! One timer task per job with an interval or schedule.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::ahead::AheadRunner;
use super::{Engine, Kind};
use crate::time::schedule::Timer;

/// How long before a due time the timer starts the run's runner, so that at the due
/// time only the run's own work is left: starting a runner (exec, dynamic loading,
/// connecting) costs a millisecond or more of CPU, which adds up when many jobs fall due
/// together. The runner waits, doing nothing, until the due time hands it the work.
const LAUNCH_AHEAD: Duration = Duration::from_millis(250);

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
    // In cluster mode every node offers each slot and the first to claim it runs it, so
    // all must offer the same slots (see `Timer::first_due_on_grid`).
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
            due = timer.next_due(due, clock.now());
            continue;
        }
        let mut runner = None;
        if let Ok(ahead) = chrono::Duration::from_std(LAUNCH_AHEAD)
            && fire - clock.now() > ahead
        {
            clock.sleep_until(fire - ahead).await;
            if engine.timer_would_fire(kind, &id) {
                runner = engine.launch_ahead(kind).await;
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
