//! Timer slots offered by their owners, on a real PostgreSQL: with three nodes that
//! define the same jobs, each due slot is offered once (by the owner that rendezvous
//! hashing gives it) and claimed once; a node that stops beating has only its own slots
//! move, and those are taken over, each claimed once; a batch of offers answers each
//! offer as a single claim would.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use svc_controller::cluster::{ClusterStore, JobKey, NodeView, SlotClaim, SlotOffer, Takeover};
use svc_tests::postgres::PostgresServer;

use crate::cluster_store_common::{NODES, count, define, job, nodes, trigger};

fn slot_at(minute: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + minute * 60, 0).expect("a time")
}

/// The offers node `me` makes on time for `slot` of `jobs`: those it owns by `view`.
fn owned(view: &NodeView, me: &str, jobs: &[JobKey], slot: DateTime<Utc>) -> Vec<SlotOffer> {
    jobs.iter()
        .filter(|job| view.owner(job, me) == me)
        .map(|job| SlotOffer {
            job: job.clone(),
            slot,
            trigger: trigger(me, "timer"),
        })
        .collect()
}

async fn views(stores: &[ClusterStore]) -> Vec<NodeView> {
    let mut views = Vec::new();
    for store in stores {
        views.push(store.live_nodes().await.expect("live nodes"));
    }
    views
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_due_slot_is_offered_once_and_a_silent_nodes_slots_are_taken_over_once() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("owners")).await;
    let jobs: Vec<JobKey> = (0..300).map(|n| job(&format!("t{n}"))).collect();
    let all: Vec<&JobKey> = jobs.iter().collect();
    for (store, node) in stores.iter().zip(NODES) {
        define(store, node, &all).await;
    }
    // Every node offers what it owns: one offer per slot, all claimed, each once.
    let first = slot_at(0);
    let mut owners: BTreeMap<&str, usize> = BTreeMap::new();
    let mut offers = 0;
    for ((store, node), view) in stores.iter().zip(NODES).zip(views(&stores).await) {
        let mine = owned(&view, node, &jobs, first);
        offers += mine.len();
        owners.insert(node, mine.len());
        let claims = store.claim_slots(&mine).await.expect("claim");
        assert!(claims.iter().all(|claim| claim.is_ours()), "{claims:?}");
    }
    assert_eq!(offers, jobs.len(), "one offer per due slot: {owners:?}");
    assert!(owners.values().all(|&n| n >= 60), "spread: {owners:?}");
    assert_eq!(
        count(&stores[0], "SELECT count(*) FROM svc_slots").await,
        300
    );

    // node-c stops beating: its jobs move to the others, every other job keeps its owner.
    let before = views(&stores).await;
    sqlx::query(
        "UPDATE svc_nodes SET heartbeat_at = now() - interval '20 seconds' WHERE name = $1",
    )
    .bind(NODES[2])
    .execute(stores[0].pool())
    .await
    .expect("silence node-c");
    let after = views(&stores).await;
    let mut moved = 0;
    for job in &jobs {
        let was = before[0].owner(job, NODES[0]);
        for (n, view) in after.iter().enumerate().take(2) {
            let now = view.owner(job, NODES[n]);
            assert_ne!(now, NODES[2]);
            if was != NODES[2] {
                assert_eq!(now, was, "{job:?} changed owner");
            }
        }
        moved += usize::from(was == NODES[2]);
    }
    assert_eq!(moved, owners[NODES[2]]);

    // A slot node-c was to offer, kept aside by both others: both offer it now, and each
    // is claimed once.
    let second = slot_at(1);
    let of_c: Vec<&JobKey> = jobs
        .iter()
        .filter(|job| before[0].owner(job, NODES[0]) == NODES[2])
        .collect();
    let mut won = 0;
    for (n, store) in stores.iter().enumerate().take(2) {
        assert_eq!(
            after[n].takeover(NODES[n], NODES[2], second),
            Takeover::Offer
        );
        let taken: Vec<SlotOffer> = of_c
            .iter()
            .map(|&job| SlotOffer {
                job: job.clone(),
                slot: second,
                trigger: trigger(NODES[n], "timer"),
            })
            .collect();
        let claims = store.claim_slots(&taken).await.expect("claim");
        won += claims.iter().filter(|claim| claim.is_ours()).count();
    }
    assert_eq!(won, of_c.len(), "each taken-over slot claimed once");
    for store in &stores {
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_offers_answers_each_as_one_claim_would() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("batch")).await;
    let a = &stores[0];
    let (idle, paused, twice, running) = (job("idle"), job("paused"), job("twice"), job("running"));
    define(a, NODES[0], &[&idle, &paused, &twice, &running]).await;
    a.set_paused(&paused, true).await.expect("pause");
    a.enqueue(&running, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    assert_eq!(a.claim_runs(NODES[0], 4).await.expect("claim").len(), 1);
    let offer = |job: &JobKey, slot| SlotOffer {
        job: job.clone(),
        slot,
        trigger: trigger(NODES[0], "timer"),
    };
    let batch = [
        offer(&twice, slot_at(1)),
        offer(&idle, slot_at(0)),
        offer(&paused, slot_at(0)),
        offer(&twice, slot_at(0)),
        offer(&running, slot_at(0)),
        offer(&idle, slot_at(0)),
    ];
    let claims = a.claim_slots(&batch).await.expect("claim");
    assert!(matches!(claims[0], SlotClaim::SkippedBusy), "{claims:?}");
    assert!(
        matches!(claims[1], SlotClaim::Enqueued { .. }),
        "{claims:?}"
    );
    assert_eq!(claims[2], SlotClaim::SkippedPaused);
    assert!(
        matches!(claims[3], SlotClaim::Enqueued { .. }),
        "the earlier slot of a job queues its run: {claims:?}"
    );
    assert_eq!(claims[4], SlotClaim::SkippedBusy);
    assert_eq!(claims[5], SlotClaim::Taken, "an offer given twice");
    // Offered again by another node: all taken.
    let claims = stores[1].claim_slots(&batch).await.expect("claim");
    assert!(claims.iter().all(|claim| *claim == SlotClaim::Taken));
    let causes: HashSet<String> = sqlx::query_scalar(
        "SELECT id || ' ' || to_char(accepted_at, 'YYYY') FROM svc_runs WHERE state = 'queued'",
    )
    .fetch_all(a.pool())
    .await
    .expect("queued")
    .into_iter()
    .collect();
    assert_eq!(causes.len(), 2, "idle and twice queued: {causes:?}");
    // Each won slot records what became of it, as its claim answered; the other
    // node's offers changed nothing.
    let outcomes: Vec<(String, String)> =
        sqlx::query_as("SELECT id, coalesce(outcome, 'none') FROM svc_slots ORDER BY id, slot")
            .fetch_all(a.pool())
            .await
            .expect("outcomes");
    let expected = [
        ("idle", "queued"),
        ("paused", "paused"),
        ("running", "busy"),
        ("twice", "queued"),
        ("twice", "busy"),
    ]
    .map(|(id, outcome)| (id.to_string(), outcome.to_string()));
    assert_eq!(outcomes, expected, "(id, outcome) by slot");
    for store in &stores {
        store.close().await;
    }
}
