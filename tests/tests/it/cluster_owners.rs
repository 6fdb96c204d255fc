//! Three real controllers on one PostgreSQL, each timer slot offered by its owner alone:
//! the nodes' own counts of the slots they offered (`svc_cluster_slot_offers_total`) add
//! up to about one offer per claimed slot, a trigger accepted by a node with free permits
//! wakes no other node (`svc_cluster_wakeups_total`), and after `kill -9` of the node
//! that owns a timer job the job's slots are taken over by the others: every slot of a
//! window across the kill claimed once, none run twice (`cluster_takeover.rs`' check).

use std::time::Duration;

use svc_controller::cluster::ClusterStore;
use svc_tests::{TestService, wait_for, wait_until};

use crate::cluster::{SECRET, Shared, job, launch_postgres, outputs, scalar, start_nodes, store};
use crate::cluster_takeover::every_slot_claimed_once;

/// The timer jobs, due every second.
const TICKS: [&str; 6] = ["own0", "own1", "own2", "own3", "own4", "own5"];
/// Jobs with no timer, for triggers.
const HOOKS: [&str; 5] = ["hook0", "hook1", "hook2", "hook3", "hook4"];

/// Counter `name` of `node` now (0 before the first).
async fn counter(node: &TestService, name: &str) -> f64 {
    let text = node.get("/svc/api/metrics").await.raw;
    let prefix = format!("{name} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn offers(nodes: &[TestService]) -> f64 {
    let mut total = 0.0;
    for node in nodes {
        total += counter(node, "svc_cluster_slot_offers_total").await;
    }
    total
}

async fn slots(store: &ClusterStore) -> i64 {
    scalar(store, "SELECT count(*) FROM svc_slots").await
}

/// Waits until `more` slots beyond those claimed now are claimed.
async fn more_slots(store: &ClusterStore, more: i64) {
    let from = slots(store).await;
    wait_until(
        Duration::from_secs(60),
        "more timer slots claimed",
        async || slots(store).await >= from + more,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_slot_is_offered_once_and_a_killed_owners_slots_still_run_once() {
    let (_pg, url) = launch_postgres("svc_owners").await;
    let shared = Shared::new();
    let mut defs = Vec::new();
    for tick in TICKS {
        defs.push((
            tick.to_string(),
            job(tick, &shared.path, Some("interval = 1s"), "true"),
        ));
    }
    for hook in HOOKS {
        defs.push((hook.to_string(), job(hook, &shared.path, None, "true")));
    }
    let mut nodes = start_nodes(&url, 3, &defs).await;
    let store = store(&url).await;
    // Every node has recorded its definitions and read the others' heartbeats: a few
    // seconds of slots later the views are settled (read every 2 s).
    wait_until(
        Duration::from_secs(30),
        "three nodes with their definitions",
        async || {
            scalar(
                &store,
                "SELECT count(*) FROM svc_nodes WHERE defs_digest <> ''",
            )
            .await
                == 3
        },
    )
    .await;
    more_slots(&store, 5 * TICKS.len() as i64).await;

    about_one_offer_per_slot(&nodes, &store).await;
    triggers_wake_no_other_node(&nodes, &store).await;

    // kill -9 of the node that owns own0: its slots are taken over, each claimed once.
    let victim: String = wait_for(Duration::from_secs(10), "a claim of own0", async || {
        sqlx::query_scalar(
            "SELECT node FROM svc_slots WHERE id = 'own0' ORDER BY slot DESC LIMIT 1",
        )
        .fetch_optional(store.pool())
        .await
        .expect("owner")
    })
    .await;
    let index: usize = victim
        .trim_start_matches("node-")
        .parse()
        .expect("node name");
    let window_start = store.db_now().await.expect("now") - chrono::Duration::seconds(3);
    nodes[index].kill9().await;
    let killed_at = store.db_now().await.expect("now");
    wait_until(
        Duration::from_secs(60),
        "own0's slots taken over",
        async || {
            scalar(
                &store,
                &format!(
                    "SELECT count(*) FROM svc_slots WHERE id = 'own0' AND node <> '{victim}'
                 AND slot > '{}'::timestamptz + interval '1 second'",
                    killed_at.to_rfc3339()
                ),
            )
            .await
                > 0
        },
    )
    .await;
    // A window of 20 s or more, its end a few seconds back (slots are claimed at their
    // due time, a killed owner's within the suspicion delay).
    wait_until(Duration::from_secs(60), "a window of 20 s", async || {
        store.db_now().await.expect("now") - window_start >= chrono::Duration::seconds(26)
    })
    .await;
    let window_end = store.db_now().await.expect("now") - chrono::Duration::seconds(3);
    for (n, node) in nodes.iter_mut().enumerate() {
        if n != index {
            node.stop().await;
        }
    }
    every_slot_claimed_once(&store, &TICKS, window_start, window_end, &outputs(&nodes)).await;
    store.close().await;
}

/// About one offer per slot, whatever the number of nodes (3 here, where every node
/// offering every slot made 3).
///
/// The slots are counted before the offers at the start and after them at the end, so
/// that the window of slots holds the window of offers: the time the reads take on a
/// loaded machine (three metrics pages) then never counts the offers of slots left out
/// of the count, and a node counts its offers only once their rows are in.
async fn about_one_offer_per_slot(nodes: &[TestService], store: &ClusterStore) {
    let slots0 = slots(store).await;
    let offers0 = offers(nodes).await;
    more_slots(store, 10 * TICKS.len() as i64).await;
    let offers1 = offers(nodes).await;
    let slots1 = slots(store).await;
    let ratio = (offers1 - offers0) / (slots1 - slots0) as f64;
    println!(
        "{} offers for {} slots: {ratio:.2} per slot",
        offers1 - offers0,
        slots1 - slots0
    );
    assert!(ratio <= 1.25, "{ratio} offers per slot\n{}", outputs(nodes));
}

/// Triggers accepted by a node with free permits wake no other node.
async fn triggers_wake_no_other_node(nodes: &[TestService], store: &ClusterStore) {
    let woken = async || {
        [
            counter(&nodes[1], "svc_cluster_wakeups_total").await,
            counter(&nodes[2], "svc_cluster_wakeups_total").await,
        ]
    };
    let before = woken().await;
    for hook in HOOKS {
        nodes[0]
            .trigger_with_secret(&format!("/{hook}"), hook.as_bytes(), SECRET)
            .await
            .assert_status(200);
    }
    wait_until(Duration::from_secs(30), "every trigger run", async || {
        scalar(
            store,
            "SELECT count(*) FROM svc_runs WHERE id LIKE 'hook%' AND state = 'done'",
        )
        .await
            == HOOKS.len() as i64
    })
    .await;
    assert_eq!(
        before,
        woken().await,
        "the other nodes were woken\n{}",
        outputs(nodes)
    );
}
