//! The queue and running gauges (`svc_run_queue_length`, `svc_runs_running`,
//! `svc_job_queued`, `svc_job_running`, and `svc_job_paused` with them), counted when
//! the metrics are read.
//!
//! Counting the waiting runs walks every job. It used to be done at every trigger, run
//! start and run end, with the registry locked: with 1,000 jobs due at the same second,
//! a thousand walks of a thousand jobs while every timer waited for the lock. Now those
//! places only note that the count changed, and a read of the metrics counts, once.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Engine, Kind, Registry};

impl Registry {
    /// Notes that the number of waiting runs (queued triggers plus runs waiting for a
    /// permit) may have changed: the next read of the metrics counts them.
    pub(super) fn publish_queue_length(&self) {
        self.queue_counted.store(false, Ordering::Release);
    }

    /// Counts the waiting runs and the running ones, per job (both kinds) and in total
    /// (runs of either kind waiting; Job runs running, each holding a permit).
    fn queue_snapshot(&self) -> crate::metrics::QueueSnapshot {
        let mut snapshot = crate::metrics::QueueSnapshot {
            jobs: Vec::with_capacity(self.jobs.len() + self.http.len()),
            ..Default::default()
        };
        for (kind, map) in [(Kind::Job, &self.jobs), (Kind::Http, &self.http)] {
            for (id, entry) in map {
                let queued = entry.slot.queued.is_some();
                // A run without its counter yet waits for a permit (unless it has ended
                // and only hands over); with it, it runs.
                let waiting = entry
                    .slot
                    .run
                    .as_ref()
                    .is_some_and(|r| r.counter.is_none() && !r.ended);
                let running = entry.slot.run.as_ref().is_some_and(|r| r.counter.is_some());
                snapshot.waiting += usize::from(queued) + usize::from(waiting);
                // Only a Job's run holds a `max_job_running` permit (a JobHttp call
                // takes none): the total is compared with that setting, to tell that
                // runs wait because every permit is taken.
                if kind == Kind::Job {
                    snapshot.running += usize::from(running);
                }
                // A removed job still running counts in the totals, not by itself.
                if !entry.retired {
                    snapshot.jobs.push(crate::metrics::JobQueueState {
                        kind: kind.as_str(),
                        job_id: id.clone(),
                        queued,
                        running,
                        paused: entry.state.paused,
                    });
                }
            }
        }
        snapshot
    }
}

impl Engine {
    /// Makes the metrics count this engine's waiting and running runs when they are read
    /// (and the counts may have changed since the last read).
    pub(super) fn count_queue_when_read(&self) {
        crate::metrics::set_max_job_running(self.inner.main.max_job_running.max(1));
        let inner = Arc::downgrade(&self.inner);
        crate::metrics::set_queue_source(move || {
            let engine = Engine {
                inner: inner.upgrade()?,
            };
            let registry = engine.lock();
            (!registry.queue_counted.swap(true, Ordering::AcqRel))
                .then(|| registry.queue_snapshot())
        });
    }
}
