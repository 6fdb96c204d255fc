//! No accepted trigger is lost: the one-slot queue survives a pause, a stop, a crash and
//! a reload, and a queued trigger runs exactly once.

use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;
use svc_tests::{TestService, WAIT, fresh_epoch, hmac_sha256_hex, job_section, wait_until};

/// A job whose runs wait until the file `go` exists below `dir_base` (at most a minute).
fn holding_job(dir_base: &Path) -> (String, PathBuf) {
    let go = dir_base.join("go");
    let section = job_section(
        "hold",
        &[
            "path = /hold",
            "timeout = 60s",
            &format!(
                "command = while [ ! -e {} ]; do sleep 0.05; done; echo run $SVC_JOB_COUNTER body $(cat \"$SVC_REQUEST_BODY\")",
                go.display()
            ),
        ],
    );
    (section, go)
}

/// Waits until the state file of `hold` records run 2's success and asserts that it
/// holds no queued trigger any more; the state.
async fn end_saved_with_nothing_queued(
    svc: &TestService,
) -> std::collections::BTreeMap<String, String> {
    wait_until(WAIT, "run 2's end is saved", async || {
        svc.state_file("hold")
            .is_some_and(|state| state.get("status").map(String::as_str) == Some("success"))
    })
    .await;
    let state = svc.state_file("hold").expect("state file");
    assert!(!state.contains_key("queued"), "{state:?}");
    state
}

