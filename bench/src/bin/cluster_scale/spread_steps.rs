//! cluster-scale, steps 8 and 9: what one timer slot and one trigger cost PostgreSQL
//! when `--nodes` nodes define the job, each node doing what the controller's engine does
//! (`engine/timer.rs`, `engine/cluster_node.rs`): the offers per due slot, and the claims
//! (with the wake-ups) per trigger.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use svc_controller::cluster::{
    ClusterStore, JobDef, JobKey, JobKind, RunOutcome, SignalOp, SlotOffer,
};
use svc_controller::store::state::RunStatus;
use tokio::sync::Notify;

use super::pg_procs::{PgCpu, pg_cpu_since};
use super::{Args, CLAIM_LIMIT, Res, ms, note, stats, store, trigger};

/// The engine's idle poll of the queue (`CLAIM_POLL` + up to `CLAIM_POLL_JITTER_MS`),
/// doubled after each poll that found nothing, up to `CLAIM_POLL_MAX` (a wake-up's
/// claim leaves it as it is).
const POLL: Duration = Duration::from_millis(250);
const POLL_MAX: Duration = Duration::from_secs(2);
const POLL_JITTER_MS: u64 = 100;

fn spread_node(n: usize) -> String {
    format!("spread-{n:03}")
}

fn spread_job(n: usize) -> JobKey {
    JobKey::new(JobKind::Job, format!("t{n:05}"))
}

/// `nodes` nodes registered, each defining the same `jobs` jobs (a store each, 2
/// connections: one for the operations, one for a listener).
async fn spread_nodes(args: &Args, jobs: usize) -> Res<Vec<ClusterStore>> {
    let defs: Vec<JobDef> = (0..jobs)
        .map(|n| JobDef {
            job: spread_job(n),
            hash: format!("{:064x}", n),
        })
        .collect();
    let mut stores = Vec::new();
    for n in 0..args.nodes {
        let node_store = store(&args.url, 2)?;
        node_store
            .register_node(&spread_node(n), CLAIM_LIMIT)
            .await?;
        node_store.sync_job_defs(&spread_node(n), &defs).await?;
        stores.push(node_store);
    }
    Ok(stores)
}

/// Step 8: `--spread-slot-jobs` jobs due at one instant on `--nodes` nodes that all
/// define them; each node offers what the engine offers.
pub(crate) async fn spread_slots(args: &Args) -> Res<Value> {
    let jobs = args.spread_slot_jobs;
    let stores = spread_nodes(args, jobs).await?;
    // A slot no other step uses: an hour ahead, on the minute.
    let slot: DateTime<Utc> = DateTime::from_timestamp((Utc::now().timestamp() / 60 + 60) * 60, 0)
        .ok_or("slot time out of range")?;
    // Every node beats, as live nodes do every 5 s (registering 100 nodes one after the
    // other takes longer than the 12 s after which a silent node is suspected dead).
    for (n, node_store) in stores.iter().enumerate() {
        node_store.heartbeat(&spread_node(n)).await?;
    }
    let offers = Arc::new(AtomicUsize::new(0));
    let statements = Arc::new(AtomicUsize::new(0));
    let cpu0 = PgCpu::read(args.pg_pid);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (n, node_store) in stores.iter().enumerate() {
        let (node_store, offers, statements) =
            (node_store.clone(), offers.clone(), statements.clone());
        tasks.push(tokio::spawn(async move {
            let me = spread_node(n);
            let trigger = trigger(&me);
            // As the engine's slot offerer: the live nodes as they beat (read every 2 s
            // there, once here), then the slots this node owns, all in one transaction;
            // the others' slots are kept aside and dropped once their owner beats.
            let view = node_store.live_nodes().await?;
            let mine: Vec<SlotOffer> = (0..jobs)
                .map(spread_job)
                .filter(|job| view.owner(job, &me) == me)
                .map(|job| SlotOffer {
                    job,
                    slot,
                    trigger: trigger.clone(),
                })
                .collect();
            let began = Instant::now();
            let claims = node_store.claim_slots(&mine).await?;
            let latency = began.elapsed();
            offers.fetch_add(mine.len(), Ordering::Relaxed);
            statements.fetch_add(1 + usize::from(!mine.is_empty()), Ordering::Relaxed);
            let won = claims.iter().filter(|claim| claim.is_ours()).count();
            Res::Ok((won, vec![latency]))
        }));
    }
    let (mut won, mut latencies) = (0usize, Vec::new());
    for task in tasks {
        let (w, mut l) = task.await??;
        won += w;
        latencies.append(&mut l);
    }
    let took = start.elapsed();
    let cpu = pg_cpu_since(args.pg_pid, &cpu0);
    if won != jobs {
        return Err(format!("{won} slots won for {jobs} jobs").into());
    }
    let offers = offers.load(Ordering::Relaxed);
    note(&format!(
        "slots at {} nodes: {jobs} due at once, {offers} offers ({:.1} per slot) in {} ms, \
         PostgreSQL CPU {cpu:?} s",
        args.nodes,
        offers as f64 / jobs as f64,
        ms(took)
    ));
    for s in &stores {
        s.close().await;
    }
    Ok(json!({
        "nodes": args.nodes,
        "jobs_due": jobs,
        "offers": offers,
        "offers_per_due_slot": offers as f64 / jobs as f64,
        "transactions": statements.load(Ordering::Relaxed),
        "all_ms": ms(took),
        "batch_latency": stats(&mut latencies),
        "pg_cpu_s": cpu,
        "pg_cpu_ms_per_due_slot": cpu.map(|c| c * 1000.0 / jobs as f64),
    }))
}

