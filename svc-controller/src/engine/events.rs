//! What happens in the engine, told as it happens to whoever watches (the UI's live
//! view, through `GET /svc/api/events`): domain events on a tokio broadcast channel.
//!
//! Publishing never waits and costs nothing while nobody watches: the event is only
//! built when there is a subscriber, and a subscriber that falls more than
//! [`CAPACITY`] events behind loses the oldest ones and learns it (`Lagged`), so that it
//! can refetch the whole picture instead of showing a silent gap. The HTTP layer turns
//! these into JSON; the engine never does.

use crate::util::lock::MutexExt as _;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use tokio::sync::broadcast;

use super::{Kind, TriggerSource};
use crate::store::state::RunStatus;

/// Events kept for a subscriber that has not read them yet; past this it lags.
pub const CAPACITY: usize = 1024;

/// One thing that happened, with the sequence number it was published under (1, 2, ...
/// in order of publication, for the whole life of the engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub seq: u64,
    pub event: EngineEvent,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    /// A run got its counter and its log exists.
    RunStarted {
        kind: Kind,
        job_id: String,
        counter: u64,
        trigger: TriggerSource,
        attempt: u32,
        started_at: DateTime<Utc>,
    },
    /// A run's end is recorded: its log has its final name and the job its result.
    RunEnded {
        kind: Kind,
        job_id: String,
        counter: u64,
        status: RunStatus,
        started_at: DateTime<Utc>,
        ended_at: DateTime<Utc>,
        duration_ms: u64,
        exit_code: Option<i32>,
        signal: Option<i32>,
        http_status: Option<u16>,
    },
    /// A trigger was accepted while the job was busy, and saved: it waits in the queue.
    Queued {
        kind: Kind,
        job_id: String,
        trigger: TriggerSource,
    },
    Paused {
        kind: Kind,
        job_id: String,
    },
    Resumed {
        kind: Kind,
        job_id: String,
    },
    /// The job definitions were reloaded: jobs may have come, gone or changed.
    Reloaded,
    /// The service is stopping: no event follows.
    Stopping,
}

/// The broadcast side, kept by the engine.
#[derive(Debug)]
pub(super) struct EventBus {
    /// The last sequence number used, under the lock that also orders the sends, so that
    /// subscribers see sequence numbers in increasing order.
    seq: Mutex<u64>,
    sender: broadcast::Sender<Published>,
}

impl Default for EventBus {
    fn default() -> EventBus {
        EventBus {
            seq: Mutex::new(0),
            sender: broadcast::Sender::new(CAPACITY),
        }
    }
}

impl EventBus {
    /// Publishes the event `make` builds, only when someone listens: most services have
    /// no browser open, and their runs should not pay for the allocation.
    pub(super) fn publish(&self, make: impl FnOnce() -> EngineEvent) {
        if self.sender.receiver_count() == 0 {
            return;
        }
        let event = make();
        let mut seq = self.seq.locked();
        *seq += 1;
        // An error only says that the last subscriber left meanwhile.
        let _ = self.sender.send(Published { seq: *seq, event });
    }

    /// A new subscriber, and the sequence number of the last event published before it:
    /// every later one reaches it (unless it lags).
    pub(super) fn subscribe(&self) -> (broadcast::Receiver<Published>, u64) {
        // Under the lock: no send is between the subscription and the number read.
        let seq = self.seq.locked();
        (self.sender.subscribe(), *seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_built_without_a_subscriber() {
        let bus = EventBus::default();
        bus.publish(|| panic!("built with nobody listening"));
        let (mut rx, last) = bus.subscribe();
        assert_eq!(last, 0);
        bus.publish(|| EngineEvent::Reloaded);
        bus.publish(|| EngineEvent::Stopping);
        let first = rx.try_recv().expect("first event");
        let second = rx.try_recv().expect("second event");
        assert_eq!((first.seq, first.event), (1, EngineEvent::Reloaded));
        assert_eq!((second.seq, second.event), (2, EngineEvent::Stopping));
        let (_late, last) = bus.subscribe();
        assert_eq!(last, 2);
    }

    #[test]
    fn a_subscriber_that_falls_behind_is_told() {
        let bus = EventBus::default();
        let (mut rx, _) = bus.subscribe();
        for _ in 0..CAPACITY + 3 {
            bus.publish(|| EngineEvent::Reloaded);
        }
        assert_eq!(
            rx.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(3))
        );
        assert_eq!(rx.try_recv().map(|p| p.seq), Ok(4));
    }
}
