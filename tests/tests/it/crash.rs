//! Crash tests of the controller against the real binaries: it is SIGKILLed at random
//! moments, over and over, while jobs run, logs are written and state files are replaced
//! (timer runs, webhook triggers, a chatty job, a long job, pause/resume in a tight loop),
//! and sometimes in the middle of its own start-up; after each kill the files on disk are
//! checked, and after each restart the repairs (what is checked: `crash_checks.rs`); no
//! runner or command process is left. A kill between a run's log rename and the state
//! write keeps the run's result. A runner killed mid-run: `crash_runner.rs`.
//!
//! `SVC_LONG_TESTS=1` makes the kill loop run 200 times (10 otherwise); the seed of the
//! random moments is printed, `SVC_CRASH_SEED=<n>` replays it.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svc_tests::{TestService, WAIT, hmac_sha256_hex, job_section, proc, wait_until};

use crate::crash_checks::History;

fn long_mode() -> bool {
    std::env::var("SVC_LONG_TESTS").is_ok_and(|value| value == "1")
}

/// Marker of the long job's command: `sleep 30.9191…` must never survive its run.
fn long_marker() -> String {
    proc::marker("sleep 30.9191")
}
/// The runner socket's path below `dir_base`; runners carry it on their command line.
const SOCKET: &str = "var/run/svc/controller/runner.sock";

/// The webhook jobs that only echo and sleep a little.
const HOOKS: [&str; 3] = ["hook0", "hook1", "hook2"];

/// The service the loop kills: a 1 s timer, the webhook jobs, a long job, a chatty one
/// and one paused and resumed in a tight loop (`crash_checks.rs` names them all).
fn crash_service() -> TestService {
    let mut jobs = vec![
        job_section(
            "tick",
            &[
                "interval = 1s",
                "log_retention = 100000",
                "command = echo tick-$SVC_JOB_COUNTER",
            ],
        ),
        job_section(
            "long",
            &[
                "path = /long",
                "log_retention = 100000",
                "command = echo long-start",
                &format!("command = {}", long_marker()),
            ],
        ),
        job_section(
            "chatty",
            &[
                "path = /chatty",
                "log_retention = 100000",
                "command = i=0; while [ $i -lt 300 ]; do echo \"line $i of run $SVC_JOB_COUNTER\"; \
                 i=$((i+1)); done",
            ],
        ),
        job_section(
            "toggle",
            &["path = /toggle", "log_retention = 100000", "command = true"],
        ),
    ];
    for (index, hook) in HOOKS.iter().enumerate() {
        jobs.push(job_section(
            hook,
            &[
                &format!("path = /{hook}"),
                "log_retention = 100000",
                "command = echo $SVC_JOB_ID-$SVC_JOB_COUNTER",
                &format!("command = sleep 0.0{}", index + 2),
            ],
        ));
    }
    TestService::builder()
        .svc("max_job_running = 4")
        .job_file("jobs", jobs.join("\n"))
        .build()
}

// ----- processes --------------------------------------------------------------------------

fn leftovers(socket: &str) -> Vec<(i32, String)> {
    let mut found = proc::find_by_cmdline(socket);
    found.extend(proc::find_by_cmdline(&long_marker()));
    found
}

/// Waits until no runner of this service and no command of the long job runs.
async fn wait_no_leftovers(socket: &str, when: &str) -> Duration {
    let start = Instant::now();
    wait_until(
        Duration::from_secs(15),
        &format!("{when}: no runner or command process left"),
        async || leftovers(socket).is_empty(),
    )
    .await;
    start.elapsed()
}

// ----- load -------------------------------------------------------------------------------