/// What the simulated claimers did.
#[derive(Default)]
struct Claims {
    calls: AtomicUsize,
    empty: AtomicUsize,
    runs: AtomicUsize,
}

/// A node's claimer as the engine's: claims on a wake-up or at its poll, a claim under
/// way absorbing the wake-ups that come meanwhile, and finishes what it claimed.
async fn claimer(
    node_store: ClusterStore,
    node: String,
    wake: Arc<Notify>,
    claims: Arc<Claims>,
    stop: Arc<AtomicBool>,
) -> Res<()> {
    let done = RunOutcome::new(RunStatus::Success);
    let (mut empty_polls, mut woken) = (0u32, false);
    while !stop.load(Ordering::Relaxed) {
        let runs = node_store.claim_runs(&node, CLAIM_LIMIT).await?;
        claims.calls.fetch_add(1, Ordering::Relaxed);
        if runs.is_empty() {
            claims.empty.fetch_add(1, Ordering::Relaxed);
        }
        claims.runs.fetch_add(runs.len(), Ordering::Relaxed);
        for run in &runs {
            node_store.finish_run(run.run_id, &node, &done).await?;
        }
        if runs.len() == CLAIM_LIMIT as usize {
            continue;
        }
        let jitter = Duration::from_millis(rand_ms(POLL_JITTER_MS));
        if !woken {
            empty_polls = if runs.is_empty() {
                empty_polls.saturating_add(1)
            } else {
                0
            };
        }
        let poll = POLL.saturating_mul(1 << empty_polls.min(3)).min(POLL_MAX);
        woken = tokio::select! {
            _ = tokio::time::sleep(poll + jitter) => false,
            _ = wake.notified() => true,
        };
    }
    Ok(())
}

/// A cheap pseudo-random number of milliseconds up to `max` (no generator needed: the
/// nodes only must not poll in step).
fn rand_ms(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    nanos % (max + 1)
}

