//! Controller lifecycle: start-up output, state kept across restarts, state rebuilt from the
//! logs, SIGKILL and SIGTERM while a job runs, SIGHUP reload; the harness's start on a
//! port another process took.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use svc_tests::{TestService, WAIT, job_section, proc, rfc3339, wait_until};

/// `last_run` of the Job named `name`, truncated to whole seconds (the state file may keep
/// no more than that).
async fn last_run_secs(svc: &TestService, name: &str) -> i64 {
    let job = svc.job(name).await;
    rfc3339(&job["last_run"])
        .unwrap_or_else(|| panic!("last_run of {name} is RFC 3339: {job}"))
        .timestamp()
}

/// Waits until no live process has `marker` in its command line.
async fn wait_gone(marker: &str, timeout: Duration) {
    wait_until(
        timeout,
        &format!("no process runs `{marker}`"),
        async || proc::find_by_cmdline(marker).is_empty(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prints_the_ui_url_and_a_generated_secret() {
    let svc = TestService::builder()
        .svc("secret =")
        .job_file(
            "quiet",
            job_section("quiet", &["path = /quiet", "command = true"]),
        )
        .start()
        .await;
    let url = format!("http://{}/svc", svc.listen_address());
    let stdout = svc.stdout();
    assert!(stdout.contains(&url), "stdout shows {url}:\n{stdout}");
    // `secret()` reads the generated secret from stdout; the API must accept it.
    let secret = svc.secret();
    svc.pause("quiet").await.assert_status(200);
    svc.resume("quiet").await.assert_status(200);
    svc.trigger("/quiet", b"", &[]).await.assert_status(200);
    let raw = svc.get("/svc/api/environment").await.raw;
    assert!(
        !raw.contains(&secret),
        "the environment never holds the secret"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_counter_last_run_and_pause() {
    let mut svc = TestService::builder()
        .job_file(
            "keep",
            job_section(
                "keep",
                &["path = /keep", "command = echo run-$SVC_JOB_COUNTER"],
            ),
        )
        .start()
        .await;
    for counter in 1..=2 {
        svc.trigger("/keep", b"", &[]).await.assert_status(200);
        svc.wait_run_finished("keep", counter, WAIT)
            .await
            .assert_status("success");
    }
    svc.wait_job_status("keep", "success", WAIT).await;
    let last_run = last_run_secs(&svc, "keep").await;
    let response = svc.pause("keep").await;
    response.assert_status(200);
    assert_eq!(response.data()["status"], "paused", "{}", response.raw);

    let status = svc.stop().await;
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0: {status:?}");
    let state = svc.state_file("keep").expect("state file written");
    assert_eq!(
        state.get("counter").map(String::as_str),
        Some("2"),
        "{state:?}"
    );
    assert_eq!(
        state.get("paused").map(String::as_str),
        Some("true"),
        "{state:?}"
    );
    let stored = state
        .get("last_run")
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .unwrap_or_else(|| panic!("last_run in the state file is RFC 3339: {state:?}"));
    assert_eq!(stored.timestamp(), last_run, "state file last_run");

    svc.start().await;
    assert_eq!(
        svc.job_status("keep").await,
        "paused",
        "pause survives a restart"
    );
    assert_eq!(
        last_run_secs(&svc, "keep").await,
        last_run,
        "last_run survives"
    );
    svc.trigger("/keep", b"", &[]).await.assert_status(412);

    let response = svc.resume("keep").await;
    response.assert_status(200);
    assert_eq!(response.data()["status"], "success", "{}", response.raw);
    svc.trigger("/keep", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("keep", 3, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "run-3"),
        "{}",
        log.content()
    );
    assert!(
        svc.job_logs("keep").iter().all(|f| f.counter <= 3),
        "counters are never reused or skipped ahead"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_state_file_is_rebuilt_from_the_newest_log() {
    let mut svc = TestService::builder()
        .job_file(
            "rebuild",
            job_section(
                "rebuild",
                &[
                    "path = /rebuild",
                    "log_retention = 1",
                    "command = echo run-$SVC_JOB_COUNTER",
                ],
            ),
        )
        .start()
        .await;
    for counter in 1..=2 {
        svc.trigger("/rebuild", b"", &[]).await.assert_status(200);
        svc.wait_run_finished("rebuild", counter, WAIT)
            .await
            .assert_status("success");
    }
    svc.wait_job_status("rebuild", "success", WAIT).await;
    let last_run = last_run_secs(&svc, "rebuild").await;
    let status = svc.stop().await;
    assert_eq!(status.code(), Some(0), "{status:?}");

    let state = svc.state_path("rebuild");
    std::fs::remove_file(&state).unwrap_or_else(|err| panic!("remove {}: {err}", state.display()));
    svc.start().await;
    assert_eq!(
        svc.job_status("rebuild").await,
        "success",
        "status from the log"
    );
    let rebuilt = last_run_secs(&svc, "rebuild").await;
    assert!(
        (rebuilt - last_run).abs() <= 2,
        "last_run rebuilt from the log ({rebuilt}) is close to the real one ({last_run})"
    );

    svc.trigger("/rebuild", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("rebuild", 3, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "run-3"),
        "{}",
        log.content()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_run_is_recorded_as_interrupted() {
    let sleeper = proc::marker("sleep 30.123");
    let mut svc = TestService::builder()
        .job_file(
            "long",
            job_section(
                "long",
                &[
                    "path = /long",
                    "command = echo begin",
                    // Only the first run sleeps, so the next one can finish.
                    &format!("command = if [ ! -e slept ]; then touch slept; {sleeper}; fi"),
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/long", b"", &[]).await.assert_status(200);
    svc.wait_run_started("long", 1, WAIT).await;
    // The `sleep` itself, not the shell around it: once it runs, `slept` exists.
    wait_until(WAIT, "the first command's `sleep` is running", async || {
        !proc::find_by_exact_cmdline(&sleeper).is_empty()
    })
    .await;
    // The runner may have started the second command before the controller has written
    // the first one's output: wait for the second command's line, which comes after it.
    wait_until(WAIT, "the second command is in the log", async || {
        svc.job_log("long", 1)
            .is_some_and(|log| log.content().contains("$ if [ ! -e slept ]"))
    })
    .await;

    svc.kill9().await;
    let killed = Instant::now();
    svc.start().await;
    wait_gone(
        &sleeper,
        Duration::from_secs(10).saturating_sub(killed.elapsed()),
    )
    .await;

    let log = svc.wait_run_finished("long", 1, WAIT).await;
    let content = log.content();
    log.assert_status("fail");
    let runs_1: Vec<_> = svc
        .job_logs("long")
        .into_iter()
        .filter(|f| f.counter == 1)
        .collect();
    assert_eq!(runs_1.len(), 1, "the .started file was renamed: {runs_1:?}");
    let last = log.texts().last().cloned().unwrap_or_default();
    assert!(
        last.starts_with("=== run 1 finished: fail") && last.contains("interrupted"),
        "the last line says the run was interrupted:\n{content}"
    );
    assert!(log.texts().iter().any(|t| t == "begin"), "{content}");
    svc.wait_job_status("long", "failed", WAIT).await;

    // The controller is not wedged: the next trigger runs, as run 2, the number after
    // the newest log's (no gap, and 1 is not used again).
    svc.trigger("/long", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("long", 2, WAIT)
        .await
        .assert_status("success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_running_commands_and_exits_0() {
    let sleeper = proc::marker("sleep 30.456");
    let mut svc = TestService::builder()
        .job_file(
            "term",
            job_section("term", &["path = /term", &format!("command = {sleeper}")]),
        )
        .start()
        .await;
    svc.trigger("/term", b"", &[]).await.assert_status(200);
    svc.wait_run_started("term", 1, WAIT).await;
    wait_until(WAIT, "the job's `sleep` is running", async || {
        !proc::find_by_cmdline(&sleeper).is_empty()
    })
    .await;

    let asked = Instant::now();
    let status = svc.stop().await;
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0: {status:?}");
    assert!(took < Duration::from_secs(10), "exited after {took:?}");
    wait_gone(&sleeper, Duration::from_secs(5)).await;

    // Whoever records it, the run ends up failed, never left as started.
    svc.start().await;
    svc.wait_run_finished("term", 1, WAIT)
        .await
        .assert_status("fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_stops_like_sigterm() {
    let mut svc = TestService::builder()
        .job_file(
            "idle",
            job_section("idle", &["path = /idle", "command = true"]),
        )
        .start()
        .await;
    svc.signal(nix::sys::signal::Signal::SIGINT);
    let status = svc
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("SIGINT stops the controller within 10 s");
    assert_eq!(status.code(), Some(0), "SIGINT exits 0: {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_loads_new_jobs_and_keeps_existing_state() {
    let mut svc = TestService::builder()
        .job_file(
            "old",
            job_section(
                "old",
                &["path = /old", "command = echo old-$SVC_JOB_COUNTER"],
            ),
        )
        .start()
        .await;
    svc.trigger("/old", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("old", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_job_status("old", "success", WAIT).await;
    let last_run = svc.job("old").await["last_run"].clone();

    std::fs::write(
        svc.job_d().join("new.conf"),
        job_section("new", &["path = /new", "command = echo new-ran"]),
    )
    .expect("write job.d/new.conf");
    let reloaded_at: DateTime<Utc> = Utc::now();
    svc.sighup();
    wait_until(
        Duration::from_secs(10),
        "job `new` in the environment",
        async || {
            svc.try_environment()
                .await
                .is_ok_and(|env| env["jobs"].get("new").is_some())
        },
    )
    .await;
    assert!(
        svc.try_wait().is_none(),
        "SIGHUP does not stop the controller"
    );

    let old = svc.job("old").await;
    assert_eq!(old["status"], "success", "{old}");
    assert_eq!(
        old["last_run"], last_run,
        "last_run unchanged by the reload"
    );
    assert!(rfc3339(&old["last_run"]).is_some_and(|t| t < reloaded_at));

    svc.trigger("/old", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("old", 2, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "old-2"),
        "{}",
        log.content()
    );
    svc.trigger("/new", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("new", 1, WAIT)
        .await
        .assert_status("success");
}

/// The harness's own guard: a port found free may be taken by another test's service
/// before this one binds it. The start must not take that service's answers for its
/// own, and moves to another free port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_port_was_taken_meanwhile_moves_to_another() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut svc = TestService::builder().build();
    let taken = svc.listen_address().to_string();
    // A stranger on the port, answering 200 to every request.
    let stranger = tokio::net::TcpListener::bind(&taken).await.expect("bind");
    let answering = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = stranger.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let body = br#"{"code":200,"message":"","data":{"name":"stranger"}}"#;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body).await;
            });
        }
    });
    svc.start().await;
    assert_ne!(svc.listen_address(), taken);
    assert!(
        svc.stdout()
            .contains(&format!("listening on http://{}", svc.listen_address())),
        "{}",
        svc.stdout()
    );
    let environment = svc.environment().await;
    assert_eq!(
        environment["dir_base"],
        svc.dir_base().display().to_string(),
        "{environment}"
    );
    answering.abort();
}
