//! cluster-scale: how the cluster store behaves with many nodes and many jobs, measured
//! with the store's own calls (`svc_controller::cluster::ClusterStore`) against a real
//! PostgreSQL, for the scale section of docs/cluster.md.
//!
//! `cluster-scale --url URL [--pg-pid PID] [--jobs N] [--nodes N] [--def-nodes N]
//! [--slot-jobs N] [--slot-nodes N] [--claim-seconds S] [--beat-rounds N]
//! [--notify-rounds N]` runs, on the empty database at URL, in this order:
//!
//! 1. `sync_job_defs` of `--jobs` jobs by `--def-nodes` nodes one after the other (the
//!    first on an empty table, each next one compared with the ones before), then the
//!    first again (a restart) and one node whose definitions differ in 1 %;
//! 2. `claim_slot`: `--slot-jobs` jobs due at once, every slot offered by each of
//!    `--slot-nodes` nodes at once (10 connections each, as a node's pool);
//! 3. `claim_runs` + `finish_run`: one queued run for every job, then `--slot-nodes`
//!    claimers (16 at a time, as a node with `max_job_running = 16`) for
//!    `--claim-seconds`;
//! 4. heartbeats of `--nodes` nodes (a store each, 2 connections) every 5 s for
//!    `--beat-rounds` periods, spread over the period as independent nodes are, then all
//!    at once;
//! 5. `LISTEN/NOTIFY`: each of those nodes listens; one signal, and the time until the
//!    last listener heard it, `--notify-rounds` times;
//! 6. connections and PostgreSQL's memory with all of them open;
//! 7. what each node costs while idle: the pause states read back (every 5 s) and a
//!    poll of the empty queue (every 250 ms).
//!
//! With `--pg-pid` (the postmaster) the CPU time and memory of PostgreSQL's processes
//! are read from /proc. Prints one JSON object; progress goes to standard error. Every
//! loop is bounded in count or time.

use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use svc_controller::cluster::{
    ClusterStore, EnqueueOutcome, JobDef, JobKey, JobKind, NewTrigger, RunOutcome, Signal,
    StoreOptions,
};
use svc_controller::store::state::RunStatus;
use tokio::sync::mpsc;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// How often a node beats (the controller's `HEARTBEAT_EVERY`).
const BEAT_EVERY: Duration = Duration::from_secs(5);
/// What a claimer takes per call: a node with `max_job_running = 16` and all its
/// permits free.
const CLAIM_LIMIT: u32 = 16;
/// Connections of a node's pool in svc-controller (`StoreOptions::default()`).
const NODE_POOL: u32 = 10;
/// Linux's USER_HZ, the unit of /proc/<pid>/stat's times (100 on every architecture
/// Linux runs on today).
const CLK_TCK: f64 = 100.0;

struct Args {
    url: String,
    pg_pid: Option<u32>,
    jobs: usize,
    nodes: usize,
    def_nodes: usize,
    slot_jobs: usize,
    slot_nodes: usize,
    claim_seconds: f64,
    beat_rounds: u32,
    notify_rounds: u32,
}

fn parse_args() -> Res<Args> {
    let mut map: HashMap<String, String> = HashMap::new();
    let mut words = std::env::args().skip(1);
    while let Some(key) = words.next() {
        let Some(name) = key.strip_prefix("--") else {
            return Err(format!("unexpected argument {key:?}").into());
        };
        let value = words.next().ok_or(format!("{key} needs a value"))?;
        map.insert(name.to_string(), value);
    }
    fn num<T: std::str::FromStr>(map: &HashMap<String, String>, key: &str, default: T) -> Res<T> {
        match map.get(key) {
            None => Ok(default),
            Some(text) => text
                .parse()
                .map_err(|_| format!("--{key}: not a number: {text:?}").into()),
        }
    }
    let args = Args {
        url: map.get("url").cloned().ok_or("--url is required")?,
        pg_pid: map.get("pg-pid").map(|v| v.parse()).transpose()?,
        jobs: num(&map, "jobs", 100_000)?,
        nodes: num(&map, "nodes", 100)?,
        def_nodes: num(&map, "def-nodes", 6)?,
        slot_jobs: num(&map, "slot-jobs", 10_000)?,
        slot_nodes: num(&map, "slot-nodes", 3)?,
        claim_seconds: num(&map, "claim-seconds", 10.0)?,
        beat_rounds: num(&map, "beat-rounds", 2)?,
        notify_rounds: num(&map, "notify-rounds", 20)?,
    };
    if args.jobs == 0 || args.nodes < 2 || args.def_nodes == 0 || args.slot_nodes == 0 {
        return Err("--jobs, --def-nodes and --slot-nodes must be > 0, --nodes >= 2".into());
    }
    if args.slot_jobs > args.jobs {
        return Err("--slot-jobs must not exceed --jobs".into());
    }
    Ok(args)
}

