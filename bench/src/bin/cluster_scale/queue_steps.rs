//! cluster-scale, steps 1 to 3: every node's job definitions, timer slots offered by
//! every node at once, and queued runs claimed and finished (and enqueues timed).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use svc_controller::cluster::{ClusterStore, EnqueueOutcome, JobKey, JobKind, RunOutcome};
use svc_controller::store::state::RunStatus;

use super::pg_procs::{PgCpu, pg_cpu_since};
use super::{
    Args, CLAIM_LIMIT, NODE_POOL, Res, defs, job_key, ms, node_name, note, scalar_i64, stats,
    store, trigger,
};

/// Step 1: each node's `sync_job_defs` of all jobs.
pub(crate) async fn sync_defs(args: &Args, admin: &ClusterStore) -> Res<Value> {
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
pub(crate) async fn claim_slots(args: &Args) -> Res<Value> {
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
pub(crate) async fn claim_runs(args: &Args, admin: &ClusterStore) -> Res<Value> {
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
