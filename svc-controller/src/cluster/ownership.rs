//! Which node offers a timer slot on time: the owner of each job, chosen by rendezvous
//! hashing of the job over the live nodes that define the jobs alike, and what a node
//! knows of the others ([`NodeView`], read from their heartbeats) to decide it and to
//! take over the slots of an owner that stopped beating.
//!
//! Rendezvous (highest random weight) hashing: each node scores each job with a hash of
//! both and the job's owner is the node with the highest score. It needs no shared state
//! beyond the list of nodes, every node computes the same owner from the same list, the
//! jobs spread evenly, and a node that leaves moves only its own jobs (each to the node
//! with its second score) while every other job keeps its owner.

use chrono::{DateTime, Utc};

use super::model::JobKey;

/// A node whose heartbeat is older than this is suspected dead: its slots are offered by
/// the others. Two missed beats (every 5 s) and some slack: a node slowed by a busy
/// database is suspected late rather than a live one early (a live owner suspected
/// costs duplicate offers, never a second run: the slot's key keeps it once).
pub const SUSPECT_AFTER: f64 = 12.0;

/// One node as the others see it, from `svc_nodes`.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveNode {
    pub name: String,
    /// A digest of the node's job definitions (empty until it recorded them): nodes with
    /// the same digest define the same jobs alike, hence the same timer slots.
    pub defs_digest: String,
    /// Its last heartbeat, by the database's clock.
    pub heartbeat_at: DateTime<Utc>,
    /// Seconds since then, when the view was read.
    pub age_secs: f64,
}

/// The live nodes (heartbeat within the lease) as one read of `svc_nodes` saw them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    pub nodes: Vec<LiveNode>,
}

impl NodeView {
    /// The nodes that share `me`'s definitions (`me` included) and are not suspected
    /// dead: those that offer the same slots.
    pub fn peers<'a>(&'a self, me: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let digest = self.node(me).map(|node| node.defs_digest.as_str());
        self.nodes
            .iter()
            .filter(move |node| {
                node.name == me
                    || (Some(node.defs_digest.as_str()) == digest && node.age_secs < SUSPECT_AFTER)
            })
            .map(|node| node.name.as_str())
    }

    pub fn node(&self, name: &str) -> Option<&LiveNode> {
        self.nodes.iter().find(|node| node.name == name)
    }

    /// The node that offers `job`'s slots on time, as `me` sees the cluster: `me` when it
    /// is not in the view yet (a view read before its registration shows).
    pub fn owner<'a>(&'a self, job: &JobKey, me: &'a str) -> &'a str {
        if self.node(me).is_none() {
            return me;
        }
        owner(job, self.peers(me)).unwrap_or(me)
    }

    /// What `me` does with a slot due at `slot` that `owner` was to offer, now that this
    /// view is read: drop it when the owner beat after the slot's due time (it was alive
    /// then, so its timer offered it), offer it when the owner is gone, suspected dead or
    /// defines the jobs otherwise now, or wait for the next view.
    pub fn takeover(&self, me: &str, owner: &str, slot: DateTime<Utc>) -> Takeover {
        let digest = self.node(me).map(|node| node.defs_digest.as_str());
        match self.node(owner) {
            None => Takeover::Offer,
            Some(node) if node.age_secs >= SUSPECT_AFTER => Takeover::Offer,
            Some(node) if digest.is_some_and(|d| d != node.defs_digest) => Takeover::Offer,
            Some(node) if node.heartbeat_at >= slot + VOUCHED_AFTER => Takeover::Drop,
            Some(_) => Takeover::Wait,
        }
    }
}

/// An owner's heartbeat this long after a slot's due time shows it was alive past the
/// time its timer offered the slot.
const VOUCHED_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(1);

/// What [`NodeView::takeover`] decided for a slot another node was to offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// The owner offered it: nothing to do.
    Drop,
    /// The owner may not have: offer it now (the slot's key keeps it once).
    Offer,
    /// Not known yet: ask again at the next view.
    Wait,
}

