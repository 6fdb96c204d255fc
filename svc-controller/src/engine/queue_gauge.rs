//! The `svc_run_queue_length` gauge, counted when the metrics are read.
//!
//! Counting the waiting runs walks every job. It used to be done at every trigger, run
//! start and run end, with the registry locked: with 1,000 jobs due at the same second,
//! a thousand walks of a thousand jobs while every timer waited for the lock. Now those
//! places only note that the count changed, and a read of the metrics counts, once.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Engine, Registry};

impl Registry {
    /// Notes that the number of waiting runs (queued triggers plus runs waiting for a
    /// permit) may have changed: the next read of the metrics counts them.
    pub(super) fn publish_queue_length(&self) {
        self.queue_counted.store(false, Ordering::Release);
    }

    fn waiting_runs(&self) -> usize {
        self.jobs
            .values()
            .chain(self.http.values())
            .map(|e| {
                usize::from(e.queued.is_some())
                    + usize::from(e.run.as_ref().is_some_and(|r| r.counter.is_none()))
            })
            .sum()
    }
}

impl Engine {
    /// Makes the metrics count this engine's waiting runs when they are read (and the
    /// count may have changed since the last read).
    pub(super) fn count_queue_when_read(&self) {
        let inner = Arc::downgrade(&self.inner);
        crate::metrics::set_queue_length_source(move || {
            let engine = Engine {
                inner: inner.upgrade()?,
            };
            let registry = engine.lock();
            (!registry.queue_counted.swap(true, Ordering::AcqRel)).then(|| registry.waiting_runs())
        });
    }
}
