//! Shutdown: timers stopped, runs ended and waited for, their ends written and
//! reported to the cluster.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Engine, Kind, events};

/// How long the shutdown waits for the ends of the last runs to reach the cluster.
const CLUSTER_REPORT_LIMIT: Duration = Duration::from_secs(10);

impl Engine {
    /// Stops timers, ends running executions (recorded as failed) and waits for them,
    /// at most `limit`.
    pub async fn shutdown(&self, limit: Duration) {
        {
            // Under the registry's lock, where a trigger is accepted: see `accept_trigger`.
            let _registry = self.lock();
            self.inner.shutting_down.store(true, Ordering::SeqCst);
        }
        // First: live watchers end their streams while the runs stop, so that the HTTP
        // server's drain does not wait for them.
        self.publish(|| events::EngineEvent::Stopping);
        {
            let mut registry = self.lock();
            for kind in [Kind::Job, Kind::Http] {
                for entry in registry.map(kind).values_mut() {
                    if let Some(handle) = entry.slot.timer.take() {
                        handle.abort();
                    }
                    // A queued trigger stays in the state file and runs after the
                    // next start.
                    if let Some(run) = &entry.slot.run {
                        run.cancel
                            .send_replace(Some("the service is shutting down".into()));
                    }
                }
            }
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.inner.run_task_ended.notified();
            if self.lock().run_tasks == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                tracing::warn!("runs still going on at the end of the shutdown limit");
                break;
            }
        }
        let engine = self.clone();
        // The ends of the last runs reach the disk before the service says it stopped.
        let flushed = tokio::task::spawn_blocking(move || engine.inner.syncer.flush());
        if tokio::time::timeout_at(deadline + Duration::from_secs(1), flushed)
            .await
            .is_err()
        {
            tracing::warn!(
                "the ends of the last runs were not all written in time: the next start \
                 repairs them from their logs"
            );
        }
        if self.cluster().is_some() {
            self.inner.cluster_stop.cancel();
            // The ends of the last runs reach the cluster before the node leaves; what
            // does not in time is reaped as interrupted once its lease lapses.
            self.inner.cluster_work.close();
            if tokio::time::timeout(CLUSTER_REPORT_LIMIT, self.inner.cluster_work.wait())
                .await
                .is_err()
            {
                tracing::warn!("the ends of some runs did not reach the cluster database");
            }
        }
    }
}
