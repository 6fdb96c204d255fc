//! A broken runner fails its run, and only its run: `runner_path` points to a wrapper script
//! that first runs a misbehaving runner (a shell `exit 3`, or the `fake-runner` binary of
//! this crate in one of its modes), then is rewritten to exec the real `svc-runner`, and
//! later runs must work.

use svc_tests::{TestService, WAIT, binaries, job_section, write_script};

/// The `fake-runner` binary of this crate.
const FAKE_RUNNER: &str = env!("CARGO_BIN_EXE_fake-runner");

/// Starts a controller whose runner is the script `first_runner`, triggers job `victim`
/// and checks that run fails with a log naming the runner; then switches the script to the
/// real runner and checks that job `other`, and `victim` again, succeed.
/// `{fake}` and `{dir_base}` in `first_runner` are replaced by their paths. When
/// `milestone` is given, the fake runner's notes must contain it (so the run failed for the
/// intended reason, not because the fake could not find the socket). Returns the failed
/// run's log content.
async fn broken_runner_fails_only_its_run(first_runner: &str, milestone: Option<&str>) -> String {
    let builder = TestService::builder();
    let dir_base = builder.dir_base().to_path_buf();
    let wrapper = dir_base.join("runner-wrapper.sh");
    write_script(
        &wrapper,
        &first_runner
            .replace("{fake}", FAKE_RUNNER)
            .replace("{dir_base}", &dir_base.display().to_string()),
    );
    let svc = builder
        .svc(format!("runner_path = {}", wrapper.display()))
        .job_file(
            "victim",
            job_section("victim", &["path = /victim", "command = echo victim-ran"]),
        )
        .job_file(
            "other",
            job_section("other", &["path = /other", "command = echo other-ran"]),
        )
        .start()
        .await;

    svc.trigger("/victim", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("victim", 1, WAIT).await;
    let content = log.content();
    log.assert_status("fail");
    assert!(
        content.to_lowercase().contains("runner"),
        "the log says the runner failed:\n{content}"
    );
    assert!(
        !log.texts().iter().any(|t| t == "victim-ran"),
        "the command never ran:\n{content}"
    );
    assert!(
        log.texts()
            .last()
            .is_some_and(|last| last.starts_with("=== run 1 finished: fail")),
        "the log ends with the failure line:\n{content}"
    );
    if let Some(milestone) = milestone {
        let notes_path = dir_base.join("test-output/fake-runner.log");
        let notes = std::fs::read_to_string(&notes_path).unwrap_or_default();
        assert!(
            notes.contains(milestone),
            "the fake runner got as far as {milestone:?}; its notes:\n{notes}"
        );
    }
    svc.wait_job_status("victim", "failed", WAIT).await;
    svc.environment().await;

    write_script(
        &wrapper,
        &format!("#!/bin/sh\nexec {} \"$@\"\n", binaries().runner.display()),
    );
    svc.trigger("/other", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("other", 1, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "other-ran"),
        "{}",
        log.content()
    );
    svc.trigger("/victim", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("victim", 2, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "victim-ran"),
        "{}",
        log.content()
    );
    content
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_that_exits_before_connecting() {
    broken_runner_fails_only_its_run("#!/bin/sh\nexit 3\n", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_that_sends_garbage() {
    broken_runner_fails_only_its_run(
        "#!/bin/sh\nexec {fake} garbage {dir_base} \"$@\"\n",
        Some("sending the garbage frame"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_that_dies_in_the_middle_of_a_run() {
    let content = broken_runner_fails_only_its_run(
        "#!/bin/sh\nexec {fake} die-mid-run {dir_base} \"$@\"\n",
        Some("sending output, then dying"),
    )
    .await;
    assert!(
        content.contains("partial-output"),
        "output received before the runner died is kept:\n{content}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_with_a_wrong_protocol_version() {
    broken_runner_fails_only_its_run(
        "#!/bin/sh\nexec {fake} bad-version {dir_base} \"$@\"\n",
        Some("sending the wrong version"),
    )
    .await;
}
