//! The cluster store's queue against a real PostgreSQL (a throwaway server per test, see
//! `svc_tests::postgres`): concurrent migrations, timer slots claimed once among racing
//! nodes, triggers accepted by any node and run once each with one run at a time per
//! job, the one-slot queue and pause across nodes, runs claimed only by nodes defining
//! their job, the signals every node hears, and pause changes read back. Leases, reaping,
//! replay stores, an unreachable database and the shared logs are `cluster_store_runs.rs`,
//! job definitions `cluster_store_defs.rs`.
//!
//! Each "node" is a `ClusterStore` with its own pool, as separate controllers would have.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::Row;
use svc_controller::cluster::{
    ClusterStore, EnqueueOutcome, Finish, JobKey, RunOutcome, Signal, SignalOp, SlotClaim,
};
use svc_controller::store::state::RunStatus;
use svc_tests::WAIT;
use svc_tests::postgres::PostgresServer;

use crate::cluster_store_common::{NODES, count, define, job, nodes, options, trigger};

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
        assert_eq!(applied, 6, "each migration is recorded once");
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

/// Jobs with a timer in the race for slots.
const SLOT_JOBS: usize = 10;
/// Slots of each of those jobs.
const SLOTS_PER_JOB: usize = 100;
/// Tasks per node offering slots at once.
const TASKS_PER_NODE: usize = 3;

/// Per slot, the nodes whose offer inserted it and what became of its run.
type Winners = HashMap<(JobKey, DateTime<Utc>), Vec<(&'static str, SlotClaim)>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_timer_slot_is_claimed_by_exactly_one_of_three_racing_nodes() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("slots")).await;
    let base: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().expect("time");
    let (winners, taken) = race_for_slots(&stores, base).await;
    assert_each_slot_won_once(&winners, taken);
    assert_each_jobs_first_slot_queued_and_the_rest_skipped(&winners, &stores[0]).await;
    assert_a_paused_jobs_slot_is_claimed_and_skipped(&stores, base).await;
}

/// Every node offers every slot (`SLOTS_PER_JOB` minutes from `base` for each of
/// `SLOT_JOBS` jobs) in the same order, as the nodes' timers all fire for the same slot at
/// the same time; a node's tasks share its slots (task t takes every
/// `TASKS_PER_NODE`-th). Returns the winners and how many offers found the slot taken.
async fn race_for_slots(stores: &[ClusterStore], base: DateTime<Utc>) -> (Winners, usize) {
    let slots: Arc<Vec<(JobKey, DateTime<Utc>)>> = Arc::new(
        (0..SLOT_JOBS)
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
    (winners, taken)
}

/// Every slot has exactly one winner, and every other node's offer found it taken.
fn assert_each_slot_won_once(winners: &Winners, taken: usize) {
    assert_eq!(
        winners.len(),
        SLOT_JOBS * SLOTS_PER_JOB,
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
    assert_eq!(taken, (NODES.len() - 1) * SLOT_JOBS * SLOTS_PER_JOB);
}

/// Nobody claims runs here, so each job's first won slot queues its run and every later
/// one finds it queued: skipped, as a tick while busy is. The tables hold every slot and
/// one queued run per job.
async fn assert_each_jobs_first_slot_queued_and_the_rest_skipped(
    winners: &Winners,
    store: &ClusterStore,
) {
    for j in 0..SLOT_JOBS {
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
        count(store, "SELECT count(*) FROM svc_slots").await,
        (SLOT_JOBS * SLOTS_PER_JOB) as i64
    );
    assert_eq!(
        count(
            store,
            "SELECT count(*) FROM svc_runs WHERE state = 'queued'"
        )
        .await,
        SLOT_JOBS as i64
    );
}

/// A paused job's slot is claimed (it is not run elsewhere) and skipped.
async fn assert_a_paused_jobs_slot_is_claimed_and_skipped(
    stores: &[ClusterStore],
    base: DateTime<Utc>,
) {
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

/// Jobs the triggers go to.
const HOOK_JOBS: usize = 25;
/// Triggers offered in all.
const ATTEMPTS: usize = 10_000;
/// Tasks per node offering triggers at once.
const ENQUEUERS_PER_NODE: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_triggers_over_three_nodes_run_once_each_one_at_a_time() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("triggers")).await;
    let keys: Vec<JobKey> = (0..HOOK_JOBS).map(|i| job(&format!("hook-{i}"))).collect();
    let all: Vec<&JobKey> = keys.iter().collect();
    for (n, store) in stores.iter().enumerate() {
        define(store, NODES[n], &all).await;
    }
    let enqueuers_done = Arc::new(AtomicUsize::new(0));
    let enqueuers = spawn_enqueuers(&stores, &enqueuers_done);
    // One claimer per node: claims what it can, finishes it, until the enqueuers are done
    // and nothing is left queued.
    let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
    let claimers: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(n, store)| {
            tokio::spawn(claim_until_drained(
                store.clone(),
                NODES[n],
                enqueuers_done.clone(),
                in_flight.clone(),
            ))
        })
        .collect();
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
    let accepted_set = assert_the_accepted_ids_are_the_tables(&accepted, &stores[0]).await;
    // Every accepted trigger ran exactly once.
    claimed.sort_unstable();
    let claimed_set: HashSet<i64> = claimed.iter().copied().collect();
    assert_eq!(claimed_set.len(), claimed.len(), "no run was claimed twice");
    assert_eq!(claimed_set, accepted_set, "every accepted trigger was run");
    assert_each_jobs_counters_follow_each_other(&stores[0], accepted.len()).await;
}

