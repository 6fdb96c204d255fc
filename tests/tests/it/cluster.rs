//! Three real controllers on one real PostgreSQL (`svc_tests::postgres`), as an operator
//! runs a cluster: timer slots fire once each, signed triggers spread over the nodes run
//! once each (accepted = runs), and PostgreSQL stopped for 20 s loses no accepted trigger
//! and runs none twice (a node killed mid-run: `cluster_takeover.rs`). With `SVC_LONG_TESTS` set the figures are the issue's (1,000 slots,
//! 10,000 triggers); without, smaller, so that the README's command stays quick.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use svc_controller::cluster::{ClusterStore, StoreOptions};
use svc_tests::postgres::PostgresServer;
use svc_tests::{TestService, hmac_sha256_hex, job_section, wait_for, wait_until};
use tokio::sync::Mutex;

/// The jobs' own secret, the same on every node (each node generates its own main secret).
pub(crate) const SECRET: &str = "cluster-test-secret";

fn long() -> bool {
    std::env::var_os("SVC_LONG_TESTS").is_some()
}

/// A directory every node's jobs work in: each run makes one entry, so a run done twice
/// shows (`mkdir` of an existing name fails, and the run with it).
pub(crate) struct Shared {
    _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        let dir = tempfile::tempdir().expect("shared dir");
        let path = dir.path().to_path_buf();
        // Jobs may run as an unprivileged user.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .expect("chmod");
        Shared { _dir: dir, path }
    }

    pub(crate) fn entries(&self) -> BTreeSet<String> {
        std::fs::read_dir(&self.path)
            .expect("read the shared dir")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }
}

/// A job that makes `<prefix><what>` in the shared directory: `what` is the request body
/// for a trigger, else the job's ID and run counter.
pub(crate) fn job(name: &str, shared: &Path, timer: Option<&str>, command: &str) -> String {
    let dir = format!("dir_work = {}", shared.display());
    let path = format!("path = /{name}");
    let secret = format!("secret = {SECRET}");
    let command = format!("command = {command}");
    let mut lines = vec![
        dir.as_str(),
        path.as_str(),
        secret.as_str(),
        command.as_str(),
    ];
    if let Some(timer) = timer {
        lines.push(timer);
    }
    job_section(name, &lines)
}

/// Starts `count` controllers on `url`, each with `jobs` (name, file text).
pub(crate) async fn start_nodes(
    url: &str,
    count: usize,
    jobs: &[(String, String)],
) -> Vec<TestService> {
    let mut nodes = Vec::new();
    for n in 0..count {
        let mut builder = TestService::builder()
            .svc("database_url = $SVC_TEST_DATABASE_URL")
            .svc(format!("node_name = node-{n}"))
            .svc("max_job_running = 16")
            .env("SVC_TEST_DATABASE_URL", url);
        for (name, text) in jobs {
            builder = builder.job_file(name, text.clone());
        }
        nodes.push(builder.start().await);
    }
    nodes
}

pub(crate) async fn store(url: &str) -> ClusterStore {
    ClusterStore::new(url, &StoreOptions::default()).expect("store")
}

pub(crate) async fn scalar(store: &ClusterStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(store.pool())
        .await
        .unwrap_or_else(|err| panic!("{sql}: {err}"))
}

/// Every node's output, for a failing assertion.
pub(crate) fn outputs(nodes: &[TestService]) -> String {
    nodes
        .iter()
        .map(|node| format!("{}{}", node.stdout(), node.stderr()))
        .collect::<Vec<_>>()
        .join("\n----\n")
}

