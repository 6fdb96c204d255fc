//! PostgreSQL failover under two real nodes: a primary with a synchronous streaming
//! standby (`svc_tests::postgres`), both listed in the nodes' `database_url` with
//! `target_session_attrs=read-write`. The primary is killed in the middle of a flow of
//! signed triggers and 1 s timers and the standby promoted: every trigger answered 200
//! runs exactly once, none runs twice, no timer slot runs twice, the outage answers 503
//! with `Retry-After`, and `--check` names the primary before and after. The time from the
//! kill to the first trigger accepted after it is printed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use svc_controller::cluster::ClusterStore;
use svc_tests::postgres::{PostgresServer, SUPERUSER};
use svc_tests::{TestService, job_section, output_text, wait_until};
use tokio::sync::Mutex;

use crate::cluster::{
    Shared, all_runs_done, job, outputs, post_trigger, scalar, start_nodes, store, trigger_client,
    trigger_jobs,
};

/// Trigger jobs and 1 s timer jobs.
const TRIGGER_JOBS: usize = 6;
const TIMER_JOBS: usize = 3;

/// One answer of the flow: when its request was sent and answered, its status, whether
/// it said `Retry-After: 5`, and the body.
struct Answer {
    sent: Instant,
    answered: Instant,
    status: u16,
    retry: bool,
    body: String,
}

/// One sender per node, each sending its next trigger once the last is answered, until
/// `stop`; `accepted_after` counts 200s of requests sent after `mark` is set.
async fn flow(
    bases: Vec<String>,
    stop: Arc<AtomicBool>,
    mark: Arc<std::sync::Mutex<Option<Instant>>>,
    accepted_after: Arc<AtomicUsize>,
) -> Vec<Answer> {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let client = trigger_client();
    let mut tasks = Vec::new();
    for (node, base) in bases.into_iter().enumerate() {
        let (answers, client, stop, mark, after) = (
            answers.clone(),
            client.clone(),
            stop.clone(),
            mark.clone(),
            accepted_after.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let body = format!("f{node}-{n}");
                let job = n % TRIGGER_JOBS;
                n += 1;
                let sent = Instant::now();
                let (status, retry) = post_trigger(&client, &base, job, &body).await;
                let marked = mark
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_some_and(|at| sent >= at);
                if status == 200 && marked {
                    after.fetch_add(1, Ordering::SeqCst);
                }
                if status == 503 {
                    // As a client honouring Retry-After would, without waiting all of it.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                answers.lock().await.push(Answer {
                    sent,
                    answered: Instant::now(),
                    status,
                    retry,
                    body,
                });
            }
        }));
    }
    for task in tasks {
        task.await.expect("sender");
    }
    Arc::into_inner(answers).expect("senders done").into_inner()
}