/// Step 9: `--nodes` nodes that define the same jobs, each with its listener and its
/// claimer; first idle for a few seconds (their polls alone), then `--trigger-rate`
/// triggers a second for `--trigger-seconds`, accepted round robin by the nodes.
pub(crate) async fn spread_triggers(args: &Args) -> Res<Value> {
    let jobs = (args.trigger_rate * args.trigger_seconds).ceil() as usize;
    let stores = spread_nodes(args, jobs.max(1)).await?;
    let claims = Arc::new(Claims::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let mut wakes = Vec::new();
    for (n, node_store) in stores.iter().enumerate() {
        let wake = Arc::new(Notify::new());
        wakes.push(wake.clone());
        let mut listener = node_store.listen_as(&spread_node(n)).await?;
        let listen_wake = wake.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok(note) = listener.recv().await {
                let signal = svc_controller::cluster::Signal::parse(note.payload());
                if signal.is_some_and(|s| matches!(s.op, SignalOp::Wake | SignalOp::Resume)) {
                    listen_wake.notify_one();
                }
            }
        }));
        tasks.push(tokio::spawn({
            let (node_store, claims, stop) = (node_store.clone(), claims.clone(), stop.clone());
            async move {
                if let Err(err) = claimer(node_store, spread_node(n), wake, claims, stop).await {
                    note(&format!("a claimer failed: {err}"));
                }
            }
        }));
    }
    // Idle: the polls alone, to tell them from what the triggers cost.
    let idle = Duration::from_secs(5);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (calls0, cpu0) = (
        claims.calls.load(Ordering::Relaxed),
        PgCpu::read(args.pg_pid),
    );
    tokio::time::sleep(idle).await;
    let idle_cpu = pg_cpu_since(args.pg_pid, &cpu0);
    let idle_calls = claims.calls.load(Ordering::Relaxed) - calls0;

    let every = Duration::from_secs_f64(1.0 / args.trigger_rate);
    let (calls0, empty0) = (
        claims.calls.load(Ordering::Relaxed),
        claims.empty.load(Ordering::Relaxed),
    );
    let cpu0 = PgCpu::read(args.pg_pid);
    let start = Instant::now();
    let mut enqueued = 0usize;
    for job in 0..jobs {
        tokio::time::sleep_until((start + every * job as u32).into()).await;
        let n = job % stores.len();
        let outcome = stores[n]
            .enqueue(&spread_job(job), &trigger(&spread_node(n)))
            .await?;
        enqueued += usize::from(outcome_enqueued(&outcome));
        // The accepting node has free permits: it claims the run itself and wakes no
        // other node (the engine's `wake_target`); `enqueue` sends no signal.
        wakes[n].notify_one();
    }
    // Until every run is claimed and finished, bounded.
    let deadline = Instant::now() + Duration::from_secs(30);
    while claims.runs.load(Ordering::Relaxed) < enqueued && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = start.elapsed();
    let cpu = pg_cpu_since(args.pg_pid, &cpu0);
    let calls = claims.calls.load(Ordering::Relaxed) - calls0;
    let empty = claims.empty.load(Ordering::Relaxed) - empty0;
    stop.store(true, Ordering::Relaxed);
    for wake in &wakes {
        wake.notify_one();
    }
    for task in &tasks {
        task.abort();
    }
    for s in &stores {
        s.close().await;
    }
    let runs = claims.runs.load(Ordering::Relaxed);
    if runs < enqueued {
        return Err(format!("{runs} runs claimed of {enqueued} triggers within 30 s").into());
    }
    let idle_rate = idle_cpu.map(|c| c / idle.as_secs_f64());
    let poll_share = idle_rate.map(|rate| rate * took.as_secs_f64());
    let per_trigger = cpu.map(|c| c * 1000.0 / enqueued as f64);
    let idle_poll_rate = idle_calls as f64 / idle.as_secs_f64();
    let claims_beyond_polls =
        (calls as f64 - idle_poll_rate * took.as_secs_f64()).max(0.0) / enqueued as f64;
    let beyond_polls = cpu
        .zip(poll_share)
        .map(|(c, p)| (c - p).max(0.0) * 1000.0 / enqueued as f64);
    note(&format!(
        "triggers at {} nodes: {enqueued} in {} ms, {calls} claims ({empty} empty, {:.1} per \
         trigger, {claims_beyond_polls:.2} beyond the idle polls), PostgreSQL CPU \
         {per_trigger:?} ms per trigger ({beyond_polls:?} beyond the idle polls)",
        args.nodes,
        ms(took),
        calls as f64 / enqueued as f64
    ));
    Ok(json!({
        "nodes": args.nodes,
        "rate_per_s": args.trigger_rate,
        "triggers": enqueued,
        "seconds": took.as_secs_f64(),
        "claims": calls,
        "empty_claims": empty,
        "claims_per_trigger": calls as f64 / enqueued as f64,
        "pg_cpu_s": cpu,
        "pg_cpu_ms_per_trigger": per_trigger,
        "claims_per_trigger_beyond_idle_polls": claims_beyond_polls,
        "idle_polls_per_s": idle_poll_rate,
        "idle_pg_cpu_share": idle_rate,
        "pg_cpu_ms_per_trigger_beyond_idle_polls": beyond_polls,
    }))
}

fn outcome_enqueued(outcome: &svc_controller::cluster::EnqueueOutcome) -> bool {
    matches!(
        outcome,
        svc_controller::cluster::EnqueueOutcome::Enqueued { .. }
    )
}