pub(crate) async fn launch_postgres(database: &str) -> (PostgresServer, String) {
    let pg = tokio::task::spawn_blocking(PostgresServer::launch)
        .await
        .expect("launch PostgreSQL");
    let url = pg.create_database(database);
    (pg, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_timer_slot_runs_once_across_three_nodes() {
    let (_pg, url) = launch_postgres("svc_timers").await;
    let shared = Shared::new();
    let (jobs, seconds) = if long() { (25, 42) } else { (10, 12) };
    let defs: Vec<(String, String)> = (0..jobs)
        .map(|n| {
            let name = format!("tick{n}");
            let text = job(
                &name,
                &shared.path,
                Some("interval = 1s"),
                "mkdir \"$SVC_JOB_ID-$SVC_JOB_COUNTER\"",
            );
            (name, text)
        })
        .collect();
    let mut nodes = start_nodes(&url, 3, &defs).await;
    let store = store(&url).await;
    let wanted = jobs * seconds;
    wait_until(
        Duration::from_secs(seconds as u64 * 3 + 30),
        "the timer slots to be claimed",
        async || scalar(&store, "SELECT count(*) FROM svc_slots").await >= wanted as i64,
    )
    .await;
    for node in &mut nodes {
        node.stop().await;
    }
    let text = outputs(&nodes);

    // Every run of a timer names its slot (its cause), and that slot is a row of
    // `svc_slots` claimed by the node that queued the run: a run came from a claim,
    // never from a node's own timer, and no slot gave two runs.
    let slots = scalar(&store, "SELECT count(*) FROM svc_slots").await;
    assert!(slots >= wanted as i64, "{slots} slots");
    let runs: Vec<(String, i64, String, String, Option<String>)> = sqlx::query_as(
        "SELECT r.id, r.counter, r.status, r.trigger->>'cause', s.node
         FROM svc_runs r
         LEFT JOIN svc_slots s
           ON s.kind = r.kind AND s.id = r.id
          AND 'slot ' || to_char(s.slot AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')
              = r.trigger->>'cause'
          AND s.node = r.accepted_by
         WHERE r.state = 'done'",
    )
    .fetch_all(store.pool())
    .await
    .expect("timer runs");
    let unclaimed: Vec<_> = runs.iter().filter(|run| run.4.is_none()).collect();
    assert!(
        unclaimed.is_empty(),
        "runs without their claimed slot: {unclaimed:?}\n{text}"
    );
    let causes: BTreeSet<(&str, &str)> =
        runs.iter().map(|r| (r.0.as_str(), r.3.as_str())).collect();
    assert_eq!(causes.len(), runs.len(), "a slot ran twice\n{text}");
    // Each run was executed once: the entries are exactly the successful runs' (job,
    // counter), and nothing failed (a second `mkdir` of one name would). The stop
    // cancels the last runs, which may or may not have made their entry.
    let failed: Vec<_> = runs
        .iter()
        .filter(|r| r.2 != "success" && r.2 != "canceled")
        .collect();
    assert!(failed.is_empty(), "{failed:?}\n{text}");
    let succeeded: BTreeSet<String> = runs
        .iter()
        .filter(|r| r.2 == "success")
        .map(|r| format!("{}-{}", r.0, r.1))
        .collect();
    let canceled: BTreeSet<String> = runs
        .iter()
        .filter(|r| r.2 == "canceled")
        .map(|r| format!("{}-{}", r.0, r.1))
        .collect();
    let entries = shared.entries();
    assert!(succeeded.is_subset(&entries), "{text}");
    assert!(
        entries.difference(&succeeded).all(|e| canceled.contains(e)),
        "entries of runs that are not recorded: {:?}\n{text}",
        entries.difference(&succeeded).collect::<Vec<_>>()
    );
    // Every job ran. How many slots ran (a tick that finds its job running is skipped)
    // and on which nodes depends on the machine's speed: printed, not asserted.
    let jobs_that_ran: BTreeSet<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(jobs_that_ran.len(), jobs, "{text}");
    let spread: Vec<(String, i64)> =
        sqlx::query_as("SELECT node, count(*) FROM svc_slots GROUP BY node ORDER BY node")
            .fetch_all(store.pool())
            .await
            .expect("spread");
    eprintln!(
        "{} runs of {slots} slots; slots claimed per node: {spread:?}",
        runs.len()
    );
    store.close().await;
}

/// Sends `total` signed triggers, round robin over `nodes` and `jobs`, `parallel` at a
/// time, each with a body of its own; returns the bodies accepted (200) and the status
/// of every answer.
async fn send_triggers(
    nodes: &[TestService],
    jobs: usize,
    bodies: impl Iterator<Item = String> + Send + 'static,
    parallel: usize,
    stop: Arc<AtomicBool>,
) -> (BTreeSet<String>, Vec<(u16, bool)>) {
    let bodies = Arc::new(Mutex::new(bodies));
    let accepted = Arc::new(Mutex::new(BTreeSet::new()));
    let answers = Arc::new(Mutex::new(Vec::new()));
    let bases: Vec<String> = nodes.iter().map(TestService::base_url).collect();
    let client = trigger_client();
    let mut tasks = Vec::new();
    for _ in 0..parallel {
        let (bodies, accepted, answers, bases, client, stop) = (
            bodies.clone(),
            accepted.clone(),
            answers.clone(),
            bases.clone(),
            client.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            loop {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Some(body) = bodies.lock().await.next() else {
                    return;
                };
                n += 1;
                let index: usize = body.trim_start_matches('t').parse().unwrap_or(n);
                let base = &bases[index % bases.len()];
                let job = (index / bases.len()) % jobs;
                let answer = post_trigger(&client, base, job, &body).await;
                if answer.0 == 200 {
                    accepted.lock().await.insert(body);
                }
                answers.lock().await.push(answer);
            }
        }));
    }
    for task in tasks {
        task.await.expect("sender");
    }
    let accepted = accepted.lock().await.clone();
    let answers = answers.lock().await.clone();
    (accepted, answers)
}

pub(crate) fn trigger_jobs(shared: &Path, jobs: usize) -> Vec<(String, String)> {
    (0..jobs)
        .map(|n| {
            let name = format!("job{n}");
            let text = job(
                &name,
                shared,
                None,
                "mkdir \"$(cat \"$SVC_REQUEST_BODY\")\"",
            );
            (name, text)
        })
        .collect()
}

/// Waits until every run the cluster queued is done, and returns the shared entries.
pub(crate) async fn all_runs_done(store: &ClusterStore, timeout: Duration) {
    wait_until(timeout, "every queued and running run to end", async || {
        scalar(store, "SELECT count(*) FROM svc_runs WHERE state <> 'done'").await == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_triggers_over_three_nodes_run_once_each() {
    let (_pg, url) = launch_postgres("svc_triggers").await;
    let shared = Shared::new();
    let jobs = 40;
    let total = if long() { 10_000 } else { 2_000 };
    let mut nodes = start_nodes(&url, 3, &trigger_jobs(&shared.path, jobs)).await;
    let store = store(&url).await;
    let bodies = (0..total).map(|n| format!("t{n}"));
    let (accepted, answers) =
        send_triggers(&nodes, jobs, bodies, 24, Arc::new(AtomicBool::new(false))).await;
    all_runs_done(&store, Duration::from_secs(120)).await;
    let text = outputs(&nodes);
    for node in &mut nodes {
        node.stop().await;
    }
    // Every answer is accepted, or refused because the job's one-slot queue was full.
    let other: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status != 200 && *status != 429)
        .collect();
    assert!(other.is_empty(), "unexpected answers {other:?}\n{text}");
    assert_eq!(answers.len(), total);
    // Accepted = runs, the same bodies, none twice (a second `mkdir` would have failed).
    assert!(!accepted.is_empty());
    assert_eq!(shared.entries(), accepted, "{text}");
    let failed = scalar(
        &store,
        "SELECT count(*) FROM svc_runs WHERE status <> 'success'",
    )
    .await;
    assert_eq!(failed, 0, "{text}");
    let runs = scalar(&store, "SELECT count(*) FROM svc_runs").await;
    assert_eq!(runs as usize, accepted.len());
    // Each job's run counters are 1..n, each given once.
    let gaps = scalar(
        &store,
        "SELECT count(*) FROM (SELECT id, max(counter) AS top, count(*) AS n,
                                      count(DISTINCT counter) AS d
                               FROM svc_runs GROUP BY id) c
         WHERE top <> n OR d <> n",
    )
    .await;
    assert_eq!(gaps, 0, "{text}");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_for_20_s_loses_no_accepted_trigger_and_runs_none_twice() {
    let (mut pg, url) = launch_postgres("svc_outage").await;
    let shared = Shared::new();
    let jobs = 12;
    let mut nodes = start_nodes(&url, 3, &trigger_jobs(&shared.path, jobs)).await;
    let stop = Arc::new(AtomicBool::new(false));
    // Triggers flow before, during and after the outage.
    let sender = {
        let bases: Vec<String> = nodes.iter().map(TestService::base_url).collect();
        tokio::spawn(send_to(bases, jobs, stop.clone()))
    };
    let store_before = store(&url).await;
    wait_until(
        Duration::from_secs(30),
        "some runs before the outage",
        async || {
            scalar(
                &store_before,
                "SELECT count(*) FROM svc_runs WHERE state = 'done'",
            )
            .await
                >= 20
        },
    )
    .await;
    store_before.close().await;
    tokio::task::block_in_place(|| pg.stop());
    // The outage: its length is the scenario, not a wait for something.
    tokio::time::sleep(Duration::from_secs(20)).await;
    tokio::task::block_in_place(|| pg.start());
    let store = store(&url).await;
    let done_at_restart =
        scalar(&store, "SELECT count(*) FROM svc_runs WHERE state = 'done'").await;
    wait_until(
        Duration::from_secs(60),
        "runs again after the outage",
        async || {
            scalar(&store, "SELECT count(*) FROM svc_runs WHERE state = 'done'").await
                >= done_at_restart + 20
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let (accepted, answers) = sender.await.expect("sender");
    all_runs_done(&store, Duration::from_secs(90)).await;
    let text = outputs(&nodes);
    for node in &mut nodes {
        node.stop().await;
    }
    // While the database was away, triggers were refused with 503 and `Retry-After: 5`.
    let unavailable: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status == 503)
        .collect();
    assert!(!unavailable.is_empty(), "no 503 during the outage\n{text}");
    assert!(unavailable.iter().all(|(_, retry)| *retry));
    let other: Vec<_> = answers
        .iter()
        .filter(|(status, _)| ![200, 429, 503].contains(status))
        .collect();
    assert!(other.is_empty(), "unexpected answers {other:?}\n{text}");
    // No accepted trigger lost; none ran twice (a second `mkdir` fails its run). A
    // trigger answered 503 may still have been queued when the connection broke
    // between its commit and its answer: it runs once too.
    let entries = shared.entries();
    let lost: Vec<_> = accepted.difference(&entries).collect();
    assert!(lost.is_empty(), "accepted and not run: {lost:?}\n{text}");
    let failed = scalar(
        &store,
        "SELECT count(*) FROM svc_runs WHERE status <> 'success'",
    )
    .await;
    assert_eq!(failed, 0, "{text}");
    store.close().await;
}

/// Sends triggers round robin until `stop`, one at a time per sender; returns the
/// accepted bodies and every answer.
async fn send_to(
    bases: Vec<String>,
    jobs: usize,
    stop: Arc<AtomicBool>,
) -> (BTreeSet<String>, Vec<(u16, bool)>) {
    let client = trigger_client();
    let mut accepted = BTreeSet::new();
    let mut answers = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let body = format!("o{n}");
        let base = &bases[n % bases.len()];
        let job = (n / bases.len()) % jobs;
        n += 1;
        let answer = post_trigger(&client, base, job, &body).await;
        if answer.0 == 200 {
            accepted.insert(body);
        }
        if answer.0 == 503 {
            // As a client honouring Retry-After would, without waiting the whole of it.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        answers.push(answer);
    }
    (accepted, answers)
}

/// A client for the triggers: it lets a pooled connection go after 5 s idle, before the
/// service closes it (10 s), so that no request is sent on a connection the service is
/// closing at that moment (a reset no answer explains).
pub(crate) fn trigger_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .expect("a client")
}

/// Posts `body` to `job<job>`'s trigger path on `base`, signed with the jobs' secret:
/// the answer's status (0 when none came) and whether it said `Retry-After: 5`.
pub(crate) async fn post_trigger(
    client: &reqwest::Client,
    base: &str,
    job: usize,
    body: &str,
) -> (u16, bool) {
    let signature = hmac_sha256_hex(SECRET, body);
    let response = client
        .post(format!("{base}/svc/api/job/run/job{job}"))
        .header("x-svc-sign", signature)
        .body(body.to_string())
        // A bound for a machine loaded by three nodes, PostgreSQL and 24 senders.
        .timeout(Duration::from_secs(120))
        .send()
        .await;
    match response {
        Ok(response) => (
            response.status().as_u16(),
            response
                .headers()
                .get("retry-after")
                .is_some_and(|value| value == "5"),
        ),
        Err(err) => {
            // The test fails on it; the reason goes with it.
            eprintln!("trigger {body} of job{job} to {base}: no answer: {err:?}");
            (0, false)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_sent_again_to_another_node_is_not_run_again() {
    let (_pg, url) = launch_postgres("svc_replay").await;
    let shared = Shared::new();
    let dir = format!("dir_work = {}", shared.path.display());
    let secret = format!("secret = {SECRET}");
    let defs = vec![(
        "hook".to_string(),
        job_section(
            "hook",
            &[
                &dir,
                "path = /hook",
                "auth_kind = github",
                &secret,
                "command = mkdir \"run-$SVC_DELIVERY\"",
            ],
        ),
    )];
    let mut nodes = start_nodes(&url, 2, &defs).await;
    let body = r#"{"ref":"refs/heads/main","after":"0123456789abcdef0123456789abcdef01234567"}"#;
    let signature = format!("sha256={}", hmac_sha256_hex(SECRET, body));
    let headers = [
        ("X-Hub-Signature-256", signature.as_str()),
        ("X-GitHub-Event", "push"),
        ("X-GitHub-Delivery", "delivery-1"),
    ];
    let first = nodes[0]
        .trigger_unsigned("/hook", body.as_bytes(), &headers)
        .await;
    first.assert_status(200);
    // The code host sends it again; a load balancer hands it to the other node.
    let again = nodes[1]
        .trigger_unsigned("/hook", body.as_bytes(), &headers)
        .await;
    again.assert_status(200);
    assert_eq!(again.message(), "duplicate delivery: not run again");
    let store = store(&url).await;
    all_runs_done(&store, Duration::from_secs(30)).await;
    assert_eq!(scalar(&store, "SELECT count(*) FROM svc_runs").await, 1);
    assert_eq!(
        shared.entries(),
        BTreeSet::from(["run-delivery-1".to_string()])
    );
    for node in &mut nodes {
        node.stop().await;
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_cancel_reach_every_node() {
    let (_pg, url) = launch_postgres("svc_signals").await;
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

    // Paused through node 0: node 1 shows it, and refuses its triggers (412).
    nodes[0].pause("quiet").await.assert_status(200);
    let started = std::time::Instant::now();
    wait_until(
        Duration::from_secs(10),
        "node 1 to show the pause",
        async || nodes[1].job_status("quiet").await == "paused",
    )
    .await;
    eprintln!(
        "the pause reached the other node in {:?}",
        started.elapsed()
    );
    let client = trigger_client();
    let signature = hmac_sha256_hex(SECRET, "p");
    let refused = client
        .post(format!("{}/svc/api/job/run/quiet", nodes[1].base_url()))
        .header("x-svc-sign", signature)
        .body("p")
        .send()
        .await
        .expect("trigger");
    assert_eq!(refused.status().as_u16(), 412);
    // Resumed through node 1: node 0 shows it.
    nodes[1].resume("quiet").await.assert_status(200);
    wait_until(
        Duration::from_secs(10),
        "node 0 to show the resume",
        async || nodes[0].job_status("quiet").await != "paused",
    )
    .await;

    // A run of slow, wherever it runs, is cancelled through the other node.
    let signature = hmac_sha256_hex(SECRET, "s");
    let accepted = client
        .post(format!("{}/svc/api/job/run/slow", nodes[0].base_url()))
        .header("x-svc-sign", signature)
        .body("s")
        .send()
        .await
        .expect("trigger");
    assert_eq!(accepted.status().as_u16(), 200);
    let (run_id, runner): (i64, String) =
        wait_for(Duration::from_secs(30), "the run of slow", async || {
            sqlx::query_as("SELECT run_id, node FROM svc_runs WHERE state = 'running'")
                .fetch_optional(store.pool())
                .await
                .expect("running")
        })
        .await;
    let other = if runner == "node-0" { 1 } else { 0 };
    // The run's command is under way before the cancel (else it ends canceled anyway).
    wait_until(Duration::from_secs(30), "slow's run to start", async || {
        nodes[1 - other].job_status("slow").await == "started"
    })
    .await;
    nodes[other].cancel("slow").await.assert_status(200);
    let status: String = wait_for(
        Duration::from_secs(30),
        "the cancelled run to end",
        async || {
            sqlx::query_scalar("SELECT status FROM svc_runs WHERE run_id = $1 AND state = 'done'")
                .bind(run_id)
                .fetch_optional(store.pool())
                .await
                .expect("done")
        },
    )
    .await;
    assert_eq!(status, "canceled", "{}", outputs(&nodes));
    for node in &mut nodes {
        node.stop().await;
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_request_replayed_to_another_node_is_refused() {
    let (_pg, url) = launch_postgres("svc_spent").await;
    let shared = Shared::new();
    let main_secret = "the-same-main-secret-on-every-node";
    let mut nodes = Vec::new();
    for n in 0..2 {
        let builder = TestService::builder()
            .svc("database_url = $SVC_TEST_DATABASE_URL")
            .svc(format!("node_name = node-{n}"))
            .svc(format!("secret = {main_secret}"))
            .env("SVC_TEST_DATABASE_URL", &url)
            .job_file("quiet", job("quiet", &shared.path, None, "true"));
        nodes.push(builder.start().await);
    }
    // One signed run now, sent to node 0, then the very same request to node 1.
    let body = format!("_svc_epoch={}&id=quiet", svc_tests::fresh_epoch());
    let signature = hmac_sha256_hex(main_secret, &body);
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("x-svc-sign", signature.as_str()),
    ];
    nodes[0]
        .post("/svc/api/job_exec/trigger", body.as_bytes(), &headers)
        .await
        .assert_status(200);
    let replayed = nodes[1]
        .post("/svc/api/job_exec/trigger", body.as_bytes(), &headers)
        .await;
    replayed.assert_status(401);
    assert!(
        replayed.message().starts_with("replay:"),
        "{}",
        replayed.raw
    );
    // On another route of another node too: one spend store for the cluster.
    let as_pause = nodes[1]
        .post("/svc/api/job_exec/pause", body.as_bytes(), &headers)
        .await;
    as_pause.assert_status(401);
    assert!(
        as_pause.message().starts_with("replay:"),
        "{}",
        as_pause.raw
    );
    let store = store(&url).await;
    all_runs_done(&store, Duration::from_secs(30)).await;
    assert_eq!(scalar(&store, "SELECT count(*) FROM svc_runs").await, 1);
    for node in &mut nodes {
        node.stop().await;
    }
    store.close().await;
}