fn note(text: &str) {
    eprintln!("cluster-scale: {text}");
}

fn store(url: &str, connections: u32) -> Res<ClusterStore> {
    let options = StoreOptions {
        max_connections: connections,
        // Generous: a wait for a connection is part of what is measured, not a failure.
        acquire_timeout: Duration::from_secs(60),
        ..StoreOptions::default()
    };
    Ok(ClusterStore::new(url, &options)?)
}

fn node_name(n: usize) -> String {
    format!("node-{n:03}")
}

fn job_key(n: usize) -> JobKey {
    JobKey::new(JobKind::Job, format!("s{n:06}"))
}

/// `jobs` definitions; the hash has the length of the real one (SHA-256 in hex). Jobs
/// whose number is below `differ` get another hash (a node whose files differ).
fn defs(jobs: usize, differ: usize) -> Vec<JobDef> {
    (0..jobs)
        .map(|n| JobDef {
            job: job_key(n),
            hash: format!("{:064x}", if n < differ { (n + 1) << 40 } else { n }),
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// p50, p99 and max of `samples` (nearest rank), in ms.
fn stats(samples: &mut [Duration]) -> Value {
    if samples.is_empty() {
        return json!({"count": 0});
    }
    samples.sort();
    let at = |p: f64| {
        let rank = ((p / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
        ms(samples[rank.min(samples.len()) - 1])
    };
    json!({
        "count": samples.len(),
        "p50_ms": at(50.0),
        "p99_ms": at(99.0),
        "max_ms": ms(samples[samples.len() - 1]),
    })
}

async fn scalar_i64(store: &ClusterStore, sql: &str) -> Res<i64> {
    Ok(sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(store.pool())
        .await?)
}

/// PostgreSQL's processes: the postmaster and its children.
fn pg_pids(postmaster: u32) -> Vec<u32> {
    let mut pids = vec![postmaster];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if stat_fields(pid)
            .is_some_and(|f| f.get(1).and_then(|p| p.parse().ok()) == Some(postmaster))
        {
            pids.push(pid);
        }
    }
    pids
}

/// The fields of /proc/<pid>/stat after the command name (state first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// CPU seconds (user + system) used so far by process `pid`.
fn process_cpu(pid: u32) -> Option<f64> {
    let f = stat_fields(pid)?;
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Some((tick(11) + tick(12)) / CLK_TCK)
}

/// CPU seconds (user + system) used so far by each of PostgreSQL's processes.
struct PgCpu(HashMap<u32, f64>);

impl PgCpu {
    fn read(postmaster: Option<u32>) -> Option<PgCpu> {
        let pids = pg_pids(postmaster?);
        Some(PgCpu(
            pids.into_iter()
                .filter_map(|pid| Some((pid, process_cpu(pid)?)))
                .collect(),
        ))
    }

    /// CPU seconds used between `self` and `later`: by the processes alive at both
    /// reads, and all of it by those started meanwhile. A backend that ended meanwhile
    /// is left out (its time cannot be read any more), so a window keeps the
    /// connections it measures open to its end.
    fn since(&self, later: &PgCpu) -> f64 {
        later
            .0
            .iter()
            .map(|(pid, cpu)| cpu - self.0.get(pid).copied().unwrap_or(0.0))
            .sum()
    }
}

/// PostgreSQL's CPU seconds since `before` (with `--pg-pid`).
fn pg_cpu_since(postmaster: Option<u32>, before: &Option<PgCpu>) -> Option<f64> {
    Some(before.as_ref()?.since(&PgCpu::read(postmaster)?))
}

/// Proportional set size (KiB) of PostgreSQL's processes, and how many there are: the
/// memory the server costs, shared buffers counted once.
fn pg_pss(postmaster: Option<u32>) -> Option<(u64, usize)> {
    let pids = pg_pids(postmaster?);
    let mut total = 0;
    for pid in &pids {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else {
            continue;
        };
        if let Some(kb) = text
            .lines()
            .find_map(|line| line.strip_prefix("Pss:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        {
            total += kb;
        }
    }
    Some((total, pids.len()))
}

fn trigger(node: &str) -> NewTrigger {
    NewTrigger {
        accepted_by: node.to_string(),
        attempt: 1,
        payload: json!({"cause": "bench"}),
    }
}

/// Step 1: each node's `sync_job_defs` of all jobs.
async fn sync_defs(args: &Args, admin: &ClusterStore) -> Res<Value> {
    let all = defs(args.jobs, 0);
    let mut per_node = Vec::new();
    for n in 0..args.def_nodes {
        let node = node_name(n);
        admin.register_node(&node, CLAIM_LIMIT).await?;
        let start = Instant::now();
        let drift = admin.sync_job_defs(&node, &all).await?;
        let took = start.elapsed();
        if !drift.is_empty() {
            return Err(format!("{node}: unexpected drift with equal definitions").into());
        }
        note(&format!(
            "sync_job_defs of {} jobs by {node}: {} ms",
            args.jobs,
            ms(took)
        ));
        per_node.push(ms(took));
    }
    let start = Instant::now();
    admin.sync_job_defs(&node_name(0), &all).await?;
    let restart = start.elapsed();
    note(&format!(
        "sync_job_defs again by {} (a restart): {} ms",
        node_name(0),
        ms(restart)
    ));
    // A node whose files differ in 1 % of the jobs: it is told which, with whom.
    let odd = node_name(args.def_nodes);
    let differ = (args.jobs / 100).max(1);
    admin.register_node(&odd, CLAIM_LIMIT).await?;
    let start = Instant::now();
    let drift = admin.sync_job_defs(&odd, &defs(args.jobs, differ)).await?;
    let differing = start.elapsed();
    if drift.differ.len() != differ {
        return Err(format!(
            "{odd}: {} jobs reported differing, not {differ}",
            drift.differ.len()
        )
        .into());
    }
    note(&format!(
        "sync_job_defs by {odd} with {differ} differing: {} ms",
        ms(differing)
    ));
    let rows = scalar_i64(admin, "SELECT count(*) FROM svc_job_defs").await?;
    let bytes = scalar_i64(admin, "SELECT pg_total_relation_size('svc_job_defs')").await?;
    Ok(json!({
        "jobs": args.jobs,
        "nodes_ms": per_node,
        "restart_ms": ms(restart),
        "differing_jobs": differ,
        "differing_ms": ms(differing),
        "def_rows": rows,
        "def_table_bytes": bytes,
        "nodes_with_defs": args.def_nodes + 1,
    }))
}

/// Step 2: `slot_jobs` jobs due at the same instant, each slot offered by every node.
async fn claim_slots(args: &Args) -> Res<Value> {
    // A slot none of the earlier steps used: the next whole minute.
    let slot: DateTime<Utc> = DateTime::from_timestamp((Utc::now().timestamp() / 60 + 1) * 60, 0)
        .ok_or("slot time out of range")?;
    let stores: Vec<ClusterStore> = (0..args.slot_nodes)
        .map(|_| store(&args.url, NODE_POOL))
        .collect::<Res<_>>()?;
    let cpu0 = PgCpu::read(args.pg_pid);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (n, node_store) in stores.iter().enumerate() {
        let node_store = node_store.clone();
        let jobs = args.slot_jobs;
        // The engine spawns one task per due job and the pool's 10 connections bound how
        // many run together: 10 workers per node do the same without counting the wait
        // for a connection in each offer's latency.
        tasks.push(tokio::spawn(async move {
            let next = std::sync::Arc::new(AtomicUsize::new(0));
            let mut workers = Vec::new();
            for _ in 0..NODE_POOL {
                let (node_store, next) = (node_store.clone(), next.clone());
                let trigger = trigger(&node_name(n));
                workers.push(tokio::spawn(async move {
                    let (mut won, mut latencies) = (0usize, Vec::new());
                    loop {
                        let job = next.fetch_add(1, Ordering::Relaxed);
                        if job >= jobs {
                            break;
                        }
                        let began = Instant::now();
                        let claim = node_store.claim_slot(&job_key(job), slot, &trigger).await?;
                        latencies.push(began.elapsed());
                        won += usize::from(claim.is_ours());
                    }
                    Res::Ok((won, latencies))
                }));
            }
            let (mut won, mut latencies) = (0usize, Vec::with_capacity(jobs));
            for worker in workers {
                let (w, mut l) = worker.await??;
                won += w;
                latencies.append(&mut l);
            }
            Res::Ok((won, latencies))
        }));
    }
    let mut won = Vec::new();
    let mut latencies = Vec::new();
    for task in tasks {
        let (w, mut l) = task.await??;
        won.push(w);
        latencies.append(&mut l);
    }
    let took = start.elapsed();
    let cpu = pg_cpu_since(args.pg_pid, &cpu0);
    let total: usize = won.iter().sum();
    if total != args.slot_jobs {
        return Err(format!("{total} slots won for {} jobs", args.slot_jobs).into());
    }
    let offers = args.slot_jobs * args.slot_nodes;
    note(&format!(
        "claim_slot: {} jobs due at once, offered by {} nodes: {} ms ({:.0} offers/s), won {won:?}",
        args.slot_jobs,
        args.slot_nodes,
        ms(took),
        offers as f64 / took.as_secs_f64()
    ));
    for s in &stores {
        s.close().await;
    }
    Ok(json!({
        "jobs": args.slot_jobs,
        "nodes": args.slot_nodes,
        "offers": offers,
        "all_ms": ms(took),
        "offers_per_sec": offers as f64 / took.as_secs_f64(),
        "slots_per_sec": args.slot_jobs as f64 / took.as_secs_f64(),
        "won_per_node": won,
        "offer_latency": stats(&mut latencies),
        "pg_cpu_s": cpu,
    }))
}

/// Step 3: a queued run for every job, then claimers taking and finishing them.
async fn claim_runs(args: &Args, admin: &ClusterStore) -> Res<Value> {
    // The queue is filled in one statement (the step measures claims, not enqueues);
    // the enqueue itself is timed below with real calls.
    let filled = sqlx::query(
        "INSERT INTO svc_runs (kind, id, state, trigger, attempt, accepted_by, accepted_at)
         SELECT kind, id, 'queued', '{}'::jsonb, 1, 'bench', now() FROM svc_jobs
         ON CONFLICT (kind, id) WHERE state = 'queued' DO NOTHING",
    )
    .execute(admin.pool())
    .await?
    .rows_affected();
    sqlx::query("ANALYZE").execute(admin.pool()).await?;
    let queued = scalar_i64(
        admin,
        "SELECT count(*) FROM svc_runs WHERE state = 'queued'",
    )
    .await?;
    note(&format!(
        "{queued} runs queued ({filled} added in one statement)"
    ));
    let stores: Vec<ClusterStore> = (0..args.slot_nodes)
        .map(|_| store(&args.url, NODE_POOL))
        .collect::<Res<_>>()?;
    let window = Duration::from_secs_f64(args.claim_seconds);
    let cpu0 = PgCpu::read(args.pg_pid);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (n, node_store) in stores.iter().enumerate() {
        let node_store = node_store.clone();
        tasks.push(tokio::spawn(async move {
            let node = node_name(n);
            let done = RunOutcome::new(RunStatus::Success);
            let (mut claims, mut finishes, mut runs) = (Vec::new(), Vec::new(), 0usize);
            // Bounded by time and, should claims come back empty, by count.
            while start.elapsed() < window && claims.len() < 100_000 {
                let began = Instant::now();
                let claimed = node_store.claim_runs(&node, CLAIM_LIMIT).await?;
                claims.push(began.elapsed());
                runs += claimed.len();
                // The ends come from runs that ended at different times: concurrently.
                let finished: Vec<_> = claimed
                    .iter()
                    .map(|run| {
                        let node_store = node_store.clone();
                        let (node, done) = (node.clone(), done.clone());
                        let run_id = run.run_id;
                        tokio::spawn(async move {
                            let began = Instant::now();
                            node_store.finish_run(run_id, &node, &done).await?;
                            Res::Ok(began.elapsed())
                        })
                    })
                    .collect();
                for handle in finished {
                    finishes.push(handle.await??);
                }
            }
            Res::Ok((claims, finishes, runs))
        }));
    }
    let (mut claims, mut finishes, mut runs) = (Vec::new(), Vec::new(), 0);
    for task in tasks {
        let (mut c, mut f, r) = task.await??;
        claims.append(&mut c);
        finishes.append(&mut f);
        runs += r;
    }
    let took = start.elapsed();
    let cpu = pg_cpu_since(args.pg_pid, &cpu0);
    note(&format!(
        "claim_runs: {runs} runs claimed and finished by {} nodes in {} ms ({:.0} runs/s)",
        args.slot_nodes,
        ms(took),
        runs as f64 / took.as_secs_f64()
    ));

    // Enqueue with real calls while 100,000 jobs are known: jobs whose run was just
    // finished have room in their one-slot queue again.
    let free: Vec<(String,)> = sqlx::query_as(
        "SELECT j.id FROM svc_jobs j WHERE NOT EXISTS
           (SELECT 1 FROM svc_runs r WHERE r.kind = j.kind AND r.id = j.id AND r.state = 'queued')
         ORDER BY j.id LIMIT 2000",
    )
    .fetch_all(admin.pool())
    .await?;
    let enqueuer = store(&args.url, NODE_POOL)?;
    let free = std::sync::Arc::new(std::sync::Mutex::new(free));
    let start = Instant::now();
    // As many at once as the pool has connections (a node's HTTP handlers wait for a
    // connection beyond that): each latency is the call's, not the wait for the pool.
    let mut handles = Vec::new();
    for _ in 0..NODE_POOL {
        let (enqueuer, free) = (enqueuer.clone(), free.clone());
        handles.push(tokio::spawn(async move {
            let (mut enqueued, mut latencies) = (0usize, Vec::new());
            loop {
                let next = free.lock().map_err(|_| "poisoned")?.pop();
                let Some((id,)) = next else { break };
                let began = Instant::now();
                let outcome = enqueuer
                    .enqueue(&JobKey::new(JobKind::Job, id), &trigger("node-000"))
                    .await?;
                latencies.push(began.elapsed());
                enqueued += usize::from(matches!(outcome, EnqueueOutcome::Enqueued { .. }));
            }
            Res::Ok((enqueued, latencies))
        }));
    }
    let (mut enqueued, mut enqueue_lat) = (0, Vec::new());
    for handle in handles {
        let (n, mut l) = handle.await??;
        enqueued += n;
        enqueue_lat.append(&mut l);
    }
    let enqueue_took = start.elapsed();
    note(&format!(
        "enqueue: {enqueued} triggers in {} ms ({:.0}/s)",
        ms(enqueue_took),
        enqueued as f64 / enqueue_took.as_secs_f64()
    ));
    enqueuer.close().await;

    // Runs left running on the claiming nodes, whose leases the heartbeats renew.
    for (n, s) in stores.iter().enumerate() {
        s.claim_runs(&node_name(n), CLAIM_LIMIT).await?;
        s.close().await;
    }
    let total_runs = scalar_i64(admin, "SELECT count(*) FROM svc_runs").await?;
    Ok(json!({
        "queued_at_start": queued,
        "nodes": args.slot_nodes,
        "limit": CLAIM_LIMIT,
        "runs": runs,
        "seconds": took.as_secs_f64(),
        "runs_per_sec": runs as f64 / took.as_secs_f64(),
        "claim_latency": stats(&mut claims),
        "finish_latency": stats(&mut finishes),
        "pg_cpu_s": cpu,
        "enqueued": enqueued,
        "enqueue_per_sec": enqueued as f64 / enqueue_took.as_secs_f64(),
        "enqueue_latency": stats(&mut enqueue_lat),
        "runs_rows_after": total_runs,
    }))
}

/// Steps 4 to 6: the heartbeats of many nodes, LISTEN/NOTIFY to all of them, and what
/// their connections cost.
async fn many_nodes(args: &Args, admin: &ClusterStore) -> Res<Value> {
    let idle_pss = pg_pss(args.pg_pid);
    let idle_conns = scalar_i64(
        admin,
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'",
    )
    .await?;
    // Two connections each: one for the operations, one held by the listener (a node's
    // listener holds a connection of its pool).
    let stores: Vec<ClusterStore> = (0..args.nodes)
        .map(|_| store(&args.url, 2))
        .collect::<Res<_>>()?;
    // Only the nodes the cluster does not know yet: registering a node again records its
    // running runs as interrupted (a restart), and the claiming nodes' runs are to stay
    // running for their heartbeats to renew.
    let known: Vec<String> = sqlx::query_scalar("SELECT name FROM svc_nodes")
        .fetch_all(admin.pool())
        .await?;
    for (n, s) in stores.iter().enumerate() {
        if !known.contains(&node_name(n)) {
            s.register_node(&node_name(n), CLAIM_LIMIT).await?;
        }
    }

    // Listeners first, so that the heartbeats' window has its backends from start to end.
    let (heard_tx, mut heard_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let mut listeners = Vec::new();
    for (n, s) in stores.iter().enumerate() {
        let mut listener = s.listen().await?;
        let heard_tx = heard_tx.clone();
        listeners.push(tokio::spawn(async move {
            // Ends when the channel's receiver is dropped or the connection fails.
            while let Ok(_note) = listener.recv().await {
                if heard_tx.send((n, Instant::now())).is_err() {
                    break;
                }
            }
        }));
    }
    drop(heard_tx);

    // Heartbeats, each node at its own phase of the period.
    let cpu0 = PgCpu::read(args.pg_pid);
    let xact0 = scalar_i64(
        admin,
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .await?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (n, s) in stores.iter().enumerate() {
        let s = s.clone();
        let rounds = args.beat_rounds;
        let offset = BEAT_EVERY.mul_f64(n as f64 / args.nodes as f64);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for round in 0..rounds {
                tokio::time::sleep_until((start + offset + BEAT_EVERY * round).into()).await;
                let began = Instant::now();
                s.heartbeat(&node_name(n)).await?;
                lat.push(began.elapsed());
            }
            Res::Ok(lat)
        }));
    }
    let mut spread = Vec::new();
    for task in tasks {
        spread.append(&mut task.await??);
    }
    let window = BEAT_EVERY * args.beat_rounds;
    // The window is the periods themselves (the last beats end within it).
    tokio::time::sleep_until((start + window).into()).await;
    let cpu = pg_cpu_since(args.pg_pid, &cpu0);
    let xact = scalar_i64(
        admin,
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .await?
        - xact0;
    note(&format!(
        "heartbeats: {} nodes every {} s, {} rounds: {:?}, PostgreSQL CPU {:?} s in {} s",
        args.nodes,
        BEAT_EVERY.as_secs(),
        args.beat_rounds,
        stats(&mut spread.clone()),
        cpu,
        window.as_secs()
    ));

    // All at once: the worst case, nodes that happen to beat in step.
    let mut burst = Vec::new();
    for _ in 0..3 {
        let mut tasks = Vec::new();
        for (n, s) in stores.iter().enumerate() {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let began = Instant::now();
                s.heartbeat(&node_name(n)).await?;
                Res::Ok(began.elapsed())
            }));
        }
        let began = Instant::now();
        for task in tasks {
            burst.push(task.await??);
        }
        note(&format!(
            "{} heartbeats at once: all done in {} ms",
            args.nodes,
            ms(began.elapsed())
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let running = scalar_i64(
        admin,
        "SELECT count(*) FROM svc_runs WHERE state = 'running'",
    )
    .await?;

    // LISTEN/NOTIFY: one signal, heard by every listener.
    let mut all_heard = Vec::new();
    let mut first_heard = Vec::new();
    let sender = store(&args.url, 1)?;
    for _ in 0..args.notify_rounds {
        let sent = Instant::now();
        sender.signal(&Signal::wake("bench")).await?;
        let mut heard = vec![false; args.nodes];
        let (mut count, mut first, mut last) = (0, None, sent);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while count < args.nodes {
            match tokio::time::timeout_at(deadline, heard_rx.recv()).await {
                Ok(Some((n, at))) => {
                    if !heard[n] {
                        heard[n] = true;
                        count += 1;
                        first.get_or_insert(at);
                        last = last.max(at);
                    }
                }
                _ => {
                    return Err(format!(
                        "only {count} of {} listeners heard the signal within 10 s",
                        args.nodes
                    )
                    .into());
                }
            }
        }
        all_heard.push(last - sent);
        first_heard.push(first.unwrap_or(sent) - sent);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sender.close().await;
    note(&format!(
        "NOTIFY to {} listeners: all heard {:?}",
        args.nodes,
        stats(&mut all_heard.clone())
    ));

    // What they cost PostgreSQL, all connections open.
    let open = scalar_i64(
        admin,
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'",
    )
    .await?;
    let max_connections: i64 = scalar_i64(
        admin,
        "SELECT setting::bigint FROM pg_settings WHERE name = 'max_connections'",
    )
    .await?;
    let reserved: i64 = scalar_i64(
        admin,
        "SELECT setting::bigint FROM pg_settings WHERE name = 'superuser_reserved_connections'",
    )
    .await?;
    let busy_pss = pg_pss(args.pg_pid);
    for listener in &listeners {
        listener.abort();
    }
    for s in &stores {
        s.close().await;
    }
    let per_connection_kb = match (idle_pss, busy_pss) {
        (Some((idle, _)), Some((busy, _))) if open > idle_conns => {
            Some((busy.saturating_sub(idle)) as f64 / (open - idle_conns) as f64)
        }
        _ => None,
    };
    Ok(json!({
        "nodes": args.nodes,
        "beat_every_s": BEAT_EVERY.as_secs(),
        "beat_rounds": args.beat_rounds,
        "running_runs": running,
        "spread": stats(&mut spread),
        "burst": stats(&mut burst),
        "window_s": window.as_secs_f64(),
        "pg_cpu_s": cpu,
        "pg_cpu_share": cpu.map(|c| c / window.as_secs_f64()),
        "commits": xact,
        "notify_all_heard": stats(&mut all_heard),
        "notify_first_heard": stats(&mut first_heard),
        "connections_open": open,
        "connections_before": idle_conns,
        "max_connections": max_connections,
        "superuser_reserved": reserved,
        "pg_pss_idle_kb": idle_pss.map(|p| p.0),
        "pg_pss_open_kb": busy_pss.map(|p| p.0),
        "pg_processes_open": busy_pss.map(|p| p.1),
        "pss_per_connection_kb": per_connection_kb,
        "node_pool": NODE_POOL,
    }))
}

/// Step 7: what every node does while nothing happens, whatever the load: it reads the
/// pause states changed since its last read every 5 s (`pause_changes`; every job's,
/// `paused_states`' work, at start and every 10 minutes) and polls the queue every 250 ms
/// (`claim_runs` on an empty queue). Both are multiplied by the number of nodes.
async fn idle_costs(args: &Args, admin: &ClusterStore) -> Res<Value> {
    // One connection, so that every call runs on the one backend whose CPU time is read.
    let reader = store(&args.url, 1)?;
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(reader.pool())
        .await?;
    let backend_cpu = || {
        args.pg_pid
            .and(u32::try_from(backend).ok())
            .and_then(process_cpu)
    };
    let (mut reads, mut rows) = (Vec::new(), 0);
    let cpu0 = backend_cpu();
    for _ in 0..10 {
        let began = Instant::now();
        rows = reader.paused_states().await?.len();
        reads.push(began.elapsed());
    }
    let read_cpu = backend_cpu().zip(cpu0).map(|(b, a)| (b - a) / 10.0);
    note(&format!(
        "paused_states ({rows} jobs): {:?}",
        stats(&mut reads.clone())
    ));
    // What a node reads every 5 s since the read-back goes by change number: the changes
    // since its mark (one job paused meanwhile), an index probe.
    let mark = reader.pause_changes(None).await?.mark;
    admin.set_paused(&job_key(0), true).await?;
    let (mut deltas, mut delta_rows) = (Vec::new(), 0);
    let cpu0 = backend_cpu();
    for _ in 0..100 {
        let began = Instant::now();
        delta_rows = reader.pause_changes(Some(mark)).await?.changed.len();
        deltas.push(began.elapsed());
    }
    let delta_cpu = backend_cpu().zip(cpu0).map(|(b, a)| (b - a) / 100.0);
    admin.set_paused(&job_key(0), false).await?;
    note(&format!(
        "pause_changes since the last read ({delta_rows} changed): {:?}",
        stats(&mut deltas.clone())
    ));
    // The queue emptied (setup, not measured), as it is between bursts.
    sqlx::query(
        "UPDATE svc_runs SET state = 'done', ended_at = now(), status = 'canceled'
         WHERE state = 'queued'",
    )
    .execute(admin.pool())
    .await?;
    sqlx::query("ANALYZE svc_runs")
        .execute(admin.pool())
        .await?;
    let mut polls = Vec::new();
    let cpu0 = backend_cpu();
    for _ in 0..200 {
        let began = Instant::now();
        let claimed = reader.claim_runs(&node_name(0), CLAIM_LIMIT).await?;
        polls.push(began.elapsed());
        if !claimed.is_empty() {
            return Err("a run was claimed from an emptied queue".into());
        }
    }
    let poll_cpu = backend_cpu().zip(cpu0).map(|(b, a)| (b - a) / 200.0);
    note(&format!(
        "claim_runs on an empty queue: {:?}",
        stats(&mut polls.clone())
    ));
    reader.close().await;
    let runs_rows = scalar_i64(admin, "SELECT count(*) FROM svc_runs").await?;
    Ok(json!({
        "paused_states_rows": rows,
        "paused_states": stats(&mut reads),
        "paused_states_pg_cpu_ms": read_cpu.map(|c| c * 1000.0),
        "pause_changes": stats(&mut deltas),
        "pause_changes_pg_cpu_ms": delta_cpu.map(|c| c * 1000.0),
        "empty_claim": stats(&mut polls),
        "empty_claim_pg_cpu_ms": poll_cpu.map(|c| c * 1000.0),
        "runs_rows": runs_rows,
    }))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("cluster-scale: {err}");
            std::process::exit(2);
        }
    };
    match run(&args).await {
        Ok(result) => println!("{result}"),
        Err(err) => {
            eprintln!("cluster-scale: FAILED: {err}");
            std::process::exit(1);
        }
    }
}

async fn run(args: &Args) -> Res<Value> {
    let admin = store(&args.url, 4)?;
    admin.migrate().await?;
    let started = Instant::now();
    let defs = sync_defs(args, &admin).await?;
    let slots = claim_slots(args).await?;
    let claims = claim_runs(args, &admin).await?;
    let nodes = many_nodes(args, &admin).await?;
    let idle = idle_costs(args, &admin).await?;
    admin.close().await;
    Ok(json!({
        "sync_job_defs": defs,
        "claim_slot": slots,
        "claim_runs": claims,
        "many_nodes": nodes,
        "idle": idle,
        "seconds": started.elapsed().as_secs_f64(),
    }))
}
