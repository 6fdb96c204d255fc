//! A cluster node's timer slots and wake-ups, at a cost per slot and per trigger rather
//! than per node: each slot is offered on time by its owner alone (`cluster/ownership.rs`:
//! rendezvous hashing of the job over the live nodes that define the jobs alike), the
//! slots due together in one transaction; the other nodes keep the slot aside and offer
//! it only when its owner stopped beating (suspected dead) or defines the jobs otherwise
//! now, so that a killed owner's slots still run, once (the slot's key). A trigger wakes
//! this node's own claimer when it has a free permit, else one other node that defines
//! the job alike, never all of them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::cluster_link::{ClusterLink, job_key, new_trigger};
use super::{Engine, Kind, Trigger};
use crate::cluster::{NodeView, SlotClaim, SlotOffer, Takeover};
use crate::util::lock::MutexExt as _;

/// How often a node reads the live nodes (their heartbeats): the owners of slots and the
/// takeovers of a dead owner's slots go by the latest read.
const VIEW_EVERY: Duration = Duration::from_secs(2);
/// Most slots offered in one transaction.
const BATCH: usize = 2_000;
/// A slot kept aside longer than this (its owner neither beat after it nor was
/// suspected: a view that could not be read) is offered anyway.
const KEPT_AT_MOST: chrono::TimeDelta = chrono::TimeDelta::seconds(60);
/// A batch of offers the database refused for an outage is tried again this often, for
/// at most [`RETRIES`] times (the slots are then late, not lost).
const RETRY_EVERY: Duration = Duration::from_secs(1);
const RETRIES: usize = 10;

/// What the timers hand to the node's slot offerer, and the latest view of the live
/// nodes, shared by the offerer (which reads it) and the triggers (which wake by it).
#[derive(Debug, Clone)]
pub struct SlotDesk {
    send: mpsc::UnboundedSender<SlotOffer>,
    take: Arc<Mutex<Option<mpsc::UnboundedReceiver<SlotOffer>>>>,
    view: Arc<Mutex<Option<NodeView>>>,
}

impl Default for SlotDesk {
    fn default() -> SlotDesk {
        let (send, take) = mpsc::unbounded_channel();
        SlotDesk {
            send,
            take: Arc::new(Mutex::new(Some(take))),
            view: Arc::default(),
        }
    }
}

impl SlotDesk {
    fn view(&self) -> Option<NodeView> {
        self.view.locked().clone()
    }
}

/// A slot another node owns, kept until that node is known to have offered it.
#[derive(Debug)]
struct Aside {
    offer: SlotOffer,
    owner: String,
}

impl Engine {
    /// Hands timer slot `slot` (the due time the schedule gives, the same on every node)
    /// to this node's slot offerer, off the timer's path.
    pub(super) fn offer_slot(
        &self,
        kind: Kind,
        id: &str,
        slot: DateTime<Utc>,
        mut trigger: Trigger,
    ) {
        let Some(link) = self.cluster() else {
            return;
        };
        // The run's log and the shared table say which slot it ran.
        if trigger.cause.is_none() {
            trigger.cause = Some(format!("slot {}", crate::time::timezone::utc_text(slot)));
        }
        if self.is_shutting_down() {
            return;
        }
        let offer = SlotOffer {
            job: job_key(kind, id),
            slot,
            trigger: new_trigger(&trigger, &link.node),
        };
        // Fails only once the offerer ended (shutdown).
        let _ = link.slots.send.send(offer);
    }

    /// The node to wake for a trigger just queued here: none when this node has a free
    /// permit (it claims the run itself), else one other live node that defines the jobs
    /// alike, picked at random so that busy nodes share the load; none without a view.
    pub(super) fn wake_target(&self, link: &ClusterLink) -> Option<String> {
        let free = self.inner.job_slots.available_permits();
        let waiting = self
            .inner
            .permit_waiters
            .load(std::sync::atomic::Ordering::SeqCst);
        if free > waiting {
            return None;
        }
        let view = link.slots.view()?;
        let others: Vec<&str> = view.peers(&link.node).filter(|n| *n != link.node).collect();
        if others.is_empty() {
            return None;
        }
        Some(others[rand::random_range(0..others.len())].to_string())
    }

