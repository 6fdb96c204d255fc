//! Core engine: timers, runs, logs, failures, time limits, concurrency, retention, pause,
//! the trigger queue, the environment of commands and the user commands run as.
//!
//! Every test starts its own controller on its own temporary `dir_base`.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{Value, json};
use svc_tests::{
    TestService, WAIT, check_timestamps, job_section, proc, rfc3339, wait_for, wait_until,
};

/// `(counter, status)` of the `logs` array of a Job in the environment.
fn env_logs(job: &Value) -> Vec<(u64, String)> {
    let mut logs: Vec<(u64, String)> = job["logs"]
        .as_array()
        .map(|logs| {
            logs.iter()
                .map(|log| {
                    (
                        log["counter"].as_u64().unwrap_or(0),
                        log["status"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs
}

/// The start and end stamps a job wrote with `date +%s.%N` into `file`.
fn read_stamps(file: &std::path::Path) -> (f64, f64) {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|err| panic!("read {}: {err}", file.display()));
    let stamps: Vec<f64> = text
        .lines()
        .map(|line| {
            line.trim()
                .parse()
                .unwrap_or_else(|err| panic!("stamp {line:?} in {}: {err}", file.display()))
        })
        .collect();
    assert_eq!(stamps.len(), 2, "two stamps in {}: {text}", file.display());
    (stamps[0], stamps[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_job_runs_every_interval_with_timestamped_logs() {
    let svc = TestService::builder()
        .job_file(
            "tick",
            job_section(
                "tick job",
                &[
                    "interval = 1s",
                    "command = echo tick-$SVC_JOB_COUNTER",
                    "log_retention = 50",
                ],
            ),
        )
        .start()
        .await;
    let id = "tick_job";

    let mut contents = Vec::new();
    for counter in 1..=3 {
        let log = svc.wait_run_finished(id, counter, WAIT).await;
        log.assert_status("success");
        contents.push(log.content());
    }
    for (index, content) in contents.iter().enumerate() {
        let counter = index + 1;
        check_timestamps(content).unwrap_or_else(|err| panic!("log {counter}: {err}\n{content}"));
        let texts: Vec<String> = svc_tests::parse_log_lines(content)
            .into_iter()
            .map(|line| line.text)
            .collect();
        let command = texts
            .iter()
            .position(|text| text.starts_with("$ echo tick-"))
            .unwrap_or_else(|| panic!("log {counter} has no `$ echo tick-` line:\n{content}"));
        let output = texts
            .iter()
            .position(|text| *text == format!("tick-{counter}"))
            .unwrap_or_else(|| panic!("log {counter} has no `tick-{counter}` line:\n{content}"));
        assert!(
            command < output,
            "the command line comes before its output:\n{content}"
        );
        assert!(
            texts.last().is_some_and(
                |last| last.starts_with(&format!("=== run {counter} finished: success"))
            ),
            "log {counter} ends with its finish line:\n{content}"
        );
    }
    // The log API serves the same content as the file.
    assert_eq!(svc.log_content(id, 1).await, contents[0]);

    let job = svc.job("tick job").await;
    assert_eq!(job["id"], id);
    assert_eq!(job["name"], "tick job");
    assert_eq!(job["interval"], json!(1_000_000_000u64));
    assert_eq!(job["commands"], json!(["echo tick-$SVC_JOB_COUNTER"]));
    let logs = job["logs"].as_array().expect("logs is an array");
    let first = logs
        .iter()
        .find(|log| log["counter"] == 1)
        .unwrap_or_else(|| panic!("log 1 listed in the environment: {job}"));
    assert_eq!(first["job_id"], id);
    assert_eq!(first["name"], "tick_job.1.success");
    assert_eq!(first["status"], "success");
    assert!(
        first.get("content").is_none_or(|c| c.is_null() || c == ""),
        "the environment carries no log content: {first}"
    );

    svc.wait_job_status("tick job", "success", WAIT).await;
    let last_run = rfc3339(&svc.job("tick job").await["last_run"]).expect("last_run is RFC 3339");
    let later = wait_for(WAIT, "last_run increases", async || {
        let job = svc.try_environment().await.ok()?["jobs"]["tick job"].clone();
        rfc3339(&job["last_run"]).filter(|time| *time > last_run)
    })
    .await;
    assert!(later > last_run);

    let before = Utc::now();
    let job = svc.job("tick job").await;
    let next_run = rfc3339(&job["next_run"]).expect("next_run is RFC 3339");
    let last_run = rfc3339(&job["last_run"]).expect("last_run is RFC 3339");
    // RFC 3339 times may be shown to the second only, so the next tick (due within the
    // coming second) may be shown up to a second early; 250 ms more for a tick in progress.
    assert!(
        next_run > before - chrono::Duration::milliseconds(1250),
        "next_run {next_run} is in the future (now {before})"
    );
    assert!(
        next_run <= before + chrono::Duration::seconds(2),
        "next_run {next_run} is at most one interval away (now {before})"
    );
    assert!(
        next_run > last_run,
        "next_run {next_run} after last_run {last_run}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_failing_command_fails_the_run_and_stops_it() {
    let svc = TestService::builder()
        .job_file(
            "failing",
            job_section(
                "failing",
                &[
                    "path = /fail",
                    "command = echo one",
                    "command = false",
                    "command = echo three",
                ],
            ),
        )
        .start()
        .await;

    let response = svc.trigger("/fail", b"{}", &[]).await;
    response.assert_status(200);
    assert_eq!(response.data()["name"], "failing", "data is the Job");

    let log = svc.wait_run_finished("failing", 1, WAIT).await;
    let content = log.content();
    log.assert_status("fail");
    let texts = log.texts();
    assert!(
        texts.iter().any(|t| t == "one"),
        "first command ran:\n{content}"
    );
    assert!(
        texts.iter().any(|t| t == "$ false"),
        "second command ran:\n{content}"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t == "three" || t.contains("echo three")),
        "the third command never runs:\n{content}"
    );
    assert!(
        texts
            .last()
            .is_some_and(|last| last.starts_with("=== run 1 finished: fail")),
        "the log ends with the failure line:\n{content}"
    );
    check_timestamps(&content).unwrap_or_else(|err| panic!("{err}\n{content}"));

    svc.wait_job_status("failing", "failed", WAIT).await;
    let job = svc.job("failing").await;
    assert_eq!(env_logs(&job), vec![(1, "fail".to_owned())]);
    assert_eq!(job["logs"][0]["name"], "failing.1.fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_process_group() {
    let (grandchild_marker, shell_marker) = (proc::marker("61.25"), proc::marker("62.25"));
    let svc = TestService::builder()
        .job_file(
            "slow",
            job_section(
                "slow",
                &[
                    "path = /slow",
                    "timeout = 1s",
                    &format!(
                        "command = sleep {grandchild_marker} & echo $! > gc.pid; \
                         echo $$ > sh.pid; sleep {shell_marker}"
                    ),
                ],
            ),
        )
        .start()
        .await;
    let dir_work = svc.dir_work("slow");

    let triggered = Instant::now();
    svc.trigger("/slow", b"", &[]).await.assert_status(200);
    let read_pid = |name: &str| {
        std::fs::read_to_string(dir_work.join(name))
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
    };
    let (grandchild, shell) = wait_for(WAIT, "gc.pid and sh.pid written in dir_work", async || {
        Some((read_pid("gc.pid")?, read_pid("sh.pid")?))
    })
    .await;

    let log = svc.wait_run_finished("slow", 1, WAIT).await;
    let took = triggered.elapsed();
    let content = log.content();
    log.assert_status("fail");
    // 1 s limit + 5 s grace at most, with slack for a loaded machine.
    assert!(took < Duration::from_secs(10), "run ended after {took:?}");
    let lower = content.to_lowercase();
    assert!(
        ["timed out", "timeout", "time limit"]
            .iter()
            .any(|needle| lower.contains(needle)),
        "the log mentions the time limit:\n{content}"
    );

    for (what, pid, marker) in [
        (
            "background grandchild",
            grandchild,
            grandchild_marker.as_str(),
        ),
        ("shell", shell, shell_marker.as_str()),
    ] {
        wait_until(
            Duration::from_secs(10),
            &format!("the {what} (pid {pid}) is gone"),
            async || {
                !proc::is_alive(pid)
                    || !proc::cmdline(pid)
                        .is_some_and(|cmd| cmd.contains("sleep") || cmd.contains("sh"))
            },
        )
        .await;
        assert!(
            proc::find_by_cmdline(&format!("sleep {marker}")).is_empty(),
            "no `sleep {marker}` left"
        );
    }
    svc.wait_job_status("slow", "failed", WAIT).await;
}

/// Two webhook jobs that stamp the start and end of a 1 s run; both triggered at once.
async fn concurrent_runs(max_job_running: u32) -> ((f64, f64), (f64, f64)) {
    let command = "command = date +%s.%N >> stamps; sleep 1; date +%s.%N >> stamps";
    let svc = TestService::builder()
        .svc(format!("max_job_running = {max_job_running}"))
        .job_file("a", job_section("a", &["path = /a", command]))
        .job_file("b", job_section("b", &["path = /b", command]))
        .start()
        .await;
    let (a, b) = tokio::join!(svc.trigger("/a", b"", &[]), svc.trigger("/b", b"", &[]));
    a.assert_status(200);
    b.assert_status(200);
    for id in ["a", "b"] {
        svc.wait_run_finished(id, 1, WAIT)
            .await
            .assert_status("success");
    }
    (
        read_stamps(&svc.dir_work("a").join("stamps")),
        read_stamps(&svc.dir_work("b").join("stamps")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_job_running_1_serialises_runs() {
    let (a, b) = concurrent_runs(1).await;
    assert!(
        a.1 <= b.0 || b.1 <= a.0,
        "runs must not overlap with max_job_running = 1: a {a:?}, b {b:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_job_running_2_runs_in_parallel() {
    let (a, b) = concurrent_runs(2).await;
    assert!(
        a.0 < b.1 && b.0 < a.1,
        "runs overlap with max_job_running = 2: a {a:?}, b {b:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_retention_keeps_the_newest_logs() {
    let svc = TestService::builder()
        .job_file(
            "keep",
            job_section(
                "keep",
                &[
                    "path = /keep",
                    "log_retention = 2",
                    "command = echo run-$SVC_JOB_COUNTER",
                ],
            ),
        )
        .start()
        .await;
    for counter in 1..=4 {
        svc.trigger("/keep", b"", &[]).await.assert_status(200);
        svc.wait_run_finished("keep", counter, WAIT)
            .await
            .assert_status("success");
    }
    wait_until(WAIT, "exactly logs 3 and 4 on disk", async || {
        let files = svc.job_logs("keep");
        files.iter().map(|f| f.counter).collect::<Vec<_>>() == [3, 4]
    })
    .await;
    for file in svc.job_logs("keep") {
        file.assert_status("success");
        assert!(
            file.texts().contains(&format!("run-{}", file.counter)),
            "{}",
            file.content()
        );
    }
    wait_until(
        WAIT,
        "the environment lists logs 3 and 4 only",
        async || {
            svc.try_environment().await.is_ok_and(|env| {
                env_logs(&env["jobs"]["keep"]) == [(3, "success".into()), (4, "success".into())]
            })
        },
    )
    .await;
    svc.log("keep", 1).await.assert_status(404);
    svc.log("keep", 4).await.assert_status(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_while_running_is_queued_once_then_refused() {
    let svc = TestService::builder()
        .job_file(
            "busy",
            job_section("busy", &["path = /busy", "command = sleep 1.5"]),
        )
        .start()
        .await;
    svc.trigger("/busy", b"", &[]).await.assert_status(200);
    svc.wait_run_started("busy", 1, WAIT).await;
    svc.trigger("/busy", b"", &[]).await.assert_status(200);
    let refused = svc.trigger("/busy", b"", &[]).await;
    refused.assert_status(429);
    assert_eq!(refused.name(), "ERR_JOB_ALREADY_RUN");

    svc.wait_run_finished("busy", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_run_finished("busy", 2, WAIT)
        .await
        .assert_status("success");
    // The refused trigger must not have been kept: the job comes to rest after run 2
    // with nothing queued, and it has no timer, so no third run follows.
    svc_tests::ticks::wait_at_rest(&svc, "busy", 2, WAIT).await;
    let counters: Vec<u64> = svc.job_logs("busy").iter().map(|f| f.counter).collect();
    assert_eq!(counters, [1, 2], "only the accepted triggers ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_authentication() {
    let svc = TestService::builder()
        .job_file(
            "open",
            job_section("open", &["path = /open", "command = true"]),
        )
        .job_file(
            "own",
            job_section(
                "own",
                &[
                    "path = /own",
                    "secret = own-job-secret-1234",
                    "command = true",
                ],
            ),
        )
        .start()
        .await;
    let body = br#"{"ref":"main"}"#;
    svc.trigger_unsigned("/open", body, &[])
        .await
        .assert_status(401);
    svc.trigger("/open", body, &[("x-svc-sign", "00ff")])
        .await
        .assert_status(401);
    svc.trigger("/nowhere", body, &[]).await.assert_status(404);
    // A job with its own secret does not accept the main one.
    svc.trigger("/own", body, &[]).await.assert_status(401);
    svc.trigger_with_secret("/own", body, "own-job-secret-1234")
        .await
        .assert_status(200);
    svc.trigger("/open", body, &[]).await.assert_status(200);
    svc.wait_run_finished("own", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_run_finished("open", 1, WAIT)
        .await
        .assert_status("success");

    let raw = svc.get("/svc/api/environment").await.raw;
    assert!(
        !raw.contains(&svc.secret()),
        "the main secret is not exposed"
    );
    assert!(
        !raw.contains("own-job-secret-1234"),
        "a job secret is not exposed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_job_skips_timer_ticks_until_resumed() {
    let svc = TestService::builder()
        .job_file(
            "pausable",
            job_section("pausable", &["interval = 1s", "command = echo ran"]),
        )
        .start()
        .await;
    svc.wait_run_finished("pausable", 1, WAIT)
        .await
        .assert_status("success");

    let response = svc.pause("pausable").await;
    response.assert_status(200);
    assert_eq!(response.data()["status"], "paused", "{}", response.raw);
    svc.pause("no_such_job").await.assert_status(404);
    svc.resume("no_such_job").await.assert_status(404);
    let (body, _) = svc.job_exec_form("pausable");
    svc.post(
        "/svc/api/job_exec/resume",
        body.as_bytes(),
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            (
                "X-Svc-Sign",
                &svc_tests::hmac_sha256_hex("wrong secret", &body),
            ),
        ],
    )
    .await
    .assert_status(401);

    // A run that had already begun (a tick racing with the pause) may still finish; a
    // skipped tick shows the pause is in force, and after it nothing may start.
    svc_tests::ticks::wait_ticks_skipped(&svc, "paused", 1, WAIT).await;
    wait_until(WAIT, "no run in progress", async || {
        svc.job_logs("pausable")
            .iter()
            .all(|f| f.status != "started")
    })
    .await;
    let before = svc.job_logs("pausable");
    // Two more ticks of the 1 s interval came and were skipped.
    svc_tests::ticks::wait_ticks_skipped(&svc, "paused", 2, WAIT).await;
    assert_eq!(svc.job_logs("pausable"), before, "no run while paused");
    assert_eq!(svc.job_status("pausable").await, "paused");
    let last = before.last().expect("at least one log").counter;
    let state = svc.state_file("pausable").expect("state file");
    assert_eq!(
        state.get("counter"),
        Some(&last.to_string()),
        "no counter change while paused: {state:?}"
    );
    assert_eq!(
        state.get("paused").map(String::as_str),
        Some("true"),
        "{state:?}"
    );

    let response = svc.resume("pausable").await;
    response.assert_status(200);
    assert_eq!(
        response.data()["status"],
        "success",
        "a resumed job shows the status of its last run: {}",
        response.raw
    );
    svc.wait_run_finished("pausable", last + 1, WAIT)
        .await
        .assert_status("success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_get_a_clean_environment_and_their_working_directory() {
    let builder = TestService::builder().env("SVC_TEST_LEAK", "leaked");
    let work = builder.dir_base().join("work-here");
    std::fs::create_dir_all(&work).expect("create dir_work");
    let dir_work = format!("dir_work = {}", work.display());
    let svc = builder
        .job_file(
            "env",
            job_section(
                "env check",
                &[
                    "path = /env",
                    &dir_work,
                    "env = GREETING=hello world",
                    "env = SECOND=2",
                    "command = echo \"greeting=$GREETING second=$SECOND\"",
                    "command = echo \"id=$SVC_JOB_ID counter=$SVC_JOB_COUNTER\"",
                    "command = echo \"leak=${SVC_TEST_LEAK:-none} path=${PATH:+set} home=${HOME:+set}\"",
                    "command = echo \"pwd=$(pwd)\"",
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/env", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("env_check", 1, WAIT).await;
    log.assert_status("success");
    let texts = log.texts();
    let content = log.content();
    for expected in [
        "greeting=hello world second=2".to_owned(),
        "id=env_check counter=1".to_owned(),
        "leak=none path=set home=set".to_owned(),
        format!("pwd={}", work.display()),
    ] {
        assert!(
            texts.contains(&expected),
            "missing {expected:?} in:\n{content}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_body_reaches_commands_as_a_file() {
    let svc = TestService::builder()
        .job_file(
            "hook",
            job_section(
                "hook",
                &[
                    "path = /hook",
                    "command = echo \"body=$(cat \"$SVC_REQUEST_BODY\")\"",
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/hook", b"payload-$(id)-123", &[])
        .await
        .assert_status(200);
    let log = svc.wait_run_finished("hook", 1, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "body=payload-$(id)-123"),
        "{}",
        log.content()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_runs_as_its_configured_user() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: job_runs_as_its_configured_user needs root");
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .expect("look up nobody")
        .expect("user nobody exists");
    let builder = TestService::builder();
    let config = builder.dir_base().join("etc/svc/svc.conf");
    let cat = format!("command = cat {}", config.display());
    let svc = builder
        .job_file(
            "as_nobody",
            job_section(
                "as nobody",
                &[
                    "path = /nobody",
                    "user = nobody",
                    "command = echo \"uid=$(id -u) gid=$(id -g)\"",
                    &cat,
                    "command = echo after-cat",
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/nobody", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("as_nobody", 1, WAIT).await;
    let content = log.content();
    let texts = log.texts();
    assert!(
        texts.contains(&format!("uid={} gid={}", nobody.uid, nobody.gid)),
        "commands run as nobody and its primary group:\n{content}"
    );
    assert!(
        content.contains("Permission denied"),
        "nobody cannot read the 0600 main file:\n{content}"
    );
    assert!(
        !texts.iter().any(|t| t == "after-cat"),
        "the run stops at the failing cat:\n{content}"
    );
    log.assert_status("fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_names_its_user_gets_that_users_primary_group() {
    if !svc_tests::running_as_root("a_job_that_names_its_user_gets_that_users_primary_group") {
        return;
    }
    let daemon = nix::unistd::User::from_name("daemon")
        .expect("look up daemon")
        .expect("user daemon exists");
    let nobody = nix::unistd::User::from_name("nobody")
        .expect("look up nobody")
        .expect("user nobody exists");
    let svc = TestService::builder()
        // The main section's pair, as the package sets `svc`/`svc`.
        .svc("user = nobody")
        .svc(format!(
            "group = {}",
            nix::unistd::Group::from_gid(nobody.gid)
                .expect("look up nobody's group")
                .expect("nobody's group exists")
                .name
        ))
        .job_file(
            "own_user",
            job_section(
                "own_user",
                &[
                    "path = /own",
                    "user = daemon",
                    "command = echo \"gid=$(id -g)\"",
                ],
            ),
        )
        .job_file(
            "main_user",
            job_section(
                "main_user",
                &["path = /main", "command = echo \"gid=$(id -g)\""],
            ),
        )
        .start()
        .await;
    svc.trigger("/own", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("own_user", 1, WAIT).await;
    assert!(
        log.texts().contains(&format!("gid={}", daemon.gid)),
        "user = daemon without group runs with daemon's primary group:\n{}",
        log.content()
    );
    svc.trigger("/main", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("main_user", 1, WAIT).await;
    assert!(
        log.texts().contains(&format!("gid={}", nobody.gid)),
        "a job without its own user keeps the main section's group:\n{}",
        log.content()
    );
}
