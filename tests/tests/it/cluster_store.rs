//! The cluster store against a real PostgreSQL (a throwaway server per test, see
//! `svc_tests::postgres`): concurrent migrations, timer slots claimed once among racing
//! nodes, triggers accepted by any node and run once each with one run at a time per
//! job, leases, reaping, replay stores, and an unreachable database told apart; each
//! node's job definitions recorded and compared with the live nodes' (and read without
//! writing, for `--check` and the API), and the heartbeat; run logs copied in chunks and
//! read by another node, the shared history and audit log.
//!
//! Each "node" is a `ClusterStore` with its own pool, as separate controllers would have.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::Row;
use svc_controller::cluster::{
    ClusterError, ClusterStore, EnqueueOutcome, Finish, Heartbeat, JobDef, JobKey, JobKind,
    LOG_CHUNK, NewTrigger, ReplayStore, RunOutcome, SharedRunState, Signal, SignalOp, SlotClaim,
    StoreOptions,
};
use svc_controller::store::state::RunStatus;
use svc_tests::postgres::PostgresServer;
use svc_tests::{WAIT, wait_for, wait_until};

const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

fn options() -> StoreOptions {
    StoreOptions {
        max_connections: 6,
        acquire_timeout: Duration::from_secs(5),
        ..StoreOptions::default()
    }
}

/// One store per node over database `url`, the schema applied.
async fn nodes(url: &str) -> Vec<ClusterStore> {
    let stores: Vec<ClusterStore> = NODES
        .iter()
        .map(|_| ClusterStore::new(url, &options()).expect("store"))
        .collect();
    stores[0].migrate().await.expect("migrate");
    stores
}

fn trigger(node: &str, what: &str) -> NewTrigger {
    NewTrigger {
        accepted_by: node.to_string(),
        attempt: 1,
        payload: serde_json::json!({ "source": what }),
    }
}

fn job(id: &str) -> JobKey {
    JobKey::new(JobKind::Job, id)
}

/// Registers `node` and records it as defining exactly `jobs` (a node claims only runs of
/// jobs it defines).
async fn define(store: &ClusterStore, node: &str, jobs: &[&JobKey]) {
    store.register_node(node, 4).await.expect("register");
    let defs: Vec<JobDef> = jobs
        .iter()
        .map(|&job| JobDef {
            job: job.clone(),
            hash: "same".to_string(),
        })
        .collect();
    store
        .sync_job_defs(node, &defs)
        .await
        .expect("sync_job_defs");
}

