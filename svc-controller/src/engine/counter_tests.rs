//! Run numbers after a crash: the next run follows the highest number any run of the job
//! left on disk (its logs, its history, its state file), whatever an earlier release
//! reserved, so that a crash leaves no gap and never reuses a number. Each test starts an
//! engine over the files a controller killed at some moment left.

use super::Kind;
use super::read::JobStatus;
use super::testkit::{Harness, settle, t0};
use crate::config::MainConfig;
use crate::store::history::RunRecord;
use crate::store::state::{RunResult, RunStatus};

const JOB: &str = "[job \"j\"]\npath = /j\ncommand = true\n";

/// Writes what the controller leaves of job `j`: its state file (when given) and its
/// logs, each `(counter, status)` with a status of the file name (`started`, `success`,
/// `fail`, or `creating` for a creation that a kill cut short).
fn leave(main: &MainConfig, state: Option<&str>, logs: &[(u64, &str)]) {
    if let Some(state) = state {
        std::fs::write(main.dir_job_state().join("j"), state).expect("write the state file");
    }
    let dir = main.dir_job_logs().join("j");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (counter, status) in logs {
        let mut text = crate::store::logstore::format_line(
            t0(),
            &format!("=== run {counter} of job j started by api"),
        );
        if *status == "success" || *status == "fail" {
            let end = format!("=== run {counter} finished: {status}");
            text.push_str(&crate::store::logstore::format_line(t0(), &end));
        }
        std::fs::write(dir.join(format!("j.{counter}.{status}")), text).expect("write a log");
    }
}

/// Triggers a run of `j`, checks its number and ends it with success.
async fn run_once(h: &mut Harness, counter: u64) {
    h.trigger_api("j").await.expect("run");
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("j", counter));
    run.finish(true, "ok");
    settle().await;
}

/// An earlier release reserved numbers 1 to 100 with one state write and wrote no state
/// as runs 2 and 3 began; the controller was killed during run 3. The next run is 4, not
/// 101: numbers that no run used are not skipped.
#[tokio::test(start_paused = true)]
async fn a_crash_with_a_reserved_block_leaves_no_gap() {
    let mut h = Harness::new_after("", JOB, |main| {
        let state = "last_run = 2026-01-05T09:00:00Z\nstatus = started\ncounter = 1\n\
                     counter_reserved = 100\npaused = false\n";
        leave(
            main,
            Some(state),
            &[(1, "success"), (2, "success"), (3, "started")],
        );
    });
    h.engine.start_timers();
    assert_eq!(h.engine.log_counters(Kind::Job, "j"), Ok(vec![1, 2, 3]));
    let state = h.state_file("j");
    assert_eq!(state.counter, 3, "the newest log's number");
    assert_eq!(
        state.last_result,
        Some(RunResult::Fail),
        "run 3 was interrupted"
    );
    let text = std::fs::read_to_string(h.state_path("j")).expect("the state file");
    assert!(!text.contains("counter_reserved"), "{text}");

    run_once(&mut h, 4).await;
    assert_eq!(
        h.log_files("j"),
        ["j.1.success", "j.2.success", "j.3.fail", "j.4.success"]
    );
    assert_eq!(h.state_file("j").counter, 4);
}

/// Logs with numbers above the state file's counter (the state is written as runs end,
/// off the run path; a kill came first): their numbers are used, never again, and the
/// job shows the result of the newest.
#[tokio::test(start_paused = true)]
async fn logs_above_the_state_counter_are_never_reused() {
    let mut h = Harness::new_after("", JOB, |main| {
        let state = "last_run = 2026-01-05T09:00:00Z\nstatus = success\ncounter = 1\n\
                     paused = false\n";
        leave(
            main,
            Some(state),
            &[(1, "success"), (2, "fail"), (3, "success")],
        );
    });
    h.engine.start_timers();
    assert_eq!(h.status("j"), JobStatus::Finished(RunResult::Success));
    assert_eq!(h.state_file("j").counter, 3);
    run_once(&mut h, 4).await;
    let first = h.log("j", "j.3.success");
    assert!(
        first.contains("=== run 3 finished: success"),
        "untouched: {first}"
    );
}