/// Triggers, pauses and resumes in a loop until aborted; errors (the controller was
/// killed) are expected and ignored.
async fn keep_busy(base_url: String, secret: String, seed: u64) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    let mut rng = StdRng::seed_from_u64(seed);
    loop {
        let choice = rng.random_range(0..10);
        let request = match choice {
            0..=6 => {
                let path = match choice {
                    0..=2 => HOOKS[rng.random_range(0..HOOKS.len())],
                    3 | 4 => "chatty",
                    5 => "toggle",
                    _ => "long",
                };
                let body = format!("{{\"n\":{}}}", rng.random::<u32>());
                client
                    .post(format!("{base_url}/svc/api/job/run/{path}"))
                    .header("x-svc-sign", hmac_sha256_hex(&secret, &body))
                    .body(body)
            }
            _ => {
                let action = if choice == 7 { "pause" } else { "resume" };
                let body = format!("_svc_epoch={}&id=toggle", chrono::Utc::now().timestamp());
                client
                    .post(format!("{base_url}/svc/api/job_exec/{action}"))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .header("x-svc-sign", hmac_sha256_hex(&secret, &body))
                    .body(body)
            }
        };
        if let Ok(response) = request.send().await {
            let _ = response.bytes().await;
        }
        let pause = rng.random_range(0..15);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

// ----- the tests ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_keeps_state_and_logs_consistent() {
    let iterations = if long_mode() { 200 } else { 10 };
    let seed: u64 = std::env::var("SVC_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!(
        "crash loop: {iterations} iterations, seed {seed} (replay with SVC_CRASH_SEED={seed})"
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let mut svc = crash_service();
    let socket = svc.dir_base().join(SOCKET).display().to_string();
    let secret = svc.secret();
    let mut history = History::default();
    let mut problems = Vec::new();
    let started = Instant::now();
    let mut slowest_cleanup = Duration::ZERO;

    for iteration in 1..=iterations {
        // Now and then, a kill in the middle of the start-up (recovery, state repair).
        if iteration % 4 == 0 {
            svc.spawn();
            let delay = rng.random_range(0..60);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            svc.kill9().await;
            history.kills_in_startup += 1;
            let when = format!("iteration {iteration}, killed {delay} ms into the start-up");
            slowest_cleanup = slowest_cleanup.max(wait_no_leftovers(&socket, &when).await);
            history.after_kill(&svc, &when, &mut problems);
        }

        svc.start().await;
        history.after_restart(&svc, &mut problems).await;
        let busy = tokio::spawn(keep_busy(svc.base_url(), secret.clone(), rng.random()));
        let delay = rng.random_range(0..700);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        svc.kill9().await;
        busy.abort();
        let _ = busy.await;
        history.kills_in_runs += 1;
        let when = format!("iteration {iteration}, killed {delay} ms after the start");
        slowest_cleanup = slowest_cleanup.max(wait_no_leftovers(&socket, &when).await);
        history.after_kill(&svc, &when, &mut problems);
        if !problems.is_empty() {
            break;
        }
    }

    // A last start repairs the last kill; a clean stop leaves nothing started.
    if problems.is_empty() {
        svc.start().await;
        history.after_restart(&svc, &mut problems).await;
        let status = svc.stop().await;
        assert_eq!(status.code(), Some(0), "SIGTERM after the loop: {status:?}");
        wait_no_leftovers(&socket, "after the final stop").await;
        history.after_kill(&svc, "after the final stop", &mut problems);
        for (id, counter) in history.interrupted.keys() {
            problems.push(format!(
                "after a clean stop, run {counter} of {id} is still `started`"
            ));
        }
    }
    let runs: u64 = history.counters.values().sum();
    let temp_files: usize = ["var/run/svc/job", "var/run/svc/job_http"]
        .iter()
        .filter_map(|dir| std::fs::read_dir(svc.dir_base().join(dir)).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(".tmp-"))
        .count();
    println!(
        "crash loop: {} kills during runs and {} during start-up in {:?}; {runs} runs started, \
         {} interrupted runs repaired, {} finished logs checked after every kill; slowest \
         wait for runners and commands to go: {slowest_cleanup:?}; {temp_files} temporary \
         state files left by kills during a state write",
        history.kills_in_runs,
        history.kills_in_startup,
        started.elapsed(),
        history.repaired,
        history.finished.len(),
    );
    assert!(
        problems.is_empty(),
        "seed {seed}: {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        runs >= iterations as u64,
        "only {runs} runs over {iterations} iterations"
    );
}

/// The files a kill leaves between the end of a run (its log renamed to `.success`) and
/// the state write that follows: the state file still says `started`. The run did not
/// fail; after a restart the job must show the result its log holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_the_log_rename_and_the_state_write_keeps_the_runs_result() {
    let mut svc = TestService::builder()
        .job_file(
            "done",
            job_section("done", &["path = /done", "command = echo done"]),
        )
        .start()
        .await;
    svc.trigger("/done", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("done", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_job_status("done", "success", WAIT).await;
    svc.kill9().await;
    let path = svc.state_path("done");
    let text = std::fs::read_to_string(&path).expect("state file");
    std::fs::write(&path, text.replace("status = success", "status = started"))
        .expect("rewrite the state file");

    svc.start().await;
    let job = svc.job("done").await;
    assert_eq!(
        job["status"], "success",
        "run 1 ended with success (its log is done.1.success) but the job shows: {job}"
    );
}
