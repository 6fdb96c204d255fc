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
    // Ran an hour ago (counter 3, no reservation beyond it): nothing to repair.
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