/// A kill while run 4's log was being created (before it got its name): nothing of run 4
/// showed, so the next run takes its number, and the leftover goes.
#[tokio::test(start_paused = true)]
async fn a_log_creation_cut_short_leaves_its_number_to_the_next_run() {
    let mut h = Harness::new_after("", JOB, |main| {
        let state = "last_run = 2026-01-05T09:00:00Z\nstatus = success\ncounter = 3\n\
                     paused = false\n";
        leave(main, Some(state), &[(3, "success"), (4, "creating")]);
    });
    h.engine.start_timers();
    run_once(&mut h, 4).await;
    assert_eq!(h.log_files("j"), ["j.3.success", "j.4.success"]);
}

/// No state file (a reboot empties `/var/run`) and a history that knows a run newer
/// than the newest log (its log could not be made): the next run follows the history.
#[tokio::test(start_paused = true)]
async fn without_a_state_file_the_history_counts_too() {
    let mut h = Harness::new_after("", JOB, |main| {
        leave(main, None, &[(1, "success"), (2, "success")]);
        let history = crate::store::history::HistoryFile::new(&main.dir_history("job"), "j");
        let lines: String = (1..=3)
            .map(|counter| {
                RunRecord::lost(counter, RunStatus::Fail, (t0(), t0()), "no log").to_line()
            })
            .collect();
        std::fs::create_dir_all(main.dir_history("job")).expect("mkdir");
        std::fs::write(history.path(), lines).expect("write the history");
    });
    h.engine.start_timers();
    assert_eq!(h.state_file("j").counter, 3);
    run_once(&mut h, 4).await;
}

/// A run's number is on disk, in its log's name, before its command starts; the state
/// file is not written for it (the log is the record a start after a kill reads).
#[tokio::test(start_paused = true)]
async fn a_run_is_numbered_by_its_log_before_its_command_starts() {
    let mut h = Harness::new("", JOB);
    run_once(&mut h, 1).await;
    assert_eq!(h.state_file("j").counter, 1);
    h.trigger_api("j").await.expect("run");
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("j", 2));
    assert!(h.log_dir("j").join("j.2.started").exists());
    let state = crate::store::state::JobState::load(&h.state_path("j"))
        .expect("readable")
        .expect("the state file");
    assert_eq!((state.counter, state.started), (1, false), "not written");
    run.finish(true, "ok");
    settle().await;
    assert_eq!(h.state_file("j").counter, 2);
}

/// A timer's run is logged in the file its timer made ahead of the due time, which had
/// no name before (nothing shows the number early), and is numbered as without it.
#[tokio::test(start_paused = true)]
async fn a_timers_run_is_logged_in_the_file_made_ahead_of_its_due_time() {
    use std::os::unix::fs::MetadataExt as _;
    const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);
    let mut h = Harness::new("", "[job \"tick\"]\ninterval = 1h\ncommand = true\n");
    h.engine.start_timers();
    // Due at once: no time to make anything ahead.
    h.runs.next().await.finish(true, "ok");
    settle().await;

    // Within the launch-ahead time: the file is made, with no name.
    h.clock
        .set(t0() + HOUR - std::time::Duration::from_millis(100));
    assert!(h.runs.none().await);
    let inode = {
        let mut registry = h.engine.lock();
        let entry = registry.get(Kind::Job, "tick").expect("the job");
        let ahead = entry.slot.log_ahead.as_ref().expect("made ahead");
        ahead.inode()
    };
    assert_eq!(h.log_files("tick"), ["tick.1.success"]);

    h.clock.advance(std::time::Duration::from_millis(100));
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("tick", 2));
    settle().await;
    let named = std::fs::metadata(h.log_dir("tick").join("tick.2.started")).expect("the log");
    assert_eq!(named.ino(), inode, "the file made ahead is the run's log");
    assert!(
        h.log("tick", "tick.2.started")
            .contains("=== run 2 of job tick started by timer")
    );
    let taken = h
        .engine
        .lock()
        .get(Kind::Job, "tick")
        .expect("the job")
        .slot
        .log_ahead
        .is_none();
    assert!(taken, "taken by the run");
    run.finish(true, "ok");
    settle().await;
    assert_eq!(h.state_file("tick").counter, 2);
}
