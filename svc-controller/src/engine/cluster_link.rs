//! The engine's link to the cluster in cluster mode: the shared store and this node's
//! name, and how a trigger travels through the shared queue. Absent in single-node mode,
//! where every path of the engine stays as it is.

use crate::util::lock::MutexExt as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Kind, Trigger, TriggerSource};
use crate::cluster::{ClaimedRun, ClusterStore, JobKey, JobKind, NewTrigger};
use crate::store::delivery::DeliveryFacts;
use crate::store::logstore::LogDir;

/// What the engine needs of the cluster: the store every trigger, claim and run's end
/// goes through, and the name this node registered under (the `node` of its claims and
/// leases).
#[derive(Debug, Clone)]
pub struct ClusterLink {
    pub store: ClusterStore,
    pub node: String,
    /// How far the logs of this node's running runs are copied to the shared table.
    pub copied: CopiedLogs,
    /// Timer slots on their way to the cluster, and the live nodes as last read.
    pub slots: super::cluster_slots::SlotDesk,
}

impl ClusterLink {
    pub fn new(store: ClusterStore, node: String) -> ClusterLink {
        ClusterLink {
            store,
            node,
            copied: Default::default(),
            slots: Default::default(),
        }
    }
}

/// The logs of the runs this node claimed and has not reported ended, by run ID: where
/// each is and how far it has been copied (bytes). The copier goes through these (not
/// through every job of the registry), and the final copy at a run's end starts where
/// the copier stopped.
#[derive(Debug, Default, Clone)]
pub struct CopiedLogs(Arc<Mutex<HashMap<i64, LogCopyState>>>);

/// One claimed run's log, as [`CopiedLogs`] follows it.
#[derive(Debug, Clone)]
pub struct LogCopyState {
    pub dir: LogDir,
    pub counter: u64,
    pub copied: u64,
}

impl CopiedLogs {
    /// Follows the log of run `run_id` (this node's run `counter` in `dir`) from now on.
    pub(super) fn track(&self, run_id: i64, dir: LogDir, counter: u64) {
        let state = LogCopyState {
            dir,
            counter,
            copied: 0,
        };
        self.lock().insert(run_id, state);
    }

    /// The runs followed now, with their state.
    pub(super) fn tracked(&self) -> Vec<(i64, LogCopyState)> {
        self.lock()
            .iter()
            .map(|(run_id, state)| (*run_id, state.clone()))
            .collect()
    }

    /// How far run `run_id`'s log is copied (0 when it is not followed).
    pub(super) fn get(&self, run_id: i64) -> u64 {
        self.lock().get(&run_id).map_or(0, |state| state.copied)
    }

    /// Notes that run `run_id`'s log is copied up to `copied`, if it is still followed.
    pub(super) fn set(&self, run_id: i64, copied: u64) {
        if let Some(state) = self.lock().get_mut(&run_id) {
            state.copied = state.copied.max(copied);
        }
    }

