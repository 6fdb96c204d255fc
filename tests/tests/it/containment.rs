//! Process containment: a command that forks a tree of children, ignores SIGTERM, and
//! double-forks processes out of its process group and session is still ended entirely
//! on timeout, on cancel, and on controller shutdown. `/proc` is searched for the
//! distinctive `sleep 300.42NM…` arguments (`proc::marker`) of every process it starts.
//!
//! How runs are contained (namespaces per run, or the fallback) and the limits of each
//! are in docs/reliability.md.

use std::time::{Duration, Instant};

use svc_tests::{TestService, WAIT, job_section, proc, wait_until};

/// The hostile command of scenario `n` and the markers of the processes it starts:
///
/// - the shell and everything it starts ignore SIGTERM (`trap '' TERM` is inherited);
/// - a background sleep, and a subshell with two more (a tree);
/// - a nested `sh -c` with its own background child;
/// - `setsid sh -c '...'`: a new session and process group, still a child;
/// - `( setsid sh -c 'sleep &' & )`: a double fork, the sleep re-parented away from the
///   command's shell, in another session;
/// - finally a foreground sleep.
fn hostile(n: u32) -> (String, Vec<String>) {
    let m = |k: u32| proc::marker(&format!("sleep 300.42{n}{k}"));
    let command = format!(
        "trap '' TERM; {} & ({} & {} & wait) & sh -c '{} & wait' & \
         setsid sh -c 'trap \"\" TERM; {} & {}' & (setsid sh -c '{} &' &); {}; wait",
        m(1),
        m(2),
        m(3),
        m(4),
        m(5),
        m(6),
        m(7),
        m(8),
    );
    (command, (1..=8).map(m).collect())
}

fn alive(markers: &[String]) -> Vec<(i32, String)> {
    markers
        .iter()
        .flat_map(|marker| proc::find_by_cmdline(marker))
        .collect()
}

/// Kills whatever a failed test left behind, so later tests are not confused.
struct Reaper(Vec<String>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for (pid, _) in alive(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

async fn wait_all_running(markers: &[String]) {
    wait_until(
        WAIT,
        "every process of the hostile command runs",
        async || {
            markers
                .iter()
                .all(|marker| !proc::find_by_cmdline(marker).is_empty())
        },
    )
    .await;
}

/// Asserts that none of `markers` runs; waits at most `limit` for stragglers.
async fn assert_all_gone(markers: &[String], limit: Duration, what: &str) -> Duration {
    let start = Instant::now();
    loop {
        let left = alive(markers);
        if left.is_empty() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{what}: still running {limit:?} later: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Processes in another session than the command's shell: proves the double fork and
/// `setsid` really escaped the process group the runner signals.
fn sessions(markers: &[String]) -> usize {
    let mut ids = std::collections::BTreeSet::new();
    for (pid, _) in alive(markers) {
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            && let Some(after) = stat.rfind(')').map(|at| &stat[at + 1..])
            && let Some(session) = after.split_whitespace().nth(3)
        {
            ids.insert(session.to_owned());
        }
    }
    ids.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_command_is_ended_entirely_on_timeout() {
    let (command, markers) = hostile(1);
    let _reaper = Reaper(markers.clone());
    let svc = TestService::builder()
        .job_file(
            "hostile",
            job_section(
                "hostile",
                &[
                    "path = /hostile",
                    "timeout = 3s",
                    &format!("command = {command}"),
                ],
            ),
        )
        .start()
        .await;
    let triggered = Instant::now();
    svc.trigger("/hostile", b"", &[]).await.assert_status(200);
    wait_all_running(&markers).await;
    let spread = sessions(&markers);
    assert!(
        spread >= 3,
        "the command's processes span {spread} sessions"
    );

    let log = svc
        .wait_run_finished("hostile", 1, Duration::from_secs(20))
        .await;
    let took = triggered.elapsed();
    let content = log.content();
    log.assert_status("fail");
    let gone_after = assert_all_gone(&markers, Duration::from_secs(3), "after the timeout").await;
    println!(
        "timeout: run ended {took:?} after the trigger (limit 3 s + 5 s grace); the {} \
         processes in {spread} sessions were gone {gone_after:?} after the run ended",
        markers.len()
    );
    assert!(
        took < Duration::from_secs(3 + 5 + 4),
        "the run ended after {took:?}"
    );
    for needle in [
        "time limit of 3s reached",
        "sending SIGKILL",
        "timed out after 3s",
    ] {
        assert!(
            content.contains(needle),
            "the log says {needle:?}:\n{content}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_command_is_ended_entirely_on_cancel() {
    let (command, markers) = hostile(2);
    let _reaper = Reaper(markers.clone());
    let svc = TestService::builder()
        .job_file(
            "hostile",
            job_section(
                "hostile",
                &["path = /hostile", &format!("command = {command}")],
            ),
        )
        .start()
        .await;
    svc.trigger("/hostile", b"", &[]).await.assert_status(200);
    wait_all_running(&markers).await;

    let (body, signature) = svc.job_exec_form("hostile");
    let cancelled = Instant::now();
    let response = svc
        .post(
            "/svc/api/job_exec/cancel",
            body.as_bytes(),
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("X-Svc-Sign", &signature),
            ],
        )
        .await;
    response.assert_status(200);
    let log = svc
        .wait_run_finished("hostile", 1, Duration::from_secs(20))
        .await;
    let took = cancelled.elapsed();
    let content = log.content();
    log.assert_status("fail");
    let gone_after = assert_all_gone(&markers, Duration::from_secs(3), "after the cancel").await;
    println!(
        "cancel: run ended {took:?} after the cancel (5 s grace for ignored SIGTERM); \
         processes gone {gone_after:?} after the run ended"
    );
    assert!(
        took < Duration::from_secs(5 + 4),
        "the run ended after {took:?}"
    );
    let last = log.texts().last().cloned().unwrap_or_default();
    assert!(
        last.starts_with("=== run 1 finished: fail: cancelled"),
        "the last line says the run was cancelled:\n{content}"
    );
    svc.wait_job_status("hostile", "failed", WAIT).await;
    // Cancel of a job that no longer runs: 200, as upstream, and nothing changes.
    let (body, signature) = svc.job_exec_form("hostile");
    svc.post(
        "/svc/api/job_exec/cancel",
        body.as_bytes(),
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("X-Svc-Sign", &signature),
        ],
    )
    .await
    .assert_status(200);
    assert_eq!(svc.job_logs("hostile").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_command_is_ended_entirely_on_controller_shutdown() {
    let (command, markers) = hostile(3);
    let _reaper = Reaper(markers.clone());
    let mut svc = TestService::builder()
        .job_file(
            "hostile",
            job_section(
                "hostile",
                &["path = /hostile", &format!("command = {command}")],
            ),
        )
        .start()
        .await;
    svc.trigger("/hostile", b"", &[]).await.assert_status(200);
    wait_all_running(&markers).await;

    let asked = Instant::now();
    let status = svc.stop().await;
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0: {status:?}");
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM"
    );
    let gone_after = assert_all_gone(&markers, Duration::from_secs(2), "after the shutdown").await;
    println!(
        "shutdown: controller exited {took:?} after SIGTERM; processes gone \
         {gone_after:?} after it exited"
    );
    svc.start().await;
    let log = svc.wait_run_finished("hostile", 1, WAIT).await;
    log.assert_status("fail");
    assert!(
        log.content().contains("sending SIGKILL"),
        "the log shows the escalation:\n{}",
        log.content()
    );
}