/// `node`'s score for `job`: a 64-bit hash of both, the same on every platform and
/// release (FNV-1a, then a finaliser that spreads its bits).
pub fn score(job: &JobKey, node: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let parts = [
        job.kind.as_str().as_bytes(),
        job.id.as_bytes(),
        node.as_bytes(),
    ];
    for part in parts {
        for byte in part.iter().chain(std::iter::once(&0xff)) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // splitmix64's finaliser.
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// The owner of `job` among `nodes`: the highest score, ties to the smaller name.
pub fn owner<'a>(job: &JobKey, nodes: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    nodes
        .into_iter()
        .max_by(|a, b| score(job, a).cmp(&score(job, b)).then_with(|| b.cmp(a)))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::cluster::JobKind;

    fn jobs(count: usize) -> Vec<JobKey> {
        (0..count)
            .map(|n| JobKey::new(JobKind::Job, format!("job-{n}")))
            .collect()
    }

    fn names(count: usize) -> Vec<String> {
        (0..count).map(|n| format!("node-{n}")).collect()
    }

    #[test]
    fn the_owner_is_stable_across_releases_and_orders() {
        let job = JobKey::new(JobKind::Job, "backup");
        // A fixed value: a change of the hash would split a cluster of mixed releases.
        assert_eq!(score(&job, "node-a"), 0xe524_e711_9157_5546);
        let nodes = ["node-a", "node-b", "node-c"];
        let mut reversed = nodes;
        reversed.reverse();
        assert_eq!(owner(&job, nodes), owner(&job, reversed));
        // The kind is part of the key.
        let http = JobKey::new(JobKind::Http, "backup");
        assert_ne!(score(&job, "node-a"), score(&http, "node-a"));
    }

    #[test]
    fn jobs_spread_evenly_over_the_nodes() {
        let (jobs, nodes) = (jobs(10_000), names(10));
        let mut owned: HashMap<&str, usize> = HashMap::new();
        for job in &jobs {
            let owner = owner(job, nodes.iter().map(String::as_str)).expect("an owner");
            *owned.entry(owner).or_default() += 1;
        }
        assert_eq!(owned.len(), 10);
        for (node, count) in owned {
            // 1,000 each on average; a binomial's spread is about 30.
            assert!((850..=1150).contains(&count), "{node}: {count} of 10,000");
        }
    }

    #[test]
    fn a_node_that_leaves_moves_only_its_own_jobs() {
        let (jobs, nodes) = (jobs(2_000), names(5));
        let before: Vec<&str> = jobs
            .iter()
            .map(|job| owner(job, nodes.iter().map(String::as_str)).expect("owner"))
            .collect();
        let gone = "node-2";
        let after: Vec<&str> = jobs
            .iter()
            .map(|job| {
                owner(job, nodes.iter().map(String::as_str).filter(|n| *n != gone)).expect("owner")
            })
            .collect();
        let mut moved = 0;
        for (was, now) in before.iter().zip(&after) {
            if *was == gone {
                assert_ne!(*now, gone);
                moved += 1;
            } else {
                assert_eq!(was, now, "a job of a live node changed owner");
            }
        }
        assert!(moved > 0);
        // And back: the node returning gets its jobs again.
        let back: Vec<&str> = jobs
            .iter()
            .map(|job| owner(job, nodes.iter().map(String::as_str)).expect("owner"))
            .collect();
        assert_eq!(before, back);
    }

    fn live(name: &str, digest: &str, age_secs: f64, now: DateTime<Utc>) -> LiveNode {
        let age = chrono::TimeDelta::milliseconds((age_secs * 1000.0) as i64);
        LiveNode {
            name: name.into(),
            defs_digest: digest.into(),
            heartbeat_at: now - age,
            age_secs,
        }
    }

    #[test]
    fn a_view_leaves_out_suspects_and_nodes_that_define_jobs_otherwise() {
        let now = Utc::now();
        let view = NodeView {
            nodes: vec![
                live("a", "d1", 1.0, now),
                live("b", "d1", 4.0, now),
                live("c", "d2", 1.0, now),
                live("d", "d1", SUSPECT_AFTER + 1.0, now),
            ],
        };
        let peers: Vec<&str> = view.peers("a").collect();
        assert_eq!(peers, ["a", "b"]);
        let job = JobKey::new(JobKind::Job, "j");
        assert!(["a", "b"].contains(&view.owner(&job, "a")));
        // Not in the view yet: every slot is its own.
        assert_eq!(view.owner(&job, "new"), "new");
    }

    #[test]
    fn a_slot_of_another_owner_is_dropped_only_once_the_owner_beat_after_it() {
        let now = Utc::now();
        let view = NodeView {
            nodes: vec![
                live("a", "d", 0.5, now),
                live("b", "d", 2.0, now),
                live("c", "d2", 0.5, now),
                live("dead", "d", SUSPECT_AFTER, now),
            ],
        };
        let (early, late) = (now - chrono::TimeDelta::seconds(10), now);
        assert_eq!(view.takeover("a", "b", early), Takeover::Drop);
        assert_eq!(view.takeover("a", "b", late), Takeover::Wait);
        assert_eq!(view.takeover("a", "dead", early), Takeover::Offer);
        assert_eq!(view.takeover("a", "gone", late), Takeover::Offer);
        assert_eq!(view.takeover("a", "c", early), Takeover::Offer);
    }
}