    /// The node's slot offerer: reads the live nodes every [`VIEW_EVERY`], offers the
    /// slots it owns as the timers hand them (all that came together in one batch), keeps
    /// the others' aside and offers those whose owner did not.
    pub(super) async fn slot_offerer(self, link: ClusterLink) {
        let Some(mut offers) = link.slots.take.locked().take() else {
            return;
        };
        let stop = self.inner.cluster_stop.clone();
        let mut aside: Vec<Aside> = Vec::new();
        // The first view before any offer: a node does not offer every slot while it
        // does not know the others yet (a view that cannot be read leaves it offering
        // all, as a node alone does).
        self.read_view(&link).await;
        let mut tick = tokio::time::interval(VIEW_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                first = offers.recv() => {
                    let Some(first) = first else { return };
                    let mut batch = vec![first];
                    while batch.len() < BATCH {
                        match offers.try_recv() {
                            Ok(offer) => batch.push(offer),
                            Err(_) => break,
                        }
                    }
                    let view = link.slots.view();
                    let mine = self.sort_offers(&link, view.as_ref(), batch, &mut aside);
                    self.claim_batch(&link, mine).await;
                }
                _ = tick.tick() => {
                    self.read_view(&link).await;
                    let Some(view) = link.slots.view() else { continue };
                    let due = take_over(&view, &link.node, &mut aside, Utc::now());
                    for chunk in due.chunks(BATCH) {
                        self.claim_batch(&link, chunk.to_vec()).await;
                    }
                }
                _ = stop.cancelled() => return,
            }
        }
    }

    async fn read_view(&self, link: &ClusterLink) {
        match link.store.live_nodes().await {
            Ok(view) => *link.slots.view.locked() = Some(view),
            Err(err) => {
                tracing::debug!(error = %err, "cannot read the live nodes; the last view holds")
            }
        }
    }

    /// The offers of `batch` this node owns (all of them without a view); the others go
    /// aside.
    fn sort_offers(
        &self,
        link: &ClusterLink,
        view: Option<&NodeView>,
        batch: Vec<SlotOffer>,
        aside: &mut Vec<Aside>,
    ) -> Vec<SlotOffer> {
        let Some(view) = view else {
            return batch;
        };
        let mut mine = Vec::with_capacity(batch.len());
        for offer in batch {
            let owner = view.owner(&offer.job, &link.node);
            if owner == link.node {
                mine.push(offer);
            } else {
                let owner = owner.to_string();
                aside.push(Aside { offer, owner });
            }
        }
        mine
    }

    /// Offers `batch` in one transaction (retried a few times through an outage), and
    /// acts on what each offer became.
    async fn claim_batch(&self, link: &ClusterLink, batch: Vec<SlotOffer>) {
        if batch.is_empty() {
            return;
        }
        let mut tries = 0;
        let claims = loop {
            match link.store.claim_slots(&batch).await {
                Ok(claims) => break claims,
                Err(err) if err.is_unavailable() && tries < RETRIES && !self.is_shutting_down() => {
                    tries += 1;
                    tokio::time::sleep(RETRY_EVERY).await;
                }
                Err(err) => {
                    tracing::warn!(slots = batch.len(), error = %err,
                        "timer slots were not offered to the cluster: they do not run");
                    return;
                }
            }
        };
        crate::metrics::cluster_slot_offers(batch.len());
        let mut queued = false;
        for (offer, claim) in batch.iter().zip(claims) {
            match claim {
                SlotClaim::Enqueued { run_id } => {
                    tracing::debug!(job = %offer.job.id, run_id, slot = %offer.slot, "timer slot claimed");
                    queued = true;
                }
                SlotClaim::Taken => {
                    tracing::debug!(job = %offer.job.id, slot = %offer.slot, "timer slot taken by another node");
                }
                SlotClaim::SkippedBusy => crate::metrics::timer_tick_skipped("running"),
                SlotClaim::SkippedPaused => crate::metrics::timer_tick_skipped("paused"),
            }
        }
        if queued {
            self.inner.claim_wake.notify_one();
        }
    }
}

/// The slots kept aside that are to be offered now by the latest `view` (their owner
/// gone, suspected dead, defining the jobs otherwise, or kept too long); those whose
/// owner beat after them are dropped, the others kept.
fn take_over(
    view: &NodeView,
    me: &str,
    aside: &mut Vec<Aside>,
    now: DateTime<Utc>,
) -> Vec<SlotOffer> {
    let mut due = Vec::new();
    aside.retain(|kept| {
        let decision = if now - kept.offer.slot > KEPT_AT_MOST {
            Takeover::Offer
        } else {
            view.takeover(me, &kept.owner, kept.offer.slot)
        };
        match decision {
            Takeover::Drop => false,
            Takeover::Offer => {
                due.push(kept.offer.clone());
                false
            }
            Takeover::Wait => true,
        }
    });
    if !due.is_empty() {
        tracing::info!(
            slots = due.len(),
            "offering the timer slots of nodes that stopped beating"
        );
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{JobKind, LiveNode, NewTrigger, SUSPECT_AFTER};

    fn offer(id: &str, slot: DateTime<Utc>) -> SlotOffer {
        SlotOffer {
            job: crate::cluster::JobKey::new(JobKind::Job, id),
            slot,
            trigger: NewTrigger {
                accepted_by: "a".into(),
                attempt: 1,
                payload: serde_json::Value::Null,
            },
        }
    }

    fn node(name: &str, age_secs: f64, now: DateTime<Utc>) -> LiveNode {
        LiveNode {
            name: name.into(),
            defs_digest: "d".into(),
            heartbeat_at: now - chrono::TimeDelta::milliseconds((age_secs * 1000.0) as i64),
            age_secs,
        }
    }

    #[test]
    fn a_dead_owners_slots_are_offered_and_a_live_owners_dropped_once_it_beat() {
        let now = Utc::now();
        let slot = now - chrono::TimeDelta::seconds(3);
        let mut aside = vec![
            Aside {
                offer: offer("of-b", slot),
                owner: "b".into(),
            },
            Aside {
                offer: offer("of-c", slot),
                owner: "c".into(),
            },
            Aside {
                offer: offer("of-b-late", now),
                owner: "b".into(),
            },
        ];
        let view = NodeView {
            nodes: vec![
                node("a", 0.1, now),
                node("b", 0.5, now),
                node("c", SUSPECT_AFTER + 1.0, now),
            ],
        };
        let due = take_over(&view, "a", &mut aside, now);
        assert_eq!(
            due.iter().map(|o| o.job.id.as_str()).collect::<Vec<_>>(),
            ["of-c"]
        );
        // b beat after the first slot (dropped), not yet after the last (kept).
        assert_eq!(aside.len(), 1);
        assert_eq!(aside[0].offer.job.id, "of-b-late");
        // Kept too long: offered whatever the view says.
        let later = now + KEPT_AT_MOST + chrono::TimeDelta::seconds(1);
        assert_eq!(take_over(&view, "a", &mut aside, later).len(), 1);
        assert!(aside.is_empty());
    }
}
