//! Crash tests of a runner against the real binaries: a runner killed in the middle of a
//! run fails that run with a clear line, the controller carries on, and the killed
//! runner's commands are ended.

use std::time::Duration;

use svc_tests::{TestService, WAIT, check_timestamps, job_section, proc, wait_until};

/// The runners of this service: its descendants named `svc-runner` (started afresh, or
/// forked by its fork server, which is named `svc-forkserver`).
fn runner_of(svc: &TestService) -> Vec<(i32, String)> {
    let controller = svc.pid().expect("the controller runs");
    proc::descendants_named(controller, "svc-runner")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_killed_mid_run_fails_the_run_and_the_controller_carries_on() {
    let marker = &proc::marker("sleep 300.4243");
    let svc = TestService::builder()
        .job_file(
            "victim",
            job_section(
                "victim",
                &[
                    "path = /victim",
                    "command = echo before-the-kill",
                    // Only the first run sleeps.
                    &format!("command = if [ ! -e slept ]; then touch slept; {marker}; fi"),
                    "command = echo after-$SVC_JOB_COUNTER",
                ],
            ),
        )
        .job_file(
            "other",
            job_section("other", &["path = /other", "command = echo other-ran"]),
        )
        .start()
        .await;
    svc.trigger("/victim", b"", &[]).await.assert_status(200);
    // The command itself, not the shell around it: once it runs, `slept` exists and the
    // second run will not sleep.
    wait_until(WAIT, &format!("`{marker}` runs"), async || {
        !proc::find_by_exact_cmdline(marker).is_empty()
    })
    .await;
    let runners = runner_of(&svc);
    assert_eq!(runners.len(), 1, "one runner: {runners:?}");
    let (runner, _) = runners[0];
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(runner),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the runner");

    let log = svc.wait_run_finished("victim", 1, WAIT).await;
    let content = log.content();
    log.assert_status("fail");
    let last = log.texts().last().cloned().unwrap_or_default();
    println!("the run's last line: {last:?}");
    assert!(
        last.starts_with("=== run 1 finished: fail: ") && last.contains("runner died"),
        "the last line says the runner died:\n{content}"
    );
    assert!(
        log.texts().iter().any(|t| t == "before-the-kill"),
        "output before the kill is kept:\n{content}"
    );
    check_timestamps(&content).unwrap_or_else(|err| panic!("{err}\n{content}"));
    svc.wait_job_status("victim", "failed", WAIT).await;

    // The controller carries on: other jobs and the same job run.
    svc.trigger("/other", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("other", 1, WAIT)
        .await
        .assert_status("success");
    svc.trigger("/victim", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("victim", 2, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "after-2"),
        "{}",
        log.content()
    );
    wait_until(WAIT, "no runner left", async || runner_of(&svc).is_empty()).await;
    // What the killed runner's command left behind is the subject of the next test.
    for (pid, _) in proc::find_by_cmdline(marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_of_a_killed_runner_are_ended() {
    let marker = &proc::marker("sleep 300.4244");
    let svc = TestService::builder()
        .job_file(
            "victim",
            job_section(
                "victim",
                &["path = /victim", &format!("command = {marker}")],
            ),
        )
        .start()
        .await;
    svc.trigger("/victim", b"", &[]).await.assert_status(200);
    wait_until(WAIT, &format!("`{marker}` runs"), async || {
        !proc::find_by_cmdline(marker).is_empty()
    })
    .await;
    let runners = runner_of(&svc);
    assert_eq!(runners.len(), 1, "one runner: {runners:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(runners[0].0),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the runner");
    svc.wait_run_finished("victim", 1, WAIT)
        .await
        .assert_status("fail");
    let left = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let left = proc::find_by_cmdline(marker);
            if left.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let survivors = proc::find_by_cmdline(marker);
    for (pid, _) in &survivors {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        left.is_ok(),
        "10 s after the runner was killed and its run recorded as failed, its command \
         still runs: {survivors:?}"
    );
}