/// `--check` of a node with `url`: its output, which must say the check passed.
async fn check(url: &str) -> String {
    let svc = TestService::builder()
        .svc("database_url = $SVC_TEST_DATABASE_URL")
        .svc("node_name = check-node")
        .env("SVC_TEST_DATABASE_URL", url)
        .job_file("a", job_section("a", &["interval = 1h", "command = true"]))
        .build();
    let output = svc.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_primary_and_promoting_its_standby_loses_and_repeats_nothing() {
    let (mut primary, standby) = tokio::task::spawn_blocking(|| {
        let primary = PostgresServer::launch();
        primary.create_database("svc_failover");
        let standby = primary.launch_standby(true);
        (primary, standby)
    })
    .await
    .expect("launch PostgreSQL and its standby");
    let (old, new) = (primary.port(), standby.port());
    let url = format!(
        "postgres://{SUPERUSER}@127.0.0.1:{old},127.0.0.1:{new}/svc_failover\
         ?target_session_attrs=read-write"
    );
    let text = check(&url).await;
    assert!(
        text.contains(&format!("primary 127.0.0.1:{old} (of 2 hosts")),
        "{text}"
    );

    let shared = Shared::new();
    let mut defs = trigger_jobs(&shared.path, TRIGGER_JOBS);
    defs.extend((0..TIMER_JOBS).map(|n| {
        let name = format!("tick{n}");
        let command = "mkdir \"$SVC_JOB_ID-$SVC_JOB_COUNTER\"";
        let text = job(&name, &shared.path, Some("interval = 1s"), command);
        (name, text)
    }));
    let mut nodes = start_nodes(&url, 2, &defs).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mark = Arc::new(std::sync::Mutex::new(None));
    let accepted_after = Arc::new(AtomicUsize::new(0));
    let sender = {
        let bases: Vec<String> = nodes.iter().map(TestService::base_url).collect();
        tokio::spawn(flow(
            bases,
            stop.clone(),
            mark.clone(),
            accepted_after.clone(),
        ))
    };
    let before = store(&primary.url_of("svc_failover")).await;
    wait_until(
        Duration::from_secs(60),
        "runs of triggers and timers before the kill",
        async || {
            scalar(
                &before,
                "SELECT count(*) FROM svc_runs WHERE state = 'done'",
            )
            .await
                >= 30
                && scalar(&before, "SELECT count(*) FROM svc_slots").await >= 6
        },
    )
    .await;
    before.close().await;

    // The failover: the primary dies as in a crash, the standby is promoted at once (as
    // a failover manager would).
    let killed = Instant::now();
    *mark.lock().unwrap_or_else(|p| p.into_inner()) = Some(killed);
    tokio::task::block_in_place(|| primary.kill());
    tokio::task::block_in_place(|| standby.promote());
    let promoted = Instant::now();
    let after = store(&standby.url_of("svc_failover")).await;
    let slots_at_promotion = scalar(&after, "SELECT count(*) FROM svc_slots").await;
    wait_until(
        Duration::from_secs(90),
        "triggers accepted and timer slots claimed after the failover",
        async || {
            accepted_after.load(Ordering::SeqCst) >= 20
                && scalar(&after, "SELECT count(*) FROM svc_slots").await >= slots_at_promotion + 6
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let answers = sender.await.expect("sender");
    all_runs_done(&after, Duration::from_secs(90)).await;
    let text = check(&url).await;
    assert!(
        text.contains(&format!("primary 127.0.0.1:{new} (of 2 hosts")),
        "{text}"
    );
    let logs = outputs(&nodes);
    for node in &mut nodes {
        node.stop().await;
    }

    report_window(&answers, killed, promoted);
    check_triggers(&after, &answers, &shared, &logs).await;
    check_timers(&after, &shared, &logs).await;
    after.close().await;
}
/// Prints the unavailable window: from the kill to the first trigger sent after it and
/// accepted.
fn report_window(answers: &[Answer], killed: Instant, promoted: Instant) {
    let first = answers
        .iter()
        .filter(|a| a.status == 200 && a.sent >= killed)
        .map(|a| a.answered)
        .min()
        .expect("a trigger accepted after the kill");
    let refused = answers.iter().filter(|a| a.status == 503).count();
    println!(
        "failover: unavailable for {:.2} s from the kill to the first accepted trigger \
         (the promotion took {:.2} s; 503 answers: {refused})",
        first.duration_since(killed).as_secs_f64(),
        promoted.duration_since(killed).as_secs_f64()
    );
}

/// Every answer is expected, and every accepted trigger ran exactly once.
async fn check_triggers(after: &ClusterStore, answers: &[Answer], shared: &Shared, logs: &str) {
    // Answers: accepted, the one-slot queue full, or 503 with Retry-After in the outage.
    let other: Vec<_> = answers
        .iter()
        .filter(|a| ![200, 429, 503].contains(&a.status))
        .map(|a| (&a.body, a.status))
        .collect();
    assert!(other.is_empty(), "unexpected answers {other:?}\n{logs}");
    assert!(answers.iter().filter(|a| a.status == 503).all(|a| a.retry));

    // Every accepted trigger ran, once: its directory exists (a second run's `mkdir`
    // would have failed that run), and every run on the new primary succeeded (timers'
    // last runs may be cancelled by the stop). A trigger answered 503 may have been
    // committed before its connection broke: it ran once too.
    let entries = shared.entries();
    let accepted: BTreeSet<&str> = answers
        .iter()
        .filter(|a| a.status == 200)
        .map(|a| a.body.as_str())
        .collect();
    let lost: Vec<_> = accepted.iter().filter(|b| !entries.contains(**b)).collect();
    assert!(lost.is_empty(), "accepted and not run: {lost:?}\n{logs}");
    let failed: Vec<(String, String)> = sqlx::query_as(
        "SELECT id, status FROM svc_runs WHERE status NOT IN ('success', 'canceled')",
    )
    .fetch_all(after.pool())
    .await
    .expect("runs");
    assert!(failed.is_empty(), "runs that failed: {failed:?}\n{logs}");
    let trigger_runs = scalar(
        after,
        "SELECT count(*) FROM svc_runs WHERE id LIKE 'job%' AND status = 'success'",
    )
    .await;
    let trigger_entries = entries.iter().filter(|e| e.starts_with('f')).count();
    assert_eq!(trigger_runs as usize, trigger_entries, "{logs}");
}

/// No timer slot ran twice, and each timer run's directory is its own.
async fn check_timers(after: &ClusterStore, shared: &Shared, logs: &str) {
    let entries = shared.entries();
    // No timer slot ran twice: each timer run names its slot, once.
    let twice = scalar(
        after,
        "SELECT count(*) FROM (SELECT id, trigger->>'cause' FROM svc_runs
         WHERE id LIKE 'tick%' GROUP BY 1, 2 HAVING count(*) > 1) t",
    )
    .await;
    assert_eq!(twice, 0, "a timer slot ran twice\n{logs}");
    // Each successful timer run made its directory; every directory is a run's (the
    // stop cancels the last runs, which may or may not have made theirs).
    let timer_runs: Vec<(String, String)> = sqlx::query_as(
        "SELECT id || '-' || counter, coalesce(status, state) FROM svc_runs
         WHERE id LIKE 'tick%' AND counter IS NOT NULL",
    )
    .fetch_all(after.pool())
    .await
    .expect("timer runs");
    let timer_entries: BTreeSet<&String> =
        entries.iter().filter(|e| e.starts_with("tick")).collect();
    let ran: BTreeSet<&String> = timer_runs.iter().map(|(name, _)| name).collect();
    let succeeded: BTreeSet<&String> = timer_runs
        .iter()
        .filter(|(_, status)| status == "success")
        .map(|(name, _)| name)
        .collect();
    assert!(succeeded.is_subset(&timer_entries), "{logs}");
    assert!(timer_entries.is_subset(&ran), "{logs}");
}
