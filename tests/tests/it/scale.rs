//! What matters with many jobs: a start reads what is on disk without rewriting it, and
//! the timers report how late they fire.

use std::os::unix::fs::MetadataExt;

use svc_tests::{TestService, job_section};

/// The identity of a file's current content: an atomic replace makes a new inode.
fn inode(path: &std::path::Path) -> (u64, i64, i64) {
    let meta = std::fs::metadata(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    (meta.ino(), meta.mtime(), meta.mtime_nsec())
}

/// A state file that already says what the start-up would write is left alone: with
/// thousands of jobs, rewriting (and syncing) every one of them made each start take
/// seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_leaves_unchanged_state_files_alone() {
    let mut svc = TestService::builder()
        .job_file(
            "idle",
            job_section("idle", &["interval = 24h", "command = true"]),
        )
        .build();
    let state = svc.state_path("idle");
    std::fs::create_dir_all(state.parent().expect("state dir")).expect("mkdir");
    // Ran an hour ago (counter 3): nothing to repair.
    let last_run = (chrono::Utc::now() - chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    std::fs::write(
        &state,
        format!("last_run = {last_run}\nstatus = success\ncounter = 3\npaused = false\n"),
    )
    .expect("write the state file");
    let before = inode(&state);

    svc.start().await;
    assert_eq!(
        inode(&state),
        before,
        "the first start rewrote the state file"
    );
    assert_eq!(svc.job_status("idle").await, "success");
    svc.restart().await;
    assert_eq!(inode(&state), before, "a restart rewrote the state file");
    let saved = svc.state_file("idle").expect("state file");
    assert_eq!(saved.get("counter").map(String::as_str), Some("3"));
}

/// Live child processes of `pid` (the controller's runners).
fn children(pid: i32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|child| child.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|child| svc_tests::proc::is_alive(*child))
        .count()
}

/// Jobs due at the same instant start no more runners ahead of it than can run
/// (`max_job_running`, here 1): the others get theirs when their turn comes. Before, each
/// timer started one, so a thousand jobs on one interval started a thousand processes at
/// once. Every tick is counted in `svc_timer_lateness_seconds`, and every job still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_due_together_start_no_more_runners_ahead_than_can_run() {
    const JOBS: usize = 12;
    let names: Vec<String> = (0..JOBS).map(|i| format!("due{i:02}")).collect();
    let mut builder = TestService::builder();
    for name in &names {
        builder = builder.job_file(
            name,
            job_section(name, &["interval = 1h", "command = true"]),
        );
    }
    let mut svc = builder.build();
    // Built (or found current) before the clock starts: that can take seconds.
    svc_tests::binaries();
    // Last run one interval before a whole second 4 s from now: all due at that second.
    let now = chrono::Utc::now();
    let due = chrono::DateTime::from_timestamp(now.timestamp() + 4, 0).expect("due time");
    let last_run =
        (due - chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    for name in &names {
        let state = svc.state_path(name);
        std::fs::create_dir_all(state.parent().expect("state dir")).expect("mkdir");
        std::fs::write(
            &state,
            format!("last_run = {last_run}\nstatus = success\ncounter = 1\npaused = false\n"),
        )
        .expect("write the state file");
    }
    svc.start().await;
    let pid = svc.pid().expect("pid");

    // The runners started ahead are there from 250 ms before the due time: look at them
    // until just before it.
    let (mut most, mut looks) = (0, 0);
    loop {
        let left = due - chrono::Utc::now();
        if left < chrono::Duration::milliseconds(20) {
            break;
        }
        if left < chrono::Duration::milliseconds(200) {
            most = most.max(children(pid));
            looks += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(
        looks > 0,
        "the start took until the due time: nothing to judge"
    );
    assert!(
        most <= 1,
        "{most} runners started ahead of {JOBS} jobs due together (max_job_running = 1)"
    );
    for name in &names {
        svc.wait_run_finished(name, 2, svc_tests::WAIT)
            .await
            .assert_status("success");
    }
    let text = svc.get("/svc/api/metrics").await.raw;
    let count = text
        .lines()
        .find_map(|line| line.strip_prefix("svc_timer_lateness_seconds_count "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .unwrap_or_default();
    assert!(count >= JOBS as f64, "{count} ticks counted:\n{text}");
}

/// `svc_run_queue_length` is counted when the metrics are read, and still says how many
/// runs wait: a queued trigger while a run goes on, none once both have run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_length_is_counted_when_read() {
    let svc = TestService::builder()
        .job_file(
            "slow",
            job_section("slow", &["path = /slow", "command = sleep 1"]),
        )
        .start()
        .await;
    let waiting = async || {
        let text = svc.get("/svc/api/metrics").await.raw;
        text.lines()
            .find_map(|line| line.strip_prefix("svc_run_queue_length "))
            .and_then(|value| value.trim().parse::<u64>().ok())
    };
    svc.trigger("/slow", b"", &[]).await.assert_status(200);
    svc.trigger("/slow", b"", &[]).await.assert_status(200);
    assert_eq!(waiting().await, Some(1), "one trigger waits behind the run");
    svc.wait_run_finished("slow", 2, svc_tests::WAIT)
        .await
        .assert_status("success");
    svc_tests::wait_for(svc_tests::WAIT, "no run waiting", async || {
        (waiting().await == Some(0)).then_some(())
    })
    .await;
}

/// A tick that finds its job's previous run still going on is counted in
/// `svc_timer_ticks_skipped_total`, not written to the log: with many jobs on short
/// intervals that was a line per job and second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_ticks_are_counted_not_logged() {
    let svc = TestService::builder()
        .job_file(
            "long",
            job_section("long", &["interval = 1s", "command = sleep 3"]),
        )
        .start()
        .await;
    let skipped = svc_tests::wait_for(svc_tests::WAIT, "a skipped tick counted", async || {
        let text = svc.get("/svc/api/metrics").await.raw;
        text.lines()
            .find_map(|line| {
                line.strip_prefix("svc_timer_ticks_skipped_total{reason=\"running\"} ")
            })
            .and_then(|value| value.trim().parse::<f64>().ok())
            .filter(|count| *count >= 1.0)
    })
    .await;
    assert!(skipped >= 1.0);
    assert!(
        !svc.stderr().contains("still going on"),
        "a skipped tick was logged:\n{}",
        svc.stderr()
    );
}
