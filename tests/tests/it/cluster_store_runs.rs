//! The cluster store's runs against a real PostgreSQL (a throwaway server per test, see
//! `svc_tests::postgres`): a silent node's runs reaped, leases, replay stores, an
//! unreachable database told apart, the heartbeat task, runs released, cancelled and
//! pruned; run logs copied in chunks and read by another node, the shared history and
//! audit log.
//!
//! Each "node" is a `ClusterStore` with its own pool, as separate controllers would have.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use svc_controller::cluster::{
    ClusterError, ClusterStore, Finish, Heartbeat, JobKey, LOG_CHUNK, ReplayStore, RunOutcome,
    SharedRunState, StoreOptions,
};
use svc_controller::store::state::RunStatus;
use svc_tests::postgres::PostgresServer;
use svc_tests::{WAIT, wait_for, wait_until};

use crate::cluster_store_common::{NODES, count, define, job, nodes, options, trigger};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_nodes_runs_are_reaped_and_its_late_finish_is_lost() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("leases")).await;
    let (a, b) = (&stores[0], &stores[1]);
    a.register_node(NODES[0], 2).await.expect("register a");
    b.register_node(NODES[1], 2).await.expect("register b");
    let (ja, jb) = (job("on-a"), job("on-b"));
    define(a, NODES[0], &[&ja]).await;
    define(b, NODES[1], &[&ja, &jb]).await;
    a.enqueue(&ja, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    b.enqueue(&jb, &trigger(NODES[1], "webhook"))
        .await
        .expect("enqueue");
    let run_a = a.claim_runs(NODES[0], 1).await.expect("claim").remove(0);
    let run_b = b.claim_runs(NODES[1], 1).await.expect("claim").remove(0);
    assert_eq!((&run_a.job, &run_b.job), (&ja, &jb));
    // b heartbeats after a's claim (the database's clock has moved on); a never does.
    wait_until(WAIT, "the database clock passes a's claim", async || {
        a.db_now().await.expect("now") > run_a.started_at
    })
    .await;
    assert_eq!(b.heartbeat(NODES[1]).await.expect("heartbeat"), 1);
    let lease_b: DateTime<Utc> =
        sqlx::query_scalar("SELECT lease_until FROM svc_runs WHERE run_id = $1")
            .bind(run_b.run_id)
            .fetch_one(b.pool())
            .await
            .expect("lease");
    assert!(lease_b > run_a.lease_until);
    // Nothing has lapsed yet.
    let now = b.db_now().await.expect("now");
    assert!(now < run_a.lease_until);
    assert!(b.reap_expired(now).await.expect("reap").is_empty());
    // When a's lease lapses (the reaper is asked as of that time rather than waiting the
    // 30 s), a's run is reaped and b's, renewed, is not.
    let reaped = b.reap_expired(run_a.lease_until).await.expect("reap");
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(
        (reaped[0].run_id, reaped[0].node.as_str(), reaped[0].counter),
        (run_a.run_id, NODES[0], 1)
    );
    let status: String = sqlx::query_scalar("SELECT status FROM svc_runs WHERE run_id = $1")
        .bind(run_a.run_id)
        .fetch_one(a.pool())
        .await
        .expect("status");
    assert_eq!(status, "interrupted");
    // a comes back and reports its end: lost, and the record stays as reaped.
    let success = RunOutcome::new(RunStatus::Success);
    assert_eq!(
        a.finish_run(run_a.run_id, NODES[0], &success)
            .await
            .expect("finish"),
        Finish::LeaseLost
    );
    // a's heartbeat does not revive it either.
    assert_eq!(a.heartbeat(NODES[0]).await.expect("heartbeat"), 0);
    // Only the owner finishes a run, once.
    assert_eq!(
        a.finish_run(run_b.run_id, NODES[0], &success)
            .await
            .expect("finish"),
        Finish::LeaseLost
    );
    assert_eq!(
        b.finish_run(run_b.run_id, NODES[1], &success)
            .await
            .expect("finish"),
        Finish::Recorded
    );
    assert_eq!(
        b.finish_run(run_b.run_id, NODES[1], &success)
            .await
            .expect("finish"),
        Finish::LeaseLost
    );
    // The reaped job runs again elsewhere, with the next counter.
    b.enqueue(&ja, &trigger(NODES[1], "webhook"))
        .await
        .expect("enqueue");
    let again = b.claim_runs(NODES[1], 1).await.expect("claim");
    assert_eq!((again[0].job.clone(), again[0].counter), (ja.clone(), 2));
    // A node that restarts finds its runs interrupted: they cannot be running.
    let restarted = b.register_node(NODES[1], 2).await.expect("register again");
    assert_eq!(restarted.len(), 1);
    assert_eq!(restarted[0].run_id, again[0].run_id);
    // An unknown node cannot heartbeat.
    assert!(matches!(
        a.heartbeat("node-z").await,
        Err(ClusterError::UnknownNode(name)) if name == "node-z"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_renewed_only_by_its_holder_and_taken_over_once_it_lapses() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("leader")).await;
    let (a, b) = (&stores[0], &stores[1]);
    let long = Duration::from_secs(60);
    assert!(
        a.try_lease("housekeeping", NODES[0], long)
            .await
            .expect("take")
    );
    assert!(
        !b.try_lease("housekeeping", NODES[1], long)
            .await
            .expect("take")
    );
    assert!(
        a.try_lease("housekeeping", NODES[0], long)
            .await
            .expect("renew")
    );
    // a renews for a short time and stops: b takes it over once it lapses, and from then
    // on a cannot renew it.
    assert!(
        a.try_lease("housekeeping", NODES[0], Duration::from_millis(200))
            .await
            .expect("renew")
    );
    wait_until(WAIT, "b takes the lapsed lease", async || {
        b.try_lease("housekeeping", NODES[1], long)
            .await
            .expect("take")
    })
    .await;
    assert!(
        !a.try_lease("housekeeping", NODES[0], long)
            .await
            .expect("renew")
    );
    // Given up, it is free at once.
    b.release_lease("housekeeping", NODES[1])
        .await
        .expect("release");
    assert!(
        a.try_lease("housekeeping", NODES[0], long)
            .await
            .expect("take")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_key_is_refused_by_every_node() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("replay")).await;
    let ttl = Duration::from_secs(24 * 3600);
    let key = b"build\0delivery-1";
    assert!(
        stores[0]
            .seen_once(ReplayStore::Deliveries, key, ttl)
            .await
            .expect("seen")
    );
    for store in &stores {
        assert!(
            !store
                .seen_once(ReplayStore::Deliveries, key, ttl)
                .await
                .expect("seen")
        );
    }
    // Stores are apart.
    assert!(
        stores[1]
            .seen_once(ReplayStore::Nonces, key, ttl)
            .await
            .expect("seen")
    );
    // Forgotten (its trigger refused), it is accepted again.
    stores[2]
        .forget_seen(ReplayStore::Deliveries, key)
        .await
        .expect("forget");
    assert!(
        stores[1]
            .seen_once(ReplayStore::Deliveries, key, ttl)
            .await
            .expect("seen")
    );
    // An expired record does not refuse.
    wait_until(WAIT, "the record is older than a short ttl", async || {
        stores[0]
            .seen_once(ReplayStore::Deliveries, key, Duration::from_millis(100))
            .await
            .expect("seen")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_told_apart_and_the_store_resumes() {
    let mut pg = PostgresServer::launch();
    let url = pg.create_database("outage");
    let store = ClusterStore::new(
        &url,
        &StoreOptions {
            acquire_timeout: Duration::from_secs(2),
            ..options()
        },
    )
    .expect("store");
    store.migrate().await.expect("migrate");
    let key = job("outage");
    define(&store, NODES[0], &[&key]).await;
    store
        .enqueue(&key, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    store
        .reach(Duration::from_secs(5))
        .await
        .expect("a running server is reached");
    pg.kill();
    // A stopped server refuses the connection: told at once, not after a timeout.
    let err = store
        .reach(Duration::from_secs(60))
        .await
        .expect_err("nothing listens");
    assert!(err.is_unavailable(), "{err:?}");
    let err = store
        .enqueue(&key, &trigger(NODES[0], "webhook"))
        .await
        .expect_err("the server is down");
    assert!(err.is_unavailable(), "{err:?}");
    pg.start();
    // The pool drops its dead connections and connects again by itself.
    let claimed = wait_for(WAIT, "the store works again", async || {
        match store.claim_runs(NODES[0], 1).await {
            Ok(claimed) => Some(claimed),
            Err(err) => {
                eprintln!("not yet: {err}");
                None
            }
        }
    })
    .await;
    assert_eq!(
        claimed.len(),
        1,
        "the trigger accepted before the crash is kept"
    );
    assert!(matches!(
        ClusterStore::new("postgres://[bad", &options()),
        Err(ClusterError::InvalidUrl(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_task_renews_the_nodes_leases_until_stopped() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("beat")).await;
    let a = &stores[0];
    define(a, NODES[0], &[&job("long")]).await;
    a.enqueue(&job("long"), &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    let run = a.claim_runs(NODES[0], 1).await.expect("claim").remove(0);
    let heartbeat = Heartbeat::start(a.clone(), NODES[0].to_string(), Duration::from_millis(50));
    wait_until(WAIT, "a beat renews the run's lease", async || {
        let lease: DateTime<Utc> =
            sqlx::query_scalar("SELECT lease_until FROM svc_runs WHERE run_id = $1")
                .bind(run.run_id)
                .fetch_one(a.pool())
                .await
                .expect("lease");
        lease > run.lease_until
    })
    .await;
    // Stopping returns once the task has ended, beat under way or not.
    tokio::time::timeout(WAIT, heartbeat.stop())
        .await
        .expect("the heartbeat stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_cancelled_raised_read_back_and_pruned() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("upkeep")).await;
    let (a, b) = (&stores[0], &stores[1]);
    let build = job("build");
    define(a, NODES[0], &[&build]).await;
    define(b, NODES[1], &[&build]).await;

    // A node that ran alone before raises the counter to its own; never lowers it.
    a.raise_counters(&[(build.clone(), 41)])
        .await
        .expect("raise");
    b.raise_counters(&[(build.clone(), 7)])
        .await
        .expect("raise");
    a.enqueue(&build, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    let claimed = a.claim_runs(NODES[0], 1).await.expect("claim").remove(0);
    assert_eq!(claimed.counter, 42);

    // Released: back in the queue for any node (its counter is not reused), and only
    // by its own node.
    assert!(
        !b.release_run(claimed.run_id, NODES[1])
            .await
            .expect("release")
    );
    assert!(
        a.release_run(claimed.run_id, NODES[0])
            .await
            .expect("release")
    );
    let again = b.claim_runs(NODES[1], 1).await.expect("claim").remove(0);
    assert_eq!((again.run_id, again.counter), (claimed.run_id, 43));
    // Released while another trigger waits in the one-slot queue: it cannot go back,
    // and is recorded as interrupted rather than lost silently.
    b.enqueue(&build, &trigger(NODES[1], "webhook"))
        .await
        .expect("enqueue");
    assert!(
        b.release_run(again.run_id, NODES[1])
            .await
            .expect("release")
    );
    let status: String = sqlx::query_scalar("SELECT status FROM svc_runs WHERE run_id = $1")
        .bind(again.run_id)
        .fetch_one(a.pool())
        .await
        .expect("status");
    assert_eq!(status, "interrupted");

    // A cancel drops the queued run (recorded as canceled); nothing queued: false.
    assert!(a.record_cancel(&build).await.expect("cancel"));
    assert!(!a.record_cancel(&build).await.expect("cancel"));
    assert_eq!(
        count(a, "SELECT count(*) FROM svc_runs WHERE status = 'canceled'").await,
        1
    );

    // Pause states as the cluster holds them.
    a.set_paused(&build, true).await.expect("pause");
    assert_eq!(
        b.paused_states().await.expect("states"),
        vec![(build.clone(), true)]
    );

    // Pruning: slots before the bound go, the newest runs per job stay.
    let old = DateTime::parse_from_rfc3339("2020-01-01T00:00:00Z")
        .expect("time")
        .with_timezone(&Utc);
    let new = old + TimeDelta::days(3650);
    for slot in [old, new] {
        a.claim_slot(&build, slot, &trigger(NODES[0], "timer"))
            .await
            .expect("slot");
    }
    let done = count(a, "SELECT count(*) FROM svc_runs WHERE state = 'done'").await;
    assert_eq!(done, 2);
    a.prune(old + TimeDelta::days(1), 1).await.expect("prune");
    assert_eq!(count(a, "SELECT count(*) FROM svc_slots").await, 1);
    let left: Vec<i64> = sqlx::query_scalar("SELECT run_id FROM svc_runs WHERE state = 'done'")
        .fetch_all(a.pool())
        .await
        .expect("runs");
    // The newest finished run is the cancelled one.
    let canceled: i64 =
        sqlx::query_scalar("SELECT max(run_id) FROM svc_runs WHERE status = 'canceled'")
            .fetch_one(a.pool())
            .await
            .expect("canceled");
    assert_eq!(left, vec![canceled]);
    for store in &stores {
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_logs_copied_in_any_order_read_whole_and_are_trimmed() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("shared_logs")).await;
    let (a, b) = (&stores[0], &stores[1]);
    let talk = job("talk");
    define(a, NODES[0], &[&talk]).await;
    a.enqueue(&talk, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    let run = a.claim_runs(NODES[0], 1).await.expect("claim").remove(0);
    // Not text, and longer than two chunks.
    let log: Vec<u8> = (0..150 * 1024).map(|n| (n % 251) as u8).collect();
    copy_the_first_100_kib_in_any_order(a, run.run_id, &log).await;
    read_while_running_from_any_offset(b, &talk, &log).await;
    finish_and_read_whole(a, b, &talk, run.run_id, &log).await;
    history_and_tails_show_the_run(b, &talk, &log).await;
    // log_retention = 0 in the shared table: the log goes, the run stays.
    a.trim_logs(&talk, 1).await.expect("trim");
    assert!(b.runs_page(&talk, 10, None).await.expect("runs")[0].has_log);
    a.trim_logs(&talk, 0).await.expect("trim");
    assert!(!b.runs_page(&talk, 10, None).await.expect("runs")[0].has_log);
    let read = b
        .read_log(&talk, 1, 0, usize::MAX)
        .await
        .expect("read")
        .expect("a run");
    assert!(read.bytes.is_empty());
    assert!(b.log_tails(&talk, 5, 1000).await.expect("tails").is_empty());
}

/// The copier's first round, then a later one, then a stale copy of the second chunk
/// committing last: the log only grows (to 100 KiB of `log`). A copy that starts inside
/// a chunk is refused.
async fn copy_the_first_100_kib_in_any_order(a: &ClusterStore, run_id: i64, log: &[u8]) {
    let chunk = LOG_CHUNK;
    a.copy_log(run_id, 0, &log[..70 * 1024])
        .await
        .expect("copy");
    a.copy_log(run_id, chunk as u64, &log[chunk..100 * 1024])
        .await
        .expect("copy");
    a.copy_log(run_id, chunk as u64, &log[chunk..80 * 1024])
        .await
        .expect("copy");
    assert!(matches!(
        a.copy_log(run_id, 10, &log[10..20]).await,
        Err(ClusterError::BadData(_))
    ));
}

/// Another node reads the log while it runs, from any offset; a bounded read gives only
/// the bytes asked for, across a chunk's end.
async fn read_while_running_from_any_offset(b: &ClusterStore, talk: &JobKey, log: &[u8]) {
    let read = b
        .read_log(talk, 1, 0, usize::MAX)
        .await
        .expect("read")
        .expect("a run");
    assert_eq!(read.state, SharedRunState::Running);
    assert_eq!(read.node, NODES[0]);
    assert_eq!(read.bytes, &log[..100 * 1024]);
    let read = b
        .read_log(talk, 1, 65_000, usize::MAX)
        .await
        .expect("read")
        .expect("a run");
    assert_eq!(read.bytes, &log[65_000..100 * 1024]);
    for (offset, len) in [
        (65_000usize, 1000usize),
        (0, 0),
        (60_000, 16 * 1024),
        (99 * 1024, 4096),
    ] {
        let read = b
            .read_log(talk, 1, offset as u64, len)
            .await
            .expect("read")
            .expect("a run");
        let end = (offset + len).min(100 * 1024);
        assert_eq!(
            read.bytes,
            &log[offset..end],
            "offset {offset}, {len} bytes"
        );
    }
}

/// The final copy from where the copier was, then the run's end (it ran 2.5 s): read
/// whole, done; there is no run 2.
async fn finish_and_read_whole(
    a: &ClusterStore,
    b: &ClusterStore,
    talk: &JobKey,
    run_id: i64,
    log: &[u8],
) {
    let chunk = LOG_CHUNK;
    a.copy_log(run_id, chunk as u64, &log[chunk..])
        .await
        .expect("copy");
    let started = Utc::now() - TimeDelta::seconds(3);
    let mut outcome = RunOutcome::new(RunStatus::Success);
    outcome.exit_code = Some(0);
    outcome.ran = Some((started, started + TimeDelta::milliseconds(2500)));
    a.finish_run(run_id, NODES[0], &outcome)
        .await
        .expect("finish");
    let read = b
        .read_log(talk, 1, 0, usize::MAX)
        .await
        .expect("read")
        .expect("a run");
    assert_eq!(read.state, SharedRunState::Done(RunStatus::Success));
    assert_eq!(read.bytes, log);
    assert!(
        b.read_log(talk, 2, 0, usize::MAX)
            .await
            .expect("read")
            .is_none()
    );
}

/// The history of every node: the node, the times it ran, the log; and the tails of the
/// newest logs, read from the chunks that hold them only.
async fn history_and_tails_show_the_run(b: &ClusterStore, talk: &JobKey, log: &[u8]) {
    let runs = b.runs_page(talk, 10, None).await.expect("runs");
    assert_eq!(runs.len(), 1);
    let shown = &runs[0];
    assert_eq!((shown.counter, shown.node.as_str()), (1, NODES[0]));
    assert_eq!(shown.state, SharedRunState::Done(RunStatus::Success));
    assert_eq!(shown.exit_code, Some(0));
    assert!(shown.has_log);
    let ran = shown.ended_at.expect("end") - shown.started_at.expect("start");
    assert_eq!(ran.num_milliseconds(), 2500);
    assert!(
        b.runs_page(talk, 10, Some(1))
            .await
            .expect("runs")
            .is_empty()
    );
    for tail in [1000, 100 * 1024, 1024 * 1024] {
        let tails = b.log_tails(talk, 5, tail).await.expect("tails");
        let from = log.len().saturating_sub(tail);
        assert_eq!(tails, vec![log[from..].to_vec()], "tail {tail}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_audit_log_pages_every_nodes_entries_newest_first() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("shared_audit")).await;
    let (a, b) = (&stores[0], &stores[1]);
    let now = Utc::now();
    let entry = |n: u32, node: &str| (now, serde_json::json!({ "n": n, "node": node }));
    a.append_audit(&[entry(1, NODES[0]), entry(2, NODES[0])])
        .await
        .expect("append");
    b.append_audit(&[entry(3, NODES[1])]).await.expect("append");
    a.append_audit(&[]).await.expect("nothing to append");
    let page = b.audit_page(None, 2).await.expect("page");
    let seen: Vec<(u64, i64)> = page
        .iter()
        .map(|e| (e.seq, e.entry["n"].as_i64().expect("n")))
        .collect();
    assert_eq!(seen, vec![(3, 3), (2, 2)]);
    let older = a.audit_page(Some(2), 2).await.expect("page");
    assert_eq!(older.len(), 1);
    assert_eq!(
        older[0].entry,
        serde_json::json!({ "n": 1, "node": NODES[0] })
    );
}