/// Starts the service with the holding job, starts run 1 and queues a second trigger
/// (body `second`); returns the service and the release file.
async fn one_running_one_queued() -> (TestService, PathBuf) {
    let builder = TestService::builder();
    let (section, go) = holding_job(builder.dir_base());
    let svc = builder.job_file("hold", section).start().await;
    svc.trigger("/hold", b"first", &[]).await.assert_status(200);
    svc.wait_run_started("hold", 1, WAIT).await;
    svc.trigger("/hold", b"second", &[])
        .await
        .assert_status(200);
    let state = svc.state_file("hold").expect("state file");
    assert_eq!(
        state.get("queued").map(String::as_str),
        Some("webhook"),
        "the queued trigger is saved before the 200: {state:?}"
    );
    (svc, go)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_trigger_waits_through_a_pause_and_runs_after_the_resume() {
    let (svc, go) = one_running_one_queued().await;
    svc.pause("hold").await.assert_status(200);
    std::fs::write(&go, b"").expect("release run 1");
    svc.wait_run_finished("hold", 1, WAIT)
        .await
        .assert_status("success");
    // Run 1's end is saved with the trigger still queued, and no run 2 began.
    wait_until(WAIT, "run 1's end is saved", async || {
        svc.state_file("hold")
            .is_some_and(|state| state.get("status").map(String::as_str) == Some("success"))
    })
    .await;
    let state = svc.state_file("hold").expect("state file");
    assert_eq!(
        state.get("queued").map(String::as_str),
        Some("webhook"),
        "{state:?}"
    );
    assert_eq!(
        state.get("counter").map(String::as_str),
        Some("1"),
        "{state:?}"
    );
    assert_eq!(svc.job_status("hold").await, "paused");

    svc.resume("hold").await.assert_status(200);
    let log = svc.wait_run_finished("hold", 2, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "run 2 body second"),
        "the queued trigger ran with its own body:\n{}",
        log.content()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_trigger_survives_a_crash_and_runs_exactly_once() {
    let (mut svc, go) = one_running_one_queued().await;
    svc.kill9().await;
    std::fs::write(&go, b"").expect("let later runs go");
    svc.start().await;
    // The queued trigger runs as 2, the number after the newest log's.
    let log = svc.wait_run_finished("hold", 2, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "run 2 body second"),
        "{}",
        log.content()
    );
    svc.job_log("hold", 1).expect("log 1").assert_status("fail");
    // Its taking recorded before its command started, and its end saved without it:
    // another start finds nothing queued, and nothing runs again.
    end_saved_with_nothing_queued(&svc).await;
    svc.restart().await;
    let state = svc.state_file("hold").expect("state file");
    assert_eq!(
        state.get("counter").map(String::as_str),
        Some("2"),
        "{state:?}"
    );
    let counters: Vec<u64> = svc.job_logs("hold").iter().map(|log| log.counter).collect();
    assert_eq!(counters, vec![1, 2], "the trigger ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_trigger_survives_a_stop() {
    let (mut svc, go) = one_running_one_queued().await;
    let status = svc.stop().await;
    assert_eq!(status.code(), Some(0));
    let state = svc.state_file("hold").expect("state file");
    assert_eq!(
        state.get("queued").map(String::as_str),
        Some("webhook"),
        "{state:?}"
    );
    std::fs::write(&go, b"").expect("let later runs go");
    svc.start().await;
    svc.wait_run_finished("hold", 2, WAIT)
        .await
        .assert_status("success");
}

/// `POST /svc/api/reload`, signed with the main secret: answered once the daemon has
/// read the files again and applied them.
async fn reload(svc: &TestService) {
    let body = format!("_svc_epoch={}", fresh_epoch());
    let signature = hmac_sha256_hex(svc.secret(), &body);
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("x-svc-sign", signature.as_str()),
    ];
    svc.post("/svc/api/reload", body.as_bytes(), &headers)
        .await
        .assert_status(200);
}

/// The daemon's reload, from the files, keeps a job's queued trigger whether the job's
/// section stays the same or another key of it changes: the trigger runs once, after run
/// 1, as run 2, with its own body, by the definition in force when it begins. (The
/// engine's `reload_tests.rs` go through more kinds of change, and a trigger waiting for
/// a permit.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_trigger_survives_reloads_that_keep_its_job() {
    let (svc, go) = one_running_one_queued().await;
    let file = svc.job_d().join("hold.conf");
    let section = std::fs::read_to_string(&file).expect("the job's file");
    let section = format!("{}\n", section.trim_end());
    let changed = format!("{section}command = echo reloaded\n");
    for text in [&section, &changed] {
        std::fs::write(&file, text).expect("write the job's file");
        reload(&svc).await;
        let state = svc.state_file("hold").expect("state file");
        assert_eq!(
            state.get("queued").map(String::as_str),
            Some("webhook"),
            "{state:?}"
        );
        // Its slot is still taken: another trigger is refused as busy.
        svc.trigger("/hold", b"third", &[]).await.assert_status(429);
    }
    assert!(svc.job_log("hold", 2).is_none(), "it waits for run 1");
    std::fs::write(&go, b"").expect("release run 1");
    svc.wait_run_finished("hold", 1, WAIT)
        .await
        .assert_status("success");
    let log = svc.wait_run_finished("hold", 2, WAIT).await;
    log.assert_status("success");
    let texts = log.texts();
    assert!(
        texts.iter().any(|t| t == "run 2 body second") && texts.iter().any(|t| t == "reloaded"),
        "its own body, by the new definition:\n{}",
        log.content()
    );
    let state = end_saved_with_nothing_queued(&svc).await;
    assert_eq!(
        state.get("counter").map(String::as_str),
        Some("2"),
        "{state:?}"
    );
    let counters: Vec<u64> = svc.job_logs("hold").iter().map(|log| log.counter).collect();
    assert_eq!(counters, vec![1, 2], "the trigger ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_trigger_of_a_removed_job_is_dropped_with_a_log_line_and_a_metric() {
    let (svc, go) = one_running_one_queued().await;
    std::fs::remove_file(svc.job_d().join("hold.conf")).expect("remove the job");
    svc.signal(Signal::SIGHUP);
    wait_until(WAIT, "the drop is logged", async || {
        svc.stderr().contains("queued trigger dropped")
    })
    .await;
    let metrics = svc.get("/svc/api/metrics").await.raw;
    assert!(
        metrics
            .lines()
            .any(|line| line == "svc_triggers_dropped_total{reason=\"job_removed\"} 1"),
        "{metrics}"
    );
    std::fs::write(&go, b"").expect("release run 1");
    svc.wait_run_finished("hold", 1, WAIT)
        .await
        .assert_status("success");
    assert!(svc.job_log("hold", 2).is_none());
}

/// The run that takes a queued trigger records that before its command starts (in the
/// take record beside the state file, until the state file is rewritten without the
/// trigger): a controller killed during that run does not run the trigger again at its
/// next start, whichever of the two said so when it was killed (the engine's tests set
/// up the take record's case on its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_trigger_whose_run_was_killed_is_not_run_again() {
    let builder = TestService::builder();
    // Each run waits for its own release file, `go.<counter>`.
    let gates = builder.dir_base().join("go");
    let section = job_section(
        "gate",
        &[
            "path = /gate",
            "timeout = 60s",
            &format!(
                "command = while [ ! -e {}.$SVC_JOB_COUNTER ]; do sleep 0.05; done; echo run $SVC_JOB_COUNTER body $(cat \"$SVC_REQUEST_BODY\")",
                gates.display()
            ),
        ],
    );
    let release = |counter: u64| {
        std::fs::write(format!("{}.{counter}", gates.display()), b"").expect("release a run")
    };
    let mut svc = builder.job_file("gate", section).start().await;
    svc.trigger("/gate", b"first", &[]).await.assert_status(200);
    svc.wait_run_started("gate", 1, WAIT).await;
    svc.trigger("/gate", b"second", &[])
        .await
        .assert_status(200);
    release(1);
    // Run 2 takes the queued trigger and waits: killed there. Its log exists before the
    // take record is written; its command line, only after (the command starts once the
    // take is durable). Killed before that, the trigger rightly runs again.
    svc.wait_run_started("gate", 2, WAIT).await;
    svc_tests::wait_until(WAIT, "run 2's command started", async || {
        svc.job_log("gate", 2)
            .is_some_and(|log| log.content().contains("$ while"))
    })
    .await;
    svc.kill9().await;
    for counter in [3, 4] {
        release(counter);
    }
    svc.start().await;
    // A new trigger runs as 3, the number after run 2's: had the queued trigger run
    // again, it would have had 3.
    svc.trigger("/gate", b"third", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("gate", 3, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|t| t == "run 3 body third"),
        "{}",
        log.content()
    );
    svc.job_log("gate", 2)
        .expect("the log of run 2")
        .assert_status("fail");
    let counters: Vec<u64> = svc.job_logs("gate").iter().map(|log| log.counter).collect();
    assert_eq!(counters, vec![1, 2, 3], "the queued trigger ran once");
    assert!(
        !svc.state_file("gate")
            .expect("state file")
            .contains_key("queued"),
        "no longer queued"
    );
}
