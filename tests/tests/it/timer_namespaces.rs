//! Timer runs, whose runners are started ahead of the due time and make the run's
//! namespaces while they wait (`svc-runner/src/made_ahead.rs`), are contained like any
//! run: the command's pid 1 is the run's init, it sees only its run's processes, and of
//! the jobs' working directories not the other job's. Two jobs due together,
//! three runs each, with the real controller and runner as root. Where runs get
//! cgroups of their own (the thread that joins the namespaces joined the cgroup first),
//! the log of every run after the first says its namespaces were made ahead.

use svc_tests::{TestService, WAIT, job_section};

/// The value after `key=` on a line of the commands' output (not the line that shows
/// the command, which starts with `$`).
fn value<'a>(content: &'a str, key: &str) -> Option<&'a str> {
    let needle = format!(" {key}=");
    content
        .lines()
        .filter(|line| !line.contains(" $ "))
        .find_map(|line| line.split_once(&needle).map(|(_, value)| value.trim()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_runs_with_namespaces_made_ahead_are_contained_like_any_run() {
    if !svc_tests::can_run_unit_like(
        "timer_runs_with_namespaces_made_ahead_are_contained_like_any_run",
    ) {
        return;
    }
    // A permit for each job's run, so that each timer may start its runner ahead.
    let builder = TestService::builder().svc("max_job_running = 2");
    // The jobs' working directories' parent: covered in each run but for its own entry
    // (the runs' temporary directories are that too, and unreadable besides).
    let works = builder.dir_base().join("var/lib/svc/job");
    let job = |id: &str, other: &str| {
        let other_dir = works.join(other);
        let lines = [
            "interval = 1s".to_string(),
            "command = echo pid1=$(cat /proc/1/comm)".to_string(),
            "command = echo processes=$(ls /proc | grep -c '^[0-9]')".to_string(),
            // Shell arithmetic tells the output from the command line in the log.
            format!(
                "command = test -e {} && echo other=seen-$((40 + 2)) || echo other=hidden-$((40 + 2))",
                other_dir.display()
            ),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        job_section(id, &lines)
    };
    let svc = builder
        .job_file("tick-a", job("tick-a", "tick-b"))
        .job_file("tick-b", job("tick-b", "tick-a"))
        .start()
        .await;
    let with_cgroups = svc.stderr().contains("runs get cgroups of their own");
    for counter in 1..=3u64 {
        for id in ["tick-a", "tick-b"] {
            let log = svc.wait_run_finished(id, counter, WAIT).await;
            let content = log.content();
            assert_eq!(log.status, "success", "{id} #{counter}: {content}");
            assert!(
                content.contains("contained: PID, mount and IPC namespaces of the run's own"),
                "{id} #{counter}: {content}"
            );
            // The first run may come before its timer could start a runner ahead.
            if with_cgroups && counter > 1 {
                assert!(
                    content.contains("(made while its runner waited for it)"),
                    "{id} #{counter} made its namespaces at its start: {content}"
                );
            }
            assert_eq!(
                value(&content, "pid1"),
                Some("svc-run-init"),
                "{id} #{counter}: {content}"
            );
            // The init, the shell and `ls` (and the command substitution's shell).
            let processes: u32 = value(&content, "processes")
                .and_then(|n| n.parse().ok())
                .unwrap_or(u32::MAX);
            assert!(processes <= 5, "{id} #{counter}: {content}");
            // Both jobs' working directories exist on the host from the first runs on.
            assert_eq!(
                value(&content, "other"),
                Some("hidden-42"),
                "{id} #{counter} sees the other job's working directory: {content}"
            );
        }
    }
}