async fn count(store: &ClusterStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(store.pool())
        .await
        .unwrap_or_else(|err| panic!("{sql}: {err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_applied_at_once_by_three_nodes_give_one_schema() {
    let pg = PostgresServer::launch();
    // Three rounds on fresh databases: more chances for the nodes to meet.
    for round in 0..3 {
        let url = pg.create_database(&format!("migrate_{round}"));
        let stores: Vec<ClusterStore> = NODES
            .iter()
            .map(|_| ClusterStore::new(&url, &options()).expect("store"))
            .collect();
        let tasks: Vec<_> = stores
            .iter()
            .cloned()
            .map(|store| tokio::spawn(async move { store.migrate().await }))
            .collect();
        for task in tasks {
            task.await
                .expect("task")
                .expect("every node's migration succeeds");
        }
        let applied = count(
            &stores[0],
            "SELECT count(*) FROM _sqlx_migrations WHERE success",
        )
        .await;
        assert_eq!(applied, 3, "each migration is recorded once");
        let tables = count(
            &stores[0],
            "SELECT count(*) FROM information_schema.tables
             WHERE table_schema = 'public' AND table_name LIKE 'svc\\_%'",
        )
        .await;
        assert_eq!(tables, 9, "every table of the schema, once");
        // A later start finds nothing to do.
        stores[1].migrate().await.expect("migrate again");
        for store in &stores {
            store.close().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn each_timer_slot_is_claimed_by_exactly_one_of_three_racing_nodes() {
    const JOBS: usize = 10;
    const SLOTS_PER_JOB: usize = 100;
    const TASKS_PER_NODE: usize = 3;
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("slots")).await;
    let base: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().expect("time");
    let slots: Arc<Vec<(JobKey, DateTime<Utc>)>> = Arc::new(
        (0..JOBS)
            .flat_map(|j| {
                (0..SLOTS_PER_JOB).map(move |s| {
                    (
                        job(&format!("timer-{j}")),
                        base + TimeDelta::minutes(s as i64),
                    )
                })
            })
            .collect(),
    );
    // Every node offers every slot in the same order, as the nodes' timers all fire for
    // the same slot at the same time; a node's tasks share its slots (task t takes every
    // TASKS_PER_NODE-th).
    let mut tasks = Vec::new();
    for (n, store) in stores.iter().enumerate() {
        for t in 0..TASKS_PER_NODE {
            let store = store.clone();
            let slots = slots.clone();
            let node = NODES[n];
            tasks.push(tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for (job, slot) in slots.iter().skip(t).step_by(TASKS_PER_NODE) {
                    let claim = store
                        .claim_slot(job, *slot, &trigger(node, "timer"))
                        .await
                        .expect("claim_slot");
                    outcomes.push((job.clone(), *slot, node, claim));
                }
                outcomes
            }));
        }
    }
    // Per slot, the nodes whose offer inserted it and what became of its run.
    type Winners<'a> = HashMap<(JobKey, DateTime<Utc>), Vec<(&'a str, SlotClaim)>>;
    let mut winners: Winners = HashMap::new();
    let mut taken = 0;
    for task in tasks {
        for (job, slot, node, claim) in task.await.expect("task") {
            if !claim.is_ours() {
                taken += 1;
            } else {
                winners.entry((job, slot)).or_default().push((node, claim));
            }
        }
    }
    assert_eq!(
        winners.len(),
        JOBS * SLOTS_PER_JOB,
        "every slot has a winner"
    );
    let doubles: Vec<_> = winners.iter().filter(|(_, won)| won.len() != 1).collect();
    assert!(doubles.is_empty(), "slots won more than once: {doubles:?}");
    let per_node: BTreeMap<&str, usize> =
        winners
            .values()
            .flatten()
            .fold(BTreeMap::new(), |mut acc, (node, _)| {
                *acc.entry(*node).or_default() += 1;
                acc
            });
    eprintln!("slots won per node: {per_node:?}; offers that found the slot taken: {taken}");
    assert_eq!(taken, (NODES.len() - 1) * JOBS * SLOTS_PER_JOB);
    // Nobody claims runs here, so each job's first won slot queues its run and every
    // later one finds it queued: skipped, as a tick while busy is.
    for j in 0..JOBS {
        let key = job(&format!("timer-{j}"));
        let claims: Vec<SlotClaim> = winners
            .iter()
            .filter(|((k, _), _)| *k == key)
            .map(|(_, won)| won[0].1)
            .collect();
        let enqueued = claims
            .iter()
            .filter(|c| matches!(c, SlotClaim::Enqueued { .. }))
            .count();
        let skipped = claims
            .iter()
            .filter(|c| matches!(c, SlotClaim::SkippedBusy))
            .count();
        assert_eq!((enqueued, skipped), (1, SLOTS_PER_JOB - 1), "{key:?}");
    }
    assert_eq!(
        count(&stores[0], "SELECT count(*) FROM svc_slots").await,
        (JOBS * SLOTS_PER_JOB) as i64
    );
    assert_eq!(
        count(
            &stores[0],
            "SELECT count(*) FROM svc_runs WHERE state = 'queued'"
        )
        .await,
        JOBS as i64
    );
    // A paused job's slot is claimed (it is not run elsewhere) and skipped.
    let paused = job("timer-0");
    let store = &stores[1];
    store.set_paused(&paused, true).await.expect("pause");
    let later = base + TimeDelta::days(1);
    assert_eq!(
        store
            .claim_slot(&paused, later, &trigger(NODES[1], "timer"))
            .await
            .expect("claim"),
        SlotClaim::SkippedPaused
    );
    assert_eq!(
        stores[2]
            .claim_slot(&paused, later, &trigger(NODES[2], "timer"))
            .await
            .expect("claim"),
        SlotClaim::Taken
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_slot_queue_and_pause_hold_across_nodes() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("queue")).await;
    let (a, b, c) = (&stores[0], &stores[1], &stores[2]);
    let build = job("build");
    for (n, store) in stores.iter().enumerate() {
        define(store, NODES[n], &[&build]).await;
    }
    let first = match a.enqueue(&build, &trigger(NODES[0], "webhook")).await {
        Ok(EnqueueOutcome::Enqueued { run_id }) => run_id,
        other => panic!("first trigger: {other:?}"),
    };
    // Queued and not yet claimed: the one slot is taken, whichever node is asked.
    assert_eq!(
        b.enqueue(&build, &trigger(NODES[1], "webhook"))
            .await
            .expect("enqueue"),
        EnqueueOutcome::QueueFull
    );
    let claimed = c.claim_runs(NODES[2], 5).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].run_id, claimed[0].counter), (first, 1));
    assert_eq!(
        claimed[0].payload,
        serde_json::json!({ "source": "webhook" })
    );
    // Running: one trigger may wait behind it, not two; and it is not claimed while the
    // run goes on.
    let second = match b.enqueue(&build, &trigger(NODES[1], "webhook")).await {
        Ok(EnqueueOutcome::Enqueued { run_id }) => run_id,
        other => panic!("trigger while running: {other:?}"),
    };
    assert_eq!(
        a.enqueue(&build, &trigger(NODES[0], "webhook"))
            .await
            .expect("enqueue"),
        EnqueueOutcome::QueueFull
    );
    assert!(a.claim_runs(NODES[0], 5).await.expect("claim").is_empty());
    // Paused: new triggers are refused, the queued one is kept and not claimed.
    a.set_paused(&build, true).await.expect("pause");
    assert_eq!(
        c.enqueue(&build, &trigger(NODES[2], "webhook"))
            .await
            .expect("enqueue"),
        EnqueueOutcome::Paused
    );
    assert_eq!(
        c.finish_run(first, NODES[2], &RunOutcome::new(RunStatus::Success))
            .await
            .expect("finish"),
        Finish::Recorded
    );
    assert!(b.claim_runs(NODES[1], 5).await.expect("claim").is_empty());
    b.set_paused(&build, false).await.expect("resume");
    let claimed = b.claim_runs(NODES[1], 5).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].run_id, claimed[0].counter), (second, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn ten_thousand_triggers_over_three_nodes_run_once_each_one_at_a_time() {
    const JOBS: usize = 25;
    const ATTEMPTS: usize = 10_000;
    const ENQUEUERS_PER_NODE: usize = 3;
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("triggers")).await;
    let keys: Vec<JobKey> = (0..JOBS).map(|i| job(&format!("hook-{i}"))).collect();
    let all: Vec<&JobKey> = keys.iter().collect();
    for (n, store) in stores.iter().enumerate() {
        define(store, NODES[n], &all).await;
    }
    let enqueuers_done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let total_enqueuers = NODES.len() * ENQUEUERS_PER_NODE;
    let mut enqueuers = Vec::new();
    for (n, store) in stores.iter().enumerate() {
        for t in 0..ENQUEUERS_PER_NODE {
            let store = store.clone();
            let done = enqueuers_done.clone();
            let worker = n * ENQUEUERS_PER_NODE + t;
            enqueuers.push(tokio::spawn(async move {
                let mut accepted = Vec::new();
                let mut full = 0usize;
                // Attempts worker, worker + total, ...: 10,000 in all, each job offered
                // by every node.
                for i in (worker..ATTEMPTS).step_by(total_enqueuers) {
                    let key = job(&format!("hook-{}", i % JOBS));
                    match store
                        .enqueue(&key, &trigger(NODES[n], "webhook"))
                        .await
                        .expect("enqueue")
                    {
                        EnqueueOutcome::Enqueued { run_id } => accepted.push(run_id),
                        EnqueueOutcome::QueueFull => full += 1,
                        EnqueueOutcome::Paused => panic!("no job is paused"),
                    }
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                (accepted, full)
            }));
        }
    }
    // One claimer per node: claims what it can, finishes it, until the enqueuers are done
    // and nothing is left queued.
    let mut claimers = Vec::new();
    let in_flight: Arc<std::sync::Mutex<std::collections::HashSet<String>>> = Arc::default();
    for (n, store) in stores.iter().enumerate() {
        let store = store.clone();
        let done = enqueuers_done.clone();
        let in_flight = in_flight.clone();
        claimers.push(tokio::spawn(async move {
            let mut claimed = Vec::new();
            loop {
                let finished_enqueuing =
                    done.load(std::sync::atomic::Ordering::SeqCst) == total_enqueuers;
                let runs = store.claim_runs(NODES[n], 4).await.expect("claim_runs");
                if runs.is_empty() {
                    if finished_enqueuing {
                        let queued: i64 = sqlx::query_scalar(
                            "SELECT count(*) FROM svc_runs WHERE state <> 'done'",
                        )
                        .fetch_one(store.pool())
                        .await
                        .expect("count");
                        if queued == 0 {
                            return claimed;
                        }
                    }
                    // Nothing to claim now: poll again shortly rather than spin on the
                    // database the enqueuers share.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                // One run at a time per job, as the claimers see it: a job's mark is set
                // once its run is claimed and cleared just before its end is committed,
                // so a claim of its next run (which needs that commit) finds it cleared,
                // and a second run of the job claimed meanwhile finds it set.
                let job_of = |run: &svc_controller::cluster::ClaimedRun| {
                    format!("{}/{}", run.job.kind.as_str(), run.job.id)
                };
                for run in &runs {
                    let job = job_of(run);
                    assert!(
                        in_flight.lock().expect("marks").insert(job.clone()),
                        "two runs of {job} at once"
                    );
                }
                for run in runs {
                    in_flight.lock().expect("marks").remove(&job_of(&run));
                    let finish = store
                        .finish_run(run.run_id, NODES[n], &RunOutcome::new(RunStatus::Success))
                        .await
                        .expect("finish");
                    assert_eq!(finish, Finish::Recorded, "run {}", run.run_id);
                    claimed.push(run.run_id);
                }
            }
        }));
    }
    let started = std::time::Instant::now();
    let mut accepted = Vec::new();
    let mut full = 0;
    for task in enqueuers {
        let (ids, refused) = task.await.expect("enqueuer");
        accepted.extend(ids);
        full += refused;
    }
    let mut claimed = Vec::new();
    let mut per_node = Vec::new();
    for task in claimers {
        let ids = tokio::time::timeout(WAIT * 4, task)
            .await
            .expect("the claimers drain the queue")
            .expect("claimer");
        per_node.push(ids.len());
        claimed.extend(ids);
    }
    eprintln!(
        "{ATTEMPTS} attempts: {} accepted, {full} refused (queue full), runs per node \
         {per_node:?}, in {:?}",
        accepted.len(),
        started.elapsed()
    );
    assert_eq!(accepted.len() + full, ATTEMPTS);
    assert!(!accepted.is_empty());
    // Every accepted trigger has its row, and there is no other row: the run IDs the
    // enqueues returned are exactly the table's, each once (nothing lost, nothing extra,
    // no ID handed out twice).
    let mut accepted_ids = accepted.clone();
    accepted_ids.sort_unstable();
    let stored: Vec<i64> = sqlx::query_scalar("SELECT run_id FROM svc_runs ORDER BY run_id")
        .fetch_all(stores[0].pool())
        .await
        .expect("run IDs");
    let accepted_set: HashSet<i64> = accepted.iter().copied().collect();
    let stored_set: HashSet<i64> = stored.iter().copied().collect();
    assert!(
        accepted_ids == stored,
        "accepted run IDs ({} of them, {} distinct) differ from svc_runs' ({}): lost {:?}, \
         extra {:?}",
        accepted_ids.len(),
        accepted_set.len(),
        stored.len(),
        accepted_set
            .difference(&stored_set)
            .take(10)
            .collect::<Vec<_>>(),
        stored_set
            .difference(&accepted_set)
            .take(10)
            .collect::<Vec<_>>(),
    );
    // Every accepted trigger ran exactly once.
    claimed.sort_unstable();
    let claimed_set: HashSet<i64> = claimed.iter().copied().collect();
    assert_eq!(claimed_set.len(), claimed.len(), "no run was claimed twice");
    assert_eq!(claimed_set, accepted_set, "every accepted trigger was run");
    // Counters per job: 1..n, no gap, no duplicate. (Neither run IDs nor the database's
    // `now()` order the runs: a sequence value is taken when an insert begins, and
    // `now()` is when a statement's transaction began, before its snapshot; the claimers
    // above check that no two runs of a job overlapped.)
    let rows = sqlx::query("SELECT id, counter, status FROM svc_runs ORDER BY id, counter")
        .fetch_all(stores[0].pool())
        .await
        .expect("rows");
    let mut per_job: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for row in &rows {
        let status: String = row.get("status");
        assert_eq!(status, "success");
        per_job
            .entry(row.get("id"))
            .or_default()
            .push(row.get("counter"));
    }
    for (id, counters) in &per_job {
        let expected: Vec<i64> = (1..=counters.len() as i64).collect();
        assert_eq!(counters, &expected, "counters of {id}");
    }
    let counters: i64 = count(&stores[0], "SELECT sum(counter)::bigint FROM svc_jobs").await;
    assert_eq!(
        counters,
        accepted.len() as i64,
        "the jobs' counters add up to the runs"
    );
}

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

fn def(kind: JobKind, id: &str, hash: &str) -> JobDef {
    JobDef {
        job: JobKey::new(kind, id),
        hash: hash.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_nodes_definitions_are_recorded_and_compared_with_the_live_nodes() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("defs")).await;
    let (a, b, c) = (&stores[0], &stores[1], &stores[2]);
    // A node must register before it records its definitions.
    assert!(matches!(
        c.sync_job_defs(NODES[2], &[def(JobKind::Job, "x", "h1")])
            .await,
        Err(ClusterError::UnknownNode(_))
    ));
    assert_eq!(count(c, "SELECT count(*) FROM svc_jobs").await, 0);
    a.register_node(NODES[0], 2).await.expect("register a");
    b.register_node(NODES[1], 2).await.expect("register b");

    let on_a = [
        def(JobKind::Job, "build", "h1"),
        def(JobKind::Job, "deploy", "h1"),
        def(JobKind::Http, "ping", "h1"),
    ];
    let drift = a.sync_job_defs(NODES[0], &on_a).await.expect("sync a");
    assert!(drift.is_empty(), "{drift:?}");
    // b defines deploy differently, lacks ping and has a job of its own.
    let on_b = [
        def(JobKind::Job, "build", "h1"),
        def(JobKind::Job, "deploy", "h2"),
        def(JobKind::Job, "report", "h1"),
    ];
    let drift = b.sync_job_defs(NODES[1], &on_b).await.expect("sync b");
    assert_eq!(
        drift.differ,
        vec![(job("deploy"), vec![NODES[0].to_string()])]
    );
    assert_eq!(drift.missing_here, vec![JobKey::new(JobKind::Http, "ping")]);
    let drift = a
        .sync_job_defs(NODES[0], &on_a)
        .await
        .expect("sync a again");
    assert_eq!(
        drift.differ,
        vec![(job("deploy"), vec![NODES[1].to_string()])]
    );
    assert_eq!(drift.missing_here, vec![job("report")]);
    // Every job of either node has its row, and each node's hash of each of its jobs.
    assert_eq!(count(a, "SELECT count(*) FROM svc_jobs").await, 4);
    assert_eq!(count(a, "SELECT count(*) FROM svc_job_defs").await, 6);

    // A job a no longer defines loses a's row (not the job's: b may still run it).
    a.sync_job_defs(NODES[0], &on_a[..2]).await.expect("sync a");
    assert_eq!(
        count(a, "SELECT count(*) FROM svc_job_defs WHERE node = 'node-a'").await,
        2
    );
    assert_eq!(count(a, "SELECT count(*) FROM svc_jobs").await, 4);

    // Once b's heartbeat is older than a lease, b no longer counts.
    sqlx::query("UPDATE svc_nodes SET heartbeat_at = now() - interval '1 hour' WHERE name = $1")
        .bind(NODES[1])
        .execute(a.pool())
        .await
        .expect("age b");
    let drift = a.sync_job_defs(NODES[0], &on_a).await.expect("sync a");
    assert!(drift.is_empty(), "{drift:?}");

    // Ten thousand jobs in one transaction, twice (insert, then update), and the same
    // definitions on another live node: no drift.
    b.heartbeat(NODES[1]).await.expect("b is back");
    let many: Vec<JobDef> = (0..10_000)
        .map(|i| def(JobKind::Job, &format!("job-{i}"), "same"))
        .collect();
    let started = std::time::Instant::now();
    let mut drift = Default::default();
    for (store, node) in [(a, NODES[0]), (b, NODES[1]), (a, NODES[0])] {
        drift = store.sync_job_defs(node, &many).await.expect("sync many");
        assert!(drift.differ.is_empty(), "{:?}", drift.differ.first());
    }
    // The first two syncs saw the other node's older jobs as missing; the last, none.
    assert!(drift.is_empty(), "{:?}", drift.missing_here.first());
    // How long is shown, never asserted: it depends on the machine.
    eprintln!("three syncs of 10,000 jobs took {:?}", started.elapsed());
    assert_eq!(count(a, "SELECT count(*) FROM svc_job_defs").await, 20_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn definitions_are_compared_and_overviewed_without_writing() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("drift_reads")).await;
    let (a, b, c) = (&stores[0], &stores[1], &stores[2]);
    for (store, node) in [(a, NODES[0]), (b, NODES[1]), (c, NODES[2])] {
        store.register_node(node, 3).await.expect("register");
    }
    let on_a = [
        def(JobKind::Job, "build", "h1"),
        def(JobKind::Job, "deploy", "h1"),
    ];
    a.sync_job_defs(NODES[0], &on_a).await.expect("sync a");
    b.sync_job_defs(
        NODES[1],
        &[
            def(JobKind::Job, "build", "h1"),
            def(JobKind::Job, "deploy", "h2"),
            def(JobKind::Http, "ping", "h1"),
        ],
    )
    .await
    .expect("sync b");
    // c is gone (no heartbeat within a lease): its definitions count nowhere.
    c.sync_job_defs(
        NODES[2],
        &[
            def(JobKind::Job, "build", "h9"),
            def(JobKind::Job, "only-c", "h1"),
        ],
    )
    .await
    .expect("sync c");
    sqlx::query("UPDATE svc_nodes SET heartbeat_at = now() - interval '1 hour' WHERE name = $1")
        .bind(NODES[2])
        .execute(a.pool())
        .await
        .expect("age c");
    let before = count(a, "SELECT count(*) FROM svc_job_defs").await;

    // a's files now define build otherwise and deploy as b does: compared with b alone
    // (a's own recorded rows are left out), duplicates taken once.
    let files = [
        def(JobKind::Job, "build", "h3"),
        def(JobKind::Job, "build", "h3"),
        def(JobKind::Job, "deploy", "h2"),
    ];
    let comparison = a.compare_job_defs(NODES[0], &files).await.expect("compare");
    assert_eq!(comparison.live_nodes, vec![NODES[1].to_string()]);
    assert_eq!(
        comparison.differ,
        vec![(job("build"), vec![NODES[1].to_string()])]
    );
    assert_eq!(
        comparison.missing_here,
        vec![(
            JobKey::new(JobKind::Http, "ping"),
            vec![NODES[1].to_string()]
        )]
    );
    // A node that never started is compared with every live node, a included.
    let fresh = a
        .compare_job_defs("never-started", &files)
        .await
        .expect("compare a fresh node");
    assert_eq!(
        fresh.live_nodes,
        vec![NODES[0].to_string(), NODES[1].to_string()]
    );
    assert_eq!(
        fresh.differ,
        vec![
            (
                job("build"),
                vec![NODES[0].to_string(), NODES[1].to_string()]
            ),
            (job("deploy"), vec![NODES[0].to_string()]),
        ]
    );

    // The overview as a sees it: every node, deploy differing between a and b (c's build
    // does not count), ping defined only on b.
    let overview = a.overview(NODES[0], 1000).await.expect("overview");
    let nodes: Vec<(&str, bool, u32)> = overview
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.live, n.max_job_running))
        .collect();
    assert_eq!(
        nodes,
        [
            (NODES[0], true, 3),
            (NODES[1], true, 3),
            (NODES[2], false, 3)
        ]
    );
    assert_eq!(overview.differ_total, 1);
    let deploy = &overview.differ[0];
    assert_eq!(deploy.job, job("deploy"));
    assert_eq!(deploy.hash_of(NODES[0]), Some("h1"));
    assert_eq!(deploy.hash_of(NODES[1]), Some("h2"));
    assert_eq!(deploy.defs.len(), 2);
    assert_eq!(
        overview.missing_here,
        vec![(
            JobKey::new(JobKind::Http, "ping"),
            vec![NODES[1].to_string()]
        )]
    );
    assert_eq!(overview.missing_here_total, 1);
    // A gone node still sees its own definitions against the live ones.
    let from_c = c.overview(NODES[2], 1000).await.expect("overview of c");
    let jobs: Vec<&JobKey> = from_c.differ.iter().map(|d| &d.job).collect();
    assert_eq!(jobs, [&job("build"), &job("deploy")]);
    // The lists are cut at the limit; the totals count the rest.
    let cut = c.overview(NODES[2], 1).await.expect("cut overview");
    assert_eq!(cut.differ.len(), 1);
    assert_eq!(cut.differ_total, 2);
    assert_eq!(cut.missing_here.len(), 1);
    assert_eq!(cut.missing_here_total, 2);

    // Nothing was written.
    assert_eq!(count(a, "SELECT count(*) FROM svc_job_defs").await, before);
    assert_eq!(
        count(
            a,
            "SELECT count(*) FROM svc_nodes WHERE name = 'never-started'"
        )
        .await,
        0
    );
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
async fn a_node_claims_only_runs_of_jobs_it_defines() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("own_jobs")).await;
    let (a, b) = (&stores[0], &stores[1]);
    let (shared, only_a) = (job("shared"), job("only-a"));
    define(a, NODES[0], &[&shared, &only_a]).await;
    define(b, NODES[1], &[&shared]).await;
    // Accepted by b (any node may accept a trigger for a job the cluster knows), but b
    // cannot run it: it stays queued until a claims it.
    let queued = match b.enqueue(&only_a, &trigger(NODES[1], "webhook")).await {
        Ok(EnqueueOutcome::Enqueued { run_id }) => run_id,
        other => panic!("enqueue: {other:?}"),
    };
    b.enqueue(&shared, &trigger(NODES[1], "webhook"))
        .await
        .expect("enqueue");
    let claimed = b.claim_runs(NODES[1], 5).await.expect("claim");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(claimed[0].job, shared);
    assert!(b.claim_runs(NODES[1], 5).await.expect("claim").is_empty());
    let claimed = a.claim_runs(NODES[0], 5).await.expect("claim");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!((claimed[0].run_id, &claimed[0].job), (queued, &only_a));
    // A node that stops defining a job stops claiming it: its next record says so.
    a.enqueue(&only_a, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    assert_eq!(
        a.finish_run(queued, NODES[0], &RunOutcome::new(RunStatus::Success))
            .await
            .expect("finish"),
        Finish::Recorded
    );
    define(a, NODES[0], &[&shared]).await;
    assert!(a.claim_runs(NODES[0], 5).await.expect("claim").is_empty());
    assert_eq!(
        count(a, "SELECT count(*) FROM svc_runs WHERE state = 'queued'").await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_hears_a_queued_trigger_and_a_pause_at_once() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("signals")).await;
    let (a, b) = (&stores[0], &stores[1]);
    let mut listener = b.listen().await.expect("listen");
    let build = job("build");
    // The wake comes with the enqueue's commit, from the accepting node.
    a.enqueue(&build, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    let heard = tokio::time::timeout(WAIT, listener.recv())
        .await
        .expect("a signal within the wait")
        .expect("a notification");
    assert_eq!(Signal::parse(heard.payload()), Some(Signal::wake(NODES[0])));
    // A refused trigger queues nothing and wakes no one: the next signal is the pause.
    assert_eq!(
        a.enqueue(&build, &trigger(NODES[0], "webhook"))
            .await
            .expect("enqueue"),
        EnqueueOutcome::QueueFull
    );
    let pause = Signal::about(SignalOp::Pause, &build, NODES[0]);
    a.signal(&pause).await.expect("signal");
    let heard = tokio::time::timeout(WAIT, listener.recv())
        .await
        .expect("a signal within the wait")
        .expect("a notification");
    let signal = Signal::parse(heard.payload()).expect("readable");
    assert_eq!(signal, pause);
    assert_eq!(signal.job(), Some(build));
    // A text from a newer release is not a signal this one acts on.
    assert_eq!(Signal::parse(r#"{"op":"drain","node":"x"}"#), None);
    // The listener holds one of the pool's connections, which closing the pool waits for.
    drop(listener);
    for store in &stores {
        store.close().await;
    }
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
    assert!(a.cancel_queued(&build).await.expect("cancel"));
    assert!(!a.cancel_queued(&build).await.expect("cancel"));
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
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
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
    let chunk = LOG_CHUNK;
    // The copier's first round, then a later one, then a stale copy of the second chunk
    // committing last: the log only grows.
    a.copy_log(run.run_id, 0, &log[..70 * 1024])
        .await
        .expect("copy");
    a.copy_log(run.run_id, chunk as u64, &log[chunk..100 * 1024])
        .await
        .expect("copy");
    a.copy_log(run.run_id, chunk as u64, &log[chunk..80 * 1024])
        .await
        .expect("copy");
    assert!(matches!(
        a.copy_log(run.run_id, 10, &log[10..20]).await,
        Err(ClusterError::BadData(_))
    ));
    // Another node reads it while it runs, from any offset.
    let read = b
        .read_log(&talk, 1, 0, usize::MAX)
        .await
        .expect("read")
        .expect("a run");
    assert_eq!(read.state, SharedRunState::Running);
    assert_eq!(read.node, NODES[0]);
    assert_eq!(read.bytes, &log[..100 * 1024]);
    let read = b
        .read_log(&talk, 1, 65_000, usize::MAX)
        .await
        .expect("read")
        .expect("a run");
    assert_eq!(read.bytes, &log[65_000..100 * 1024]);
    // A bounded read: only the bytes asked for, across a chunk's end.
    for (offset, len) in [
        (65_000usize, 1000usize),
        (0, 0),
        (60_000, 16 * 1024),
        (99 * 1024, 4096),
    ] {
        let read = b
            .read_log(&talk, 1, offset as u64, len)
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
    // The final copy from where the copier was, then the end: read whole, done.
    a.copy_log(run.run_id, chunk as u64, &log[chunk..])
        .await
        .expect("copy");
    let started = Utc::now() - TimeDelta::seconds(3);
    let mut outcome = RunOutcome::new(RunStatus::Success);
    outcome.exit_code = Some(0);
    outcome.ran = Some((started, started + TimeDelta::milliseconds(2500)));
    a.finish_run(run.run_id, NODES[0], &outcome)
        .await
        .expect("finish");
    let read = b
        .read_log(&talk, 1, 0, usize::MAX)
        .await
        .expect("read")
        .expect("a run");
    assert_eq!(read.state, SharedRunState::Done(RunStatus::Success));
    assert_eq!(read.bytes, log);
    assert!(
        b.read_log(&talk, 2, 0, usize::MAX)
            .await
            .expect("read")
            .is_none()
    );
    // The history of every node: the node, the times it ran, the log.
    let runs = b.runs_page(&talk, 10, None).await.expect("runs");
    assert_eq!(runs.len(), 1);
    let shown = &runs[0];
    assert_eq!((shown.counter, shown.node.as_str()), (1, NODES[0]));
    assert_eq!(shown.state, SharedRunState::Done(RunStatus::Success));
    assert_eq!(shown.exit_code, Some(0));
    assert!(shown.has_log);
    let ran = shown.ended_at.expect("end") - shown.started_at.expect("start");
    assert_eq!(ran.num_milliseconds(), 2500);
    assert!(
        b.runs_page(&talk, 10, Some(1))
            .await
            .expect("runs")
            .is_empty()
    );
    // Tails of the newest logs, read from the chunks that hold them only.
    for tail in [1000, 100 * 1024, 1024 * 1024] {
        let tails = b.log_tails(&talk, 5, tail).await.expect("tails");
        let from = log.len().saturating_sub(tail);
        assert_eq!(tails, vec![log[from..].to_vec()], "tail {tail}");
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_changes_are_read_back_once_each_and_none_is_missed() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("pause_changes")).await;
    let jobs: Vec<JobKey> = (0..20).map(|n| job(&format!("j{n}"))).collect();
    let defined: Vec<&JobKey> = jobs.iter().collect();
    define(&stores[0], NODES[0], &defined).await;
    // The first read is every job's state, never changed ones included.
    let all = stores[1].pause_changes(None).await.expect("read");
    assert_eq!(all.changed.len(), 20);
    assert!(all.changed.iter().all(|(_, paused)| !paused));
    assert_eq!(all.mark, 0);
    // A change is read once, after the mark; nothing changed reads nothing.
    stores[0].set_paused(&jobs[3], true).await.expect("pause");
    let changed = stores[1].pause_changes(Some(all.mark)).await.expect("read");
    assert_eq!(changed.changed, vec![(jobs[3].clone(), true)]);
    assert!(changed.mark > all.mark);
    let none = stores[1]
        .pause_changes(Some(changed.mark))
        .await
        .expect("read");
    assert!(none.changed.is_empty());
    assert_eq!(none.mark, changed.mark);

    // Three nodes pause and resume at once while a fourth reads the changes as they
    // come: applying them gives the table's final states, so no change was missed.
    let reader = stores[2].clone();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reading = {
        let done = done.clone();
        let mut view: HashMap<JobKey, bool> = jobs.iter().map(|job| (job.clone(), false)).collect();
        view.insert(jobs[3].clone(), true);
        let mut mark = changed.mark;
        tokio::spawn(async move {
            loop {
                let last = done.load(std::sync::atomic::Ordering::SeqCst);
                let changes = reader.pause_changes(Some(mark)).await.expect("read");
                for (job, paused) in changes.changed {
                    view.insert(job, paused);
                }
                mark = changes.mark;
                if last {
                    return view;
                }
            }
        })
    };
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let store = stores[w % stores.len()].clone();
            let jobs = jobs.clone();
            tokio::spawn(async move {
                for round in 0..40 {
                    let job = &jobs[(w * 7 + round * 3) % jobs.len()];
                    store
                        .set_paused(job, (round + w) % 2 == 0)
                        .await
                        .expect("set");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("writer");
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let view = reading.await.expect("reader");
    let table: HashMap<JobKey, bool> = stores[0]
        .pause_changes(None)
        .await
        .expect("read")
        .changed
        .into_iter()
        .collect();
    assert_eq!(view, table);
}
