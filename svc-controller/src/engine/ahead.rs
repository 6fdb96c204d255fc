//! Runners that timers start ahead of their due times (never more than can run), and
//! the runner a run takes when it begins, told its job's private directories; the
//! file of a timer's next log, made ahead too.
//!
//! A timer starts its run's runner a little before the due time (see `timer.rs`), so
//! that at the due time only the run's own work is left. With many jobs due together
//! that alone would start a process per job at the same instant (1,000 jobs on the same
//! interval: 1,000 runners), though only `max_job_running` runs go on at a time; the
//! others would wait for a permit and end unused once stale, after taking the CPU from
//! everything else. So timers start at most as many runners ahead as there are free
//! permits; the other runs get their runner when they begin, as a trigger's run does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::Engine;
use super::executor::{Runner, SpareStart};

/// How many runners timers have started ahead and not yet handed to their runs.
#[derive(Debug, Default)]
pub(super) struct AheadBudget {
    out: Arc<AtomicUsize>,
}

/// One runner started ahead, counted until this is dropped: when its timer has handed
/// the runner to its run, or given up.
#[derive(Debug)]
pub(super) struct AheadTicket {
    out: Arc<AtomicUsize>,
}

impl AheadBudget {
    /// A ticket for one more runner started ahead, unless `free` (the free permits of
    /// `max_job_running`) are out already.
    fn reserve(&self, free: usize) -> Option<AheadTicket> {
        self.out
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |out| {
                (out < free).then_some(out + 1)
            })
            .ok()?;
        Some(AheadTicket {
            out: self.out.clone(),
        })
    }
}

impl Drop for AheadTicket {
    fn drop(&mut self) {
        self.out.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A runner a timer started ahead, with its place in the budget. The runner is boxed
/// (as the executor hands it out): every timer's task holds room for one while it
/// sleeps, and with 10,000 timers the room for the runner itself (its process handle,
/// its socket's token) would add megabytes.
#[derive(Debug)]
pub(super) struct AheadRunner {
    runner: Box<dyn Runner>,
    _counted: AheadTicket,
}

impl AheadRunner {
    /// The runner, handed to its run; its place in the budget is given back.
    pub(super) fn into_runner(self) -> Box<dyn Runner> {
        self.runner
    }
}

impl Engine {
    /// The private directories a run of job `id` will have (`None` for a JobHttp or a
    /// job gone), so that a runner started ahead makes the run's namespaces while it
    /// waits; the run's request says them again, and the runner makes new ones if a
    /// reload changed them meanwhile.
    fn run_private_dirs(&self, kind: super::Kind, id: &str) -> Option<Vec<proto::PrivateDir>> {
        let def = self.lock().get(kind, id).map(|entry| entry.def.clone())?;
        match def {
            super::entry::Def::Job(job) => Some(super::request::private_dirs(self.main(), &job)),
            super::entry::Def::Http(_) => None,
        }
    }

    /// A runner for a run of job `id` that begins now, told the run's private
    /// directories (see [`Executor::take`](super::executor::Executor::take)).
    pub(super) async fn take_runner(
        &self,
        kind: super::Kind,
        id: &str,
        spare_start: SpareStart,
    ) -> Box<dyn Runner> {
        let private_dirs = self.run_private_dirs(kind, id);
        self.inner
            .executor
            .take(kind.runner_work(), private_dirs, spare_start)
            .await
    }

    /// Makes the file of job `id`'s next log ahead of its due time, unless it has one
    /// ([`crate::store::logstore::LogDir::make_ahead`]): with many jobs due together,
    /// the file system's inode allocations are then out of the way of their starts.
    pub(super) async fn make_log_ahead(&self, kind: super::Kind, id: &str) {
        let log_dir = {
            let mut registry = self.lock();
            match registry.get(kind, id) {
                Some(entry) if entry.slot.log_ahead.is_none() => entry.log_dir.clone(),
                _ => return,
            }
        };
        let made = tokio::task::spawn_blocking(move || log_dir.make_ahead()).await;
        if let Ok(Some(made)) = made
            && let Some(entry) = self.lock().get(kind, id)
        {
            entry.slot.log_ahead.get_or_insert(made);
        }
    }

    /// Starts a runner for a timer's next run, when fewer runners started ahead are out
    /// than permits are free; `None` otherwise (the run then starts its runner when it
    /// begins).
    pub(super) async fn launch_ahead(&self, kind: super::Kind, id: &str) -> Option<AheadRunner> {
        let free = self.inner.job_slots.available_permits();
        let ticket = self.inner.ahead.reserve(free)?;
        let private_dirs = self.run_private_dirs(kind, id);
        let runner = self
            .inner
            .executor
            .launch(kind.runner_work(), private_dirs)
            .await;
        Some(AheadRunner {
            runner,
            _counted: ticket,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_more_tickets_than_free_permits() {
        let budget = AheadBudget::default();
        assert!(
            budget.reserve(0).is_none(),
            "no free permit, no runner ahead"
        );
        let first = budget.reserve(2).expect("one of two");
        let second = budget.reserve(2).expect("two of two");
        assert!(
            budget.reserve(2).is_none(),
            "a third would wait for a permit"
        );
        // Fewer free permits now (runs took them): still none.
        assert!(budget.reserve(1).is_none());
        drop(first);
        let third = budget
            .reserve(2)
            .expect("a ticket given back is free again");
        drop((second, third));
        assert_eq!(budget.out.load(Ordering::Acquire), 0);
    }
}
