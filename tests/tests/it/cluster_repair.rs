//! Signals a node missed are repaired by its read-back of the shared tables: a pause and
//! a cancel recorded in PostgreSQL without their `LISTEN/NOTIFY` signal (as when the
//! node's listening connection was down while they were sent) reach the node within the
//! 5 s read-back period, on a real two-node cluster.

use std::time::{Duration, Instant};

use svc_controller::cluster::{JobKey, JobKind};
use svc_tests::{hmac_sha256_hex, wait_for, wait_until};

use crate::cluster::{SECRET, Shared, job, launch_postgres, outputs, start_nodes, store};

/// The read-back period (`PAUSE_SYNC_EVERY` in the engine) and room for the read itself
/// and the run's end on a loaded machine.
const REPAIR_BOUND: Duration = Duration::from_secs(5 + 3);
/// The most a step may take before the test gives up on it.
const STEP: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_a_cancel_whose_signals_were_lost_are_read_back_within_5_s() {
    let (_pg, url) = launch_postgres("svc_repair").await;
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
    let mut nodes = start_nodes(&url, 2, &defs).await;
    let store = store(&url).await;

    // A pause written to the shared table and never signalled.
    store
        .set_paused(&JobKey::new(JobKind::Job, "quiet"), true)
        .await
        .expect("pause in the table");
    let recorded = Instant::now();
    for (index, node) in nodes.iter().enumerate() {
        wait_until(
            STEP,
            &format!("node {index} to show quiet paused"),
            async || node.job_status("quiet").await == "paused",
        )
        .await;
    }
    let pause_took = recorded.elapsed();

    // A run of slow, then a cancel recorded with it and never signalled.
    let body = "repair";
    let accepted = reqwest::Client::new()
        .post(format!("{}/svc/api/job/run/slow", nodes[0].base_url()))
        .header("x-svc-sign", hmac_sha256_hex(SECRET, body))
        .body(body)
        .send()
        .await
        .expect("trigger slow");
    assert_eq!(accepted.status().as_u16(), 200);
    let (run_id, runner): (i64, String) = wait_for(STEP, "the run of slow", async || {
        sqlx::query_as("SELECT run_id, node FROM svc_runs WHERE state = 'running'")
            .fetch_optional(store.pool())
            .await
            .expect("running")
    })
    .await;
    let cancels = store.cancels_for(&runner).await.expect("cancels");
    assert!(cancels.is_empty(), "no cancel asked yet: {cancels:?}");
    let slow = JobKey::new(JobKind::Job, "slow");
    assert!(
        !store
            .record_cancel(&slow)
            .await
            .expect("cancel in the table"),
        "no queued run to drop"
    );
    let cancels = store.cancels_for(&runner).await.expect("cancels");
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_eq!(cancels[0].0, slow);
    let recorded = Instant::now();
    let status: String = wait_for(STEP, "the cancelled run to end", async || {
        sqlx::query_scalar("SELECT status FROM svc_runs WHERE run_id = $1 AND state = 'done'")
            .bind(run_id)
            .fetch_optional(store.pool())
            .await
            .expect("done")
    })
    .await;
    let cancel_took = recorded.elapsed();
    assert_eq!(status, "canceled", "{}", outputs(&nodes));
    assert!(
        store
            .cancels_for(&runner)
            .await
            .expect("cancels")
            .is_empty(),
        "an ended run is asked nothing"
    );
    println!("missed signals repaired: pause in {pause_took:?}, cancel in {cancel_took:?}");
    assert!(
        pause_took <= REPAIR_BOUND && cancel_took <= REPAIR_BOUND,
        "pause repaired in {pause_took:?}, cancel in {cancel_took:?}: over {REPAIR_BOUND:?}"
    );

    for node in &mut nodes {
        assert_eq!(node.stop().await.code(), Some(0), "{}", outputs(&nodes));
    }
    store.close().await;
}
