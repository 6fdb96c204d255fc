//! The node's heartbeat: a task that tells the cluster every few seconds that this node
//! is alive, which renews the leases of its running runs. It runs from start-up until
//! the shutdown has ended the node's runs, so their leases hold while they end.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ClusterStore;

/// How often a node beats: 6 beats per 30 s lease, so up to 5 missed beats (a database
/// briefly away, a stalled node) are survived.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// The running heartbeat task; [`Heartbeat::stop`] ends it.
#[derive(Debug)]
pub struct Heartbeat {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Heartbeat {
    /// Starts beating for node `node` every `every`, on the current runtime; the first
    /// beat is one period after the start (registration has just set the heartbeat).
    pub fn start(store: ClusterStore, node: String, every: Duration) -> Heartbeat {
        let stop = CancellationToken::new();
        let task = tokio::spawn(beat(store, node, every, stop.clone()));
        Heartbeat { stop, task }
    }

    /// Stops the task and waits until it has ended (a beat under way finishes first).
    pub async fn stop(self) {
        self.stop.cancel();
        if let Err(err) = self.task.await {
            tracing::warn!(error = %err, "the cluster heartbeat task ended abnormally");
        }
    }
}

/// After a failed beat, the next one comes this soon (or at the period, if shorter): the
/// leases run out from the last beat that got through, so the first beat after an
/// outage should not wait a whole period.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

async fn beat(store: ClusterStore, node: String, every: Duration, stop: CancellationToken) {
    // The first beat one period after the start; after a stall, one beat, not a burst.
    let mut wait = every;
    // Whether the last beat failed: an outage is logged when it starts and when it ends,
    // not every period.
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        match store.heartbeat(&node).await {
            Ok(renewed) => {
                if failing {
                    tracing::info!(node = %node, renewed, "cluster heartbeat resumed");
                    failing = false;
                }
                wait = every;
            }
            Err(err) => {
                if failing {
                    tracing::debug!(node = %node, error = %err, "cluster heartbeat failed again");
                } else {
                    // Leases last several periods: the next beats may still save them.
                    tracing::warn!(node = %node, error = %err, "cluster heartbeat failed; retrying");
                    failing = true;
                }
                wait = RETRY_AFTER_FAILURE.min(every);
            }
        }
    }
}
