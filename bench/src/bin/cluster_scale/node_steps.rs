//! cluster-scale, steps 4 to 7: the heartbeats of many nodes, LISTEN/NOTIFY to all of
//! them, what their connections cost, and what every node does while nothing happens.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_controller::cluster::{ClusterStore, Signal};
use tokio::sync::mpsc;

use super::pg_procs::{PgCpu, pg_cpu_since, pg_pss, process_cpu};
use super::{
    Args, CLAIM_LIMIT, NODE_POOL, Res, job_key, ms, node_name, note, scalar_i64, stats, store,
};

/// How often a node beats (the controller's `HEARTBEAT_EVERY`).
const BEAT_EVERY: Duration = Duration::from_secs(5);

/// Steps 4 to 6: the heartbeats of many nodes, LISTEN/NOTIFY to all of them, and what
/// their connections cost.
pub(crate) async fn many_nodes(args: &Args, admin: &ClusterStore) -> Res<Value> {
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
pub(crate) async fn idle_costs(args: &Args, admin: &ClusterStore) -> Res<Value> {
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
