//! How fast an operator's action reaches every node of a three-node cluster on a real
//! PostgreSQL: 100 actions (pauses and resumes, each sent to one node in turn, and
//! cancels of a run sent to a node that does not run it), each waited for on every other
//! node (bounded). The cluster design promises about a second (`LISTEN/NOTIFY`, with a
//! read-back every 5 s for a lost signal): the 99th percentile must be within 1 s.

use std::time::{Duration, Instant};

use svc_tests::{TestService, hmac_sha256_hex, wait_for, wait_until};

use crate::cluster::{SECRET, Shared, job, launch_postgres, outputs, start_nodes, store};

/// Pauses and resumes, alternately, then cancels: 100 actions.
const TOGGLES: usize = 80;
const CANCELS: usize = 20;
/// What the design promises for the 99th percentile.
const P99_BOUND: Duration = Duration::from_secs(1);
/// The most one action may take before the test gives up on it.
const ACTION_BOUND: Duration = Duration::from_secs(15);

/// Sends `pause` or `resume` of `quiet` to node `via` and waits until every other node
/// shows it: how long that took.
async fn toggle(nodes: &[TestService], via: usize, pause: bool) -> Duration {
    let answer = if pause {
        nodes[via].pause("quiet").await
    } else {
        nodes[via].resume("quiet").await
    };
    answer.assert_status(200);
    let sent = Instant::now();
    for (index, node) in nodes.iter().enumerate().filter(|(index, _)| *index != via) {
        wait_until(
            ACTION_BOUND,
            &format!(
                "node {index} to show quiet {}",
                if pause { "paused" } else { "resumed" }
            ),
            async || (node.job_status("quiet").await == "paused") == pause,
        )
        .await;
    }
    sent.elapsed()
}

/// Starts a run of `slow` through node `via`, waits until its command runs, cancels it
/// through a node that does not run it and waits until the cluster records its end: how
/// long the cancel took to end it.
async fn cancel_elsewhere(
    nodes: &[TestService],
    store: &svc_controller::cluster::ClusterStore,
    via: usize,
    round: usize,
) -> Duration {
    let body = format!("cancel-{round}");
    let accepted = reqwest::Client::new()
        .post(format!("{}/svc/api/job/run/slow", nodes[via].base_url()))
        .header("x-svc-sign", hmac_sha256_hex(SECRET, &body))
        .body(body)
        .send()
        .await
        .expect("trigger slow");
    assert_eq!(accepted.status().as_u16(), 200, "round {round}");
    let (run_id, runner): (i64, String) = wait_for(ACTION_BOUND, "the run of slow", async || {
        sqlx::query_as("SELECT run_id, node FROM svc_runs WHERE state = 'running'")
            .fetch_optional(store.pool())
            .await
            .expect("running")
    })
    .await;
    let runs_on: usize = runner
        .strip_prefix("node-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a run on an unknown node {runner}"));
    wait_until(ACTION_BOUND, "slow's command to start", async || {
        nodes[runs_on].job_status("slow").await == "started"
    })
    .await;
    let other = (runs_on + 1 + round % 2) % nodes.len();
    nodes[other].cancel("slow").await.assert_status(200);
    let sent = Instant::now();
    let status: String = wait_for(ACTION_BOUND, "the cancelled run to end", async || {
        sqlx::query_scalar("SELECT status FROM svc_runs WHERE run_id = $1 AND state = 'done'")
            .bind(run_id)
            .fetch_optional(store.pool())
            .await
            .expect("done")
    })
    .await;
    let took = sent.elapsed();
    assert_eq!(status, "canceled", "round {round}\n{}", outputs(nodes));
    // Idle again on every node before the next round.
    for node in nodes {
        wait_until(ACTION_BOUND, "slow to be idle everywhere", async || {
            node.job_status("slow").await != "started"
        })
        .await;
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_cancel_reach_every_node_within_1_s_at_p99() {
    let (_pg, url) = launch_postgres("svc_propagation").await;
    let shared = Shared::new();
    let defs = vec![
        (
            "quiet".to_string(),
            job("quiet", &shared.path, None, "true"),
        ),
        (
            "slow".to_string(),
            job("slow", &shared.path, None, "sleep 600"),
        ),
    ];
    let mut nodes = start_nodes(&url, 3, &defs).await;
    let store = store(&url).await;
    let mut took = Vec::new();
    for round in 0..TOGGLES {
        took.push(toggle(&nodes, round % nodes.len(), round % 2 == 0).await);
    }
    for round in 0..CANCELS {
        took.push(cancel_elsewhere(&nodes, &store, round % nodes.len(), round).await);
    }
    took.sort();
    let p50 = took[took.len() / 2];
    let p99 = took[took.len() * 99 / 100 - 1];
    let slowest = took[took.len() - 1];
    println!(
        "{} actions reached every node: p50 {p50:?}, p99 {p99:?}, slowest {slowest:?}",
        took.len()
    );
    assert!(
        p99 <= P99_BOUND,
        "p99 {p99:?} over {} actions (p50 {p50:?}, slowest {slowest:?})",
        took.len()
    );
    let mut codes = Vec::new();
    for node in &mut nodes {
        codes.push(node.stop().await.code());
    }
    assert!(
        codes.iter().all(|code| *code == Some(0)),
        "{codes:?}\n{}",
        outputs(&nodes)
    );
    store.close().await;
}