/// `ENQUEUERS_PER_NODE` tasks per node offering `ATTEMPTS` triggers in all, each job
/// offered by every node; each counts itself in `done` when it is through, and answers
/// the run IDs accepted and how many found the queue full.
fn spawn_enqueuers(
    stores: &[ClusterStore],
    done: &Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<(Vec<i64>, usize)>> {
    let total_enqueuers = NODES.len() * ENQUEUERS_PER_NODE;
    let mut enqueuers = Vec::new();
    for (n, store) in stores.iter().enumerate() {
        for t in 0..ENQUEUERS_PER_NODE {
            let store = store.clone();
            let done = done.clone();
            let worker = n * ENQUEUERS_PER_NODE + t;
            enqueuers.push(tokio::spawn(async move {
                let mut accepted = Vec::new();
                let mut full = 0usize;
                // Attempts worker, worker + total, ...: 10,000 in all, each job offered
                // by every node.
                for i in (worker..ATTEMPTS).step_by(total_enqueuers) {
                    let key = job(&format!("hook-{}", i % HOOK_JOBS));
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
                done.fetch_add(1, Ordering::SeqCst);
                (accepted, full)
            }));
        }
    }
    enqueuers
}

/// One node's claimer: claims what it can and finishes it, until every enqueuer is
/// `done` and nothing is left queued; answers the run IDs it claimed. No two runs of a
/// job are in flight at once (`in_flight` holds the jobs whose run is claimed).
async fn claim_until_drained(
    store: ClusterStore,
    node: &'static str,
    done: Arc<AtomicUsize>,
    in_flight: Arc<Mutex<HashSet<String>>>,
) -> Vec<i64> {
    let total_enqueuers = NODES.len() * ENQUEUERS_PER_NODE;
    let mut claimed = Vec::new();
    loop {
        let finished_enqueuing = done.load(Ordering::SeqCst) == total_enqueuers;
        let runs = store.claim_runs(node, 4).await.expect("claim_runs");
        if runs.is_empty() {
            if finished_enqueuing {
                let queued: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM svc_runs WHERE state <> 'done'")
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
                .finish_run(run.run_id, node, &RunOutcome::new(RunStatus::Success))
                .await
                .expect("finish");
            assert_eq!(finish, Finish::Recorded, "run {}", run.run_id);
            claimed.push(run.run_id);
        }
    }
}

/// Every accepted trigger has its row, and there is no other row: the run IDs the
/// enqueues returned are exactly the table's, each once (nothing lost, nothing extra, no
/// ID handed out twice). Answers the accepted IDs as a set.
async fn assert_the_accepted_ids_are_the_tables(
    accepted: &[i64],
    store: &ClusterStore,
) -> HashSet<i64> {
    let mut accepted_ids = accepted.to_vec();
    accepted_ids.sort_unstable();
    let stored: Vec<i64> = sqlx::query_scalar("SELECT run_id FROM svc_runs ORDER BY run_id")
        .fetch_all(store.pool())
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
    accepted_set
}

/// Counters per job: 1..n, no gap, no duplicate, every run a success, and the jobs'
/// counters add up to the `accepted` runs. (Neither run IDs nor the database's `now()`
/// order the runs: a sequence value is taken when an insert begins, and `now()` is when a
/// statement's transaction began, before its snapshot; the claimers check that no two
/// runs of a job overlapped.)
async fn assert_each_jobs_counters_follow_each_other(store: &ClusterStore, accepted: usize) {
    let rows = sqlx::query("SELECT id, counter, status FROM svc_runs ORDER BY id, counter")
        .fetch_all(store.pool())
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
    let counters: i64 = count(store, "SELECT sum(counter)::bigint FROM svc_jobs").await;
    assert_eq!(
        counters, accepted as i64,
        "the jobs' counters add up to the runs"
    );
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
async fn a_queued_trigger_wakes_the_one_node_named_and_a_pause_every_node() {
    let pg = PostgresServer::launch();
    let stores = nodes(&pg.create_database("signals")).await;
    let (a, b, c) = (&stores[0], &stores[1], &stores[2]);
    let mut listener = b.listen_as(NODES[1]).await.expect("listen");
    let mut other = c.listen_as(NODES[2]).await.expect("listen");
    let build = job("build");
    // A trigger the accepting node claims itself wakes no one.
    a.enqueue(&build, &trigger(NODES[0], "webhook"))
        .await
        .expect("enqueue");
    // One for another node: the wake comes with the enqueue's commit, to that node alone.
    let other_job = job("deploy");
    a.enqueue_waking(&other_job, &trigger(NODES[0], "webhook"), Some(NODES[1]))
        .await
        .expect("enqueue");
    let heard = tokio::time::timeout(WAIT, listener.recv())
        .await
        .expect("a signal within the wait")
        .expect("a notification");
    assert_eq!(Signal::parse(heard.payload()), Some(Signal::wake(NODES[0])));
    // A refused trigger queues nothing and wakes no one: the next signal is the pause,
    // for both listeners (the third node heard no wake-up before it).
    assert_eq!(
        a.enqueue_waking(&other_job, &trigger(NODES[0], "webhook"), Some(NODES[1]))
            .await
            .expect("enqueue"),
        EnqueueOutcome::QueueFull
    );
    let pause = Signal::about(SignalOp::Pause, &build, NODES[0]);
    a.signal(&pause).await.expect("signal");
    for listener in [&mut listener, &mut other] {
        let heard = tokio::time::timeout(WAIT, listener.recv())
            .await
            .expect("a signal within the wait")
            .expect("a notification");
        let signal = Signal::parse(heard.payload()).expect("readable");
        assert_eq!(signal, pause);
        assert_eq!(signal.job(), Some(build.clone()));
    }
    // A text from a newer release is not a signal this one acts on.
    assert_eq!(Signal::parse(r#"{"op":"drain","node":"x"}"#), None);
    // The listeners hold one of the pools' connections, which closing a pool waits for.
    drop((listener, other));
    for store in &stores {
        store.close().await;
    }
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
