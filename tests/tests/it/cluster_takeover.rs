//! A node of a three-node cluster killed with SIGKILL mid-run, on a real PostgreSQL: its
//! run is reaped as interrupted once its lease lapses and its job runs on elsewhere, and
//! no timer slot goes missing meanwhile: every slot of the window is claimed exactly once,
//! and each either ran once or found its job busy (its previous run queued or running).

use std::time::Duration;

use chrono::{DateTime, Utc};
use svc_controller::cluster::ClusterStore;
use svc_tests::{TestService, wait_for, wait_until};

use crate::cluster::{Shared, job, launch_postgres, outputs, start_nodes, store};

/// The jobs whose slots are checked: due every second.
const TICKS: [&str; 3] = ["tick0", "tick1", "tick2"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_has_its_run_reaped_and_no_timer_slot_goes_missing() {
    let (_pg, url) = launch_postgres("svc_kill").await;
    let shared = Shared::new();
    let mut defs = vec![(
        "slow".to_string(),
        job("slow", &shared.path, Some("interval = 2s"), "sleep 600"),
    )];
    for tick in TICKS {
        let text = job(tick, &shared.path, Some("interval = 1s"), "true");
        defs.push((tick.to_string(), text));
    }
    let mut nodes = start_nodes(&url, 3, &defs).await;
    let store = store(&url).await;
    // The window starts once every node offers slots.
    let window_start = store.db_now().await.expect("now") + chrono::Duration::seconds(2);
    let (run_id, victim, counter): (i64, String, i64) =
        wait_for(Duration::from_secs(30), "a run of slow", async || {
            sqlx::query_as(
                "SELECT run_id, node, counter FROM svc_runs
                 WHERE state = 'running' AND id = 'slow'",
            )
            .fetch_optional(store.pool())
            .await
            .expect("running")
        })
        .await;
    let index: usize = victim
        .trim_start_matches("node-")
        .parse()
        .expect("node name");
    nodes[index].kill9().await;
    reaped_and_run_elsewhere(&nodes, index, &store, (run_id, &victim, counter)).await;
    let window_end = store.db_now().await.expect("now") - chrono::Duration::seconds(2);
    for (n, node) in nodes.iter_mut().enumerate() {
        if n != index {
            node.stop().await;
        }
    }
    every_slot_claimed_once(&store, &TICKS, window_start, window_end, &outputs(&nodes)).await;
    store.close().await;
}

/// Run `run_id` (number `counter` of slow) of the killed node `victim` is reaped as
/// interrupted once its lease (30 s) lapsed, by the node that holds the housekeeping
/// lease (taken over within its 15 s if the killed node held it); then a next slot is
/// claimed by a live node, and no live node shows the reaped run as going on.
async fn reaped_and_run_elsewhere(
    nodes: &[TestService],
    index: usize,
    store: &ClusterStore,
    (run_id, victim, counter): (i64, &str, i64),
) {
    let (status, summary): (String, String) = wait_for(
        Duration::from_secs(90),
        "the killed node's run to be reaped",
        async || {
            sqlx::query_as(
                "SELECT status, summary FROM svc_runs WHERE run_id = $1 AND state = 'done'",
            )
            .bind(run_id)
            .fetch_optional(store.pool())
            .await
            .expect("reaped")
        },
    )
    .await;
    assert_eq!(status, "interrupted");
    assert!(summary.contains(victim), "{summary}");
    let next: String = wait_for(
        Duration::from_secs(30),
        "a run of slow on a live node",
        async || {
            sqlx::query_scalar(
                "SELECT node FROM svc_runs
                 WHERE state = 'running' AND id = 'slow' AND run_id > $1",
            )
            .bind(run_id)
            .fetch_optional(store.pool())
            .await
            .expect("running")
        },
    )
    .await;
    assert_ne!(next, victim);
    // The other nodes showed the killed node's run as going on; its end was never
    // signalled, and they read it back: no node shows it running any more.
    for (n, node) in nodes.iter().enumerate() {
        if n == index {
            continue;
        }
        wait_until(
            Duration::from_secs(30),
            "the reaped run to show as ended on every live node",
            async || {
                let job = node.job("slow").await;
                !job["logs"].as_array().is_some_and(|logs| {
                    logs.iter()
                        .any(|log| log["counter"] == counter && log["status"] == "started")
                })
            },
        )
        .await;
    }
    let text = outputs(nodes);
    assert!(
        text.contains("a run is recorded as interrupted: its node stopped renewing its lease"),
        "{text}"
    );
}

/// Every second from `from` to `to` is a claimed slot of each job of `ticks` (the primary
/// key makes each claim unique), no slot gave two runs, and a slot that gave none found
/// its job busy, as its claim recorded (`svc_slots.outcome`, written by the claim's own
/// transaction): a run of it was queued or running when the claim looked. (The runs'
/// timestamps cannot tell: each is its transaction's start, and on a loaded database a
/// run's end begun before a claim may commit after the claim looked.) Every slot whose
/// claim queued a run has that run.
pub(crate) async fn every_slot_claimed_once(
    store: &ClusterStore,
    ticks: &[&str],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    text: &str,
) {
    let names: Vec<&str> = ticks.to_vec();
    let ticks: Vec<String> = names.iter().map(|tick| (*tick).to_string()).collect();
    let claimed: Vec<(String, i64)> = sqlx::query_as(
        "SELECT id, count(*) FROM svc_slots
         WHERE kind = 'job' AND id = ANY($1) AND slot BETWEEN $2 AND $3
         GROUP BY id ORDER BY id",
    )
    .bind(&ticks)
    .bind(from)
    .bind(to)
    .fetch_all(store.pool())
    .await
    .expect("slots");
    // From the start to the reaping: the lease (30 s) less the time since the killed
    // node's last beat (at most 5 s), less the window's margins.
    let seconds = (to - from).num_seconds();
    assert!(seconds >= 20, "a window of {seconds} s");
    for tick in &names {
        let count = claimed
            .iter()
            .find(|(id, _)| id == *tick)
            .map_or(0, |(_, count)| *count);
        // Slots are whole seconds: the window holds `seconds` or `seconds + 1` of them.
        assert!(
            count >= seconds,
            "{tick}: {count} slots claimed in {seconds} s from {from} to {to}\n{text}"
        );
    }
    let twice: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT id, trigger->>'cause', count(*) FROM svc_runs
         WHERE kind = 'job' AND id = ANY($1) GROUP BY id, trigger->>'cause'
         HAVING count(*) > 1",
    )
    .bind(&ticks)
    .fetch_all(store.pool())
    .await
    .expect("runs per slot");
    assert!(twice.is_empty(), "slots that ran twice: {twice:?}\n{text}");
    let missing: Vec<(String, DateTime<Utc>, Option<String>)> = sqlx::query_as(
        "SELECT s.id, s.slot, s.outcome FROM svc_slots s
         WHERE s.kind = 'job' AND s.id = ANY($1) AND s.slot BETWEEN $2 AND $3
           AND s.outcome IS DISTINCT FROM 'busy'
           AND NOT (s.outcome = 'queued' AND EXISTS (
             SELECT 1 FROM svc_runs r WHERE r.kind = s.kind AND r.id = s.id
               AND r.trigger->>'cause' = 'slot ' ||
                   to_char(s.slot AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')))
         ORDER BY s.slot",
    )
    .bind(&ticks)
    .bind(from)
    .bind(to)
    .fetch_all(store.pool())
    .await
    .expect("slots without a run");
    assert!(
        missing.is_empty(),
        "slots claimed that neither ran nor found their job busy (id, slot, outcome): \
         {missing:?}\n{text}"
    );
    let busy: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM svc_slots WHERE kind = 'job' AND id = ANY($1)
           AND slot BETWEEN $2 AND $3 AND outcome = 'busy'",
    )
    .bind(&ticks)
    .bind(from)
    .bind(to)
    .fetch_one(store.pool())
    .await
    .expect("busy slots");
    let ran: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM svc_runs WHERE kind = 'job' AND id = ANY($1) AND state = 'done'",
    )
    .bind(&ticks)
    .fetch_one(store.pool())
    .await
    .expect("runs");
    println!(
        "{} tick jobs over {seconds} s across the kill: every slot claimed once, {ran} runs, \
         {busy} slots skipped as their job was busy",
        names.len()
    );
}