    /// Stops following run `run_id` (its end is reported, or it went back to the queue).
    pub(super) fn forget(&self, run_id: i64) {
        self.lock().remove(&run_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, LogCopyState>> {
        self.0.locked()
    }
}

/// The store's name of a job of the engine.
pub(super) fn job_key(kind: Kind, id: &str) -> JobKey {
    let kind = match kind {
        Kind::Job => JobKind::Job,
        Kind::Http => JobKind::Http,
    };
    JobKey::new(kind, id)
}

/// A queued run's payload in `svc_runs.trigger`: what the node that claims the run needs
/// to start it, the same content as a state file's queued trigger plus the cause. The
/// body travels with it because any node may claim the run; base64, because `jsonb`
/// holds text only. Field names are short and fixed: other releases of the cluster's
/// nodes read them.
#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delivery: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    git_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cause: Option<String>,
}

/// Why a claimed run's payload cannot be turned back into a trigger. The run cannot be
/// started; the caller records it as failed rather than leaving it claimed.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("the run's trigger is not a payload this release reads: {0}")]
    Shape(#[source] serde_json::Error),
    /// Written by a newer release, which knows a source this one does not.
    #[error("the run's trigger source {0:?} is unknown to this release")]
    UnknownSource(String),
    #[error("the run's trigger body is not base64: {0}")]
    Body(#[source] base64::DecodeError),
}

/// `trigger` as the shared queue keeps it, accepted by `node`.
pub fn new_trigger(trigger: &Trigger, node: &str) -> NewTrigger {
    let facts = &trigger.facts;
    let payload = Payload {
        source: trigger.source.as_str().to_string(),
        event: facts.event.clone(),
        delivery: facts.id.clone(),
        git_ref: facts.git_ref.clone(),
        commit: facts.commit.clone(),
        body: trigger.body.as_ref().map(|body| STANDARD.encode(body)),
        cause: trigger.cause.clone(),
    };
    NewTrigger {
        accepted_by: node.to_string(),
        // Attempts are small (the `retry` count plus one); saturate rather than wrap.
        attempt: i32::try_from(trigger.attempt).unwrap_or(i32::MAX),
        // A struct of strings always serialises; `Null` would only make the claim fail
        // to decode, never start a wrong run.
        payload: serde_json::to_value(&payload).unwrap_or(serde_json::Value::Null),
    }
}

/// What a queued run's payload says of how it was started, for the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerSummary {
    /// `timer`, `webhook`, ...; `unknown` when the payload cannot be read.
    pub source: String,
    pub delivery: Option<String>,
    pub cause: Option<String>,
}

/// The history's view of a payload (whatever release wrote it: nothing is refused here).
pub fn trigger_summary(payload: &serde_json::Value) -> TriggerSummary {
    // An object only: serde would read an array as the fields in order.
    let read = payload
        .is_object()
        .then(|| Payload::deserialize(payload).ok())
        .flatten();
    match read {
        Some(payload) => TriggerSummary {
            source: payload.source,
            delivery: payload.delivery,
            cause: payload.cause,
        },
        None => TriggerSummary {
            source: "unknown".into(),
            delivery: None,
            cause: None,
        },
    }
}

/// The trigger of a claimed run, as [`new_trigger`] queued it.
pub fn trigger_of(run: &ClaimedRun) -> Result<Trigger, PayloadError> {
    let payload: Payload =
        serde_json::from_value(run.payload.clone()).map_err(PayloadError::Shape)?;
    let source = TriggerSource::parse(&payload.source)
        .ok_or_else(|| PayloadError::UnknownSource(payload.source.clone()))?;
    let body = match payload.body {
        Some(text) => Some(Bytes::from(
            STANDARD.decode(text).map_err(PayloadError::Body)?,
        )),
        None => None,
    };
    Ok(Trigger {
        source,
        body,
        facts: DeliveryFacts {
            event: payload.event,
            id: payload.delivery,
            git_ref: payload.git_ref,
            commit: payload.commit,
        },
        cause: payload.cause,
        attempt: u32::try_from(run.attempt).unwrap_or(1).max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{JobKey, JobKind};

    fn claimed(new: &NewTrigger) -> ClaimedRun {
        let now = chrono::Utc::now();
        ClaimedRun {
            run_id: 7,
            job: JobKey::new(JobKind::Job, "build"),
            counter: 3,
            attempt: new.attempt,
            payload: new.payload.clone(),
            accepted_by: new.accepted_by.clone(),
            accepted_at: now,
            started_at: now,
            lease_until: now,
        }
    }

    #[test]
    fn a_trigger_comes_back_from_the_queue_as_it_went_in() {
        let mut trigger = Trigger::new(TriggerSource::Webhook);
        // Not UTF-8, with a NUL: the body is bytes, not text.
        trigger.body = Some(Bytes::from_static(b"\x00\xff{\"a\":1}\n"));
        trigger.facts = DeliveryFacts {
            event: Some("push".into()),
            id: Some("d-1".into()),
            git_ref: Some("refs/heads/main".into()),
            commit: Some("abc123".into()),
        };
        trigger.cause = Some("run 4 of job build, failed".into());
        trigger.attempt = 2;
        let new = new_trigger(&trigger, "node-a");
        assert_eq!(new.accepted_by, "node-a");
        assert_eq!(new.attempt, 2);
        let back = trigger_of(&claimed(&new)).expect("decode");
        assert_eq!(back.source, TriggerSource::Webhook);
        assert_eq!(back.body, trigger.body);
        assert_eq!(back.facts, trigger.facts);
        assert_eq!(back.cause, trigger.cause);
        assert_eq!(back.attempt, 2);
    }

    #[test]
    fn a_bare_trigger_queues_only_its_source() {
        let new = new_trigger(&Trigger::new(TriggerSource::Timer), "node-a");
        assert_eq!(new.payload, serde_json::json!({ "source": "timer" }));
        let back = trigger_of(&claimed(&new)).expect("decode");
        assert_eq!(back.source, TriggerSource::Timer);
        assert!(back.body.is_none() && back.cause.is_none());
        assert_eq!(back.facts, DeliveryFacts::default());
    }

    #[test]
    fn payloads_this_release_cannot_start_are_refused() {
        let mut new = new_trigger(&Trigger::new(TriggerSource::Api), "node-a");
        new.payload = serde_json::json!({ "source": "from-the-future" });
        assert!(matches!(
            trigger_of(&claimed(&new)),
            Err(PayloadError::UnknownSource(source)) if source == "from-the-future"
        ));
        new.payload = serde_json::json!({ "source": "webhook", "body": "not base64!" });
        assert!(matches!(
            trigger_of(&claimed(&new)),
            Err(PayloadError::Body(_))
        ));
        // No source: nothing says how the run was started.
        new.payload = serde_json::json!({ "body": "aGk=" });
        assert!(matches!(
            trigger_of(&claimed(&new)),
            Err(PayloadError::Shape(_))
        ));
        // Fields a newer release adds are ignored: the run still starts here.
        new.payload = serde_json::json!({ "source": "manual", "priority": 3 });
        assert!(trigger_of(&claimed(&new)).is_ok());
    }

    #[test]
    fn the_copied_table_follows_only_tracked_runs_and_never_goes_back() {
        let copied = CopiedLogs::default();
        let dir = LogDir::new(std::path::PathBuf::from("/nowhere"), "j");
        copied.track(1, dir.clone(), 4);
        copied.track(2, dir, 5);
        copied.set(1, 10);
        copied.set(1, 7);
        copied.set(3, 30);
        assert_eq!(copied.get(1), 10, "never back");
        assert_eq!(copied.get(3), 0, "an untracked run is not added");
        copied.forget(1);
        assert_eq!(copied.get(1), 0);
        let tracked: Vec<(i64, u64)> = copied
            .tracked()
            .into_iter()
            .map(|(run_id, state)| (run_id, state.counter))
            .collect();
        assert_eq!(tracked, vec![(2, 5)]);
    }

    #[test]
    fn the_history_reads_source_delivery_and_cause_of_any_payload() {
        let mut trigger = Trigger::new(TriggerSource::Webhook);
        trigger.facts.id = Some("d-9".into());
        trigger.cause = Some("slot 2026-11-28 04:00:00 UTC".into());
        let summary = trigger_summary(&new_trigger(&trigger, "a").payload);
        assert_eq!(summary.source, "webhook");
        assert_eq!(summary.delivery.as_deref(), Some("d-9"));
        assert_eq!(
            summary.cause.as_deref(),
            Some("slot 2026-11-28 04:00:00 UTC")
        );
        for unreadable in [
            serde_json::json!(["webhook", "push"]),
            serde_json::json!({ "body": "aGk=" }),
            serde_json::Value::Null,
        ] {
            assert_eq!(
                trigger_summary(&unreadable).source,
                "unknown",
                "{unreadable}"
            );
        }
    }
}
