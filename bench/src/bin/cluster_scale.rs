//! cluster-scale: how the cluster store behaves with many nodes and many jobs, measured
//! with the store's own calls (`svc_controller::cluster::ClusterStore`) against a real
//! PostgreSQL, for the scale section of docs/cluster.md.
//!
//! `cluster-scale --url URL [--pg-pid PID] [--jobs N] [--nodes N] [--def-nodes N]
//! [--slot-jobs N] [--slot-nodes N] [--claim-seconds S] [--beat-rounds N]
//! [--notify-rounds N] [--spread-slot-jobs N] [--trigger-rate R] [--trigger-seconds S]
//! [--steps all|spread]` runs, on the empty database at URL, in this order:
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
//!    poll of the empty queue (every 250 ms);
//! 8. `--spread-slot-jobs` timer slots due at once on `--nodes` nodes that all define
//!    them, each node offering what the engine offers: offers per due slot;
//! 9. `--trigger-rate` triggers a second for `--trigger-seconds` on those nodes, each with
//!    its listener and claimer: claims and PostgreSQL CPU per trigger.
//!
//! With `--pg-pid` (the postmaster) the CPU time and memory of PostgreSQL's processes
//! are read from /proc. Prints one JSON object; progress goes to standard error. Every
//! loop is bounded in count or time.
//!
//! The steps are `cluster_scale/queue_steps.rs` (1 to 3), `node_steps.rs` (4 to 7) and
//! `spread_steps.rs` (8, 9; alone with `--steps spread`); the reads of /proc,
//! `pg_procs.rs`.

use std::collections::HashMap;
use std::error::Error;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_controller::cluster::{ClusterStore, JobDef, JobKey, JobKind, NewTrigger, StoreOptions};

#[path = "cluster_scale/node_steps.rs"]
mod node_steps;
#[path = "cluster_scale/pg_procs.rs"]
mod pg_procs;
#[path = "cluster_scale/queue_steps.rs"]
mod queue_steps;
#[path = "cluster_scale/spread_steps.rs"]
mod spread_steps;

use node_steps::{idle_costs, many_nodes};
use queue_steps::{claim_runs, claim_slots, sync_defs};
use spread_steps::{spread_slots, spread_triggers};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// What a claimer takes per call: a node with `max_job_running = 16` and all its
/// permits free.
const CLAIM_LIMIT: u32 = 16;
/// Connections of a node's pool in svc-controller (`StoreOptions::default()`).
const NODE_POOL: u32 = 10;

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
    spread_slot_jobs: usize,
    trigger_rate: f64,
    trigger_seconds: f64,
    /// Only steps 8 and 9 (`spread`), or all.
    only_spread: bool,
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
        spread_slot_jobs: num(&map, "spread-slot-jobs", 1_000)?,
        trigger_rate: num(&map, "trigger-rate", 20.0)?,
        trigger_seconds: num(&map, "trigger-seconds", 10.0)?,
        only_spread: match map.get("steps").map(String::as_str) {
            None | Some("all") => false,
            Some("spread") => true,
            Some(other) => return Err(format!("--steps: all or spread, not {other:?}").into()),
        },
    };
    if args.spread_slot_jobs == 0 || args.trigger_rate <= 0.0 || args.trigger_seconds <= 0.0 {
        return Err("--spread-slot-jobs, --trigger-rate, --trigger-seconds must be > 0".into());
    }
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

fn trigger(node: &str) -> NewTrigger {
    NewTrigger {
        accepted_by: node.to_string(),
        attempt: 1,
        payload: json!({"cause": "bench"}),
    }
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
    if args.only_spread {
        let slots = spread_slots(args).await?;
        let triggers = spread_triggers(args).await?;
        admin.close().await;
        return Ok(json!({
            "spread_slots": slots,
            "spread_triggers": triggers,
            "seconds": started.elapsed().as_secs_f64(),
        }));
    }
    let defs = sync_defs(args, &admin).await?;
    let slots = claim_slots(args).await?;
    let claims = claim_runs(args, &admin).await?;
    let nodes = many_nodes(args, &admin).await?;
    let idle = idle_costs(args, &admin).await?;
    let spread = spread_slots(args).await?;
    let triggers = spread_triggers(args).await?;
    admin.close().await;
    Ok(json!({
        "sync_job_defs": defs,
        "claim_slot": slots,
        "claim_runs": claims,
        "many_nodes": nodes,
        "idle": idle,
        "spread_slots": spread,
        "spread_triggers": triggers,
        "seconds": started.elapsed().as_secs_f64(),
    }))
}
