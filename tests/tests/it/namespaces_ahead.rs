//! Runs whose runners made the run's namespaces while they waited for it
//! (`svc-runner/src/made_ahead.rs`) are contained like any run: the command's pid 1 is
//! the run's init, it sees only its run's processes, and of the jobs' working
//! directories not the other job's. Two ways a runner is started ahead with its job
//! known: a timer's, before the due time (two jobs due together, three runs each), and
//! the spare started while one job's runs come back to back (a busy job with a queued
//! trigger). With the real controller and runner as root. Where runs get cgroups of
//! their own (the thread that joins the namespaces joined the cgroup first), the logs
//! say which runs' namespaces were made ahead.

use svc_tests::{TestService, WAIT, job_section, send_until_queued};

/// The value after `key=` on a line of the commands' output (not the line that shows
/// the command, which starts with `$`).
fn value<'a>(content: &'a str, key: &str) -> Option<&'a str> {
    let needle = format!(" {key}=");
    content
        .lines()
        .filter(|line| !line.contains(" $ "))
        .find_map(|line| line.split_once(&needle).map(|(_, value)| value.trim()))
}

/// What a run's log says when its namespaces were made while its runner waited.
const MADE_AHEAD: &str = "(made while its runner waited for it)";

/// The commands of a job that report what its run sees, `other` being the working
/// directory of another job; and `more` after them.
fn job(id: &str, other: &std::path::Path, more: &[&str]) -> String {
    let mut lines = vec![
        "command = echo pid1=$(cat /proc/1/comm)".to_string(),
        "command = echo processes=$(ls /proc | grep -c '^[0-9]')".to_string(),
        // Shell arithmetic tells the output from the command line in the log.
        format!(
            "command = test -e {} && echo other=seen-$((40 + 2)) || echo other=hidden-$((40 + 2))",
            other.display()
        ),
    ];
    lines.extend(more.iter().map(|line| line.to_string()));
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    job_section(id, &lines)
}

/// Checks that run `counter` of `id` succeeded, contained like any run; returns its log.
fn assert_contained(id: &str, counter: u64, content: &str, status: &str) {
    assert_eq!(status, "success", "{id} #{counter}: {content}");
    assert!(
        content.contains("contained: PID, mount and IPC namespaces of the run's own"),
        "{id} #{counter}: {content}"
    );
    assert_eq!(
        value(content, "pid1"),
        Some("svc-run-init"),
        "{id} #{counter}: {content}"
    );
    // The init, the shell and `ls` (and the command substitution's shell).
    let processes: u32 = value(content, "processes")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX);
    assert!(processes <= 5, "{id} #{counter}: {content}");
    // Both jobs' working directories exist on the host from the first runs on.
    assert_eq!(
        value(content, "other"),
        Some("hidden-42"),
        "{id} #{counter} sees the other job's working directory: {content}"
    );
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
    let svc = builder
        .job_file(
            "tick-a",
            job("tick-a", &works.join("tick-b"), &["interval = 1s"]),
        )
        .job_file(
            "tick-b",
            job("tick-b", &works.join("tick-a"), &["interval = 1s"]),
        )
        .start()
        .await;
    let with_cgroups = svc.stderr().contains("runs get cgroups of their own");
    for counter in 1..=3u64 {
        for id in ["tick-a", "tick-b"] {
            let log = svc.wait_run_finished(id, counter, WAIT).await;
            let content = log.content();
            assert_contained(id, counter, &content, &log.status);
            // The first run may come before its timer could start a runner ahead.
            if with_cgroups && counter > 1 {
                assert!(
                    content.contains(MADE_AHEAD),
                    "{id} #{counter} made its namespaces at its start: {content}"
                );
            }
        }
    }
}

/// A busy job's runs one after the other: each trigger is sent while the run before
/// goes on, so it waits in the queue and its run follows at once. The first two runs
/// tell the controller that one job's runs come back to back; from then on the spare
/// runner started for the next run is told that job's private directories.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_jobs_next_runs_have_namespaces_made_ahead_and_are_contained() {
    if !svc_tests::can_run_unit_like(
        "a_busy_jobs_next_runs_have_namespaces_made_ahead_and_are_contained",
    ) {
        return;
    }
    let builder = TestService::builder();
    let works = builder.dir_base().join("var/lib/svc/job");
    let svc = builder
        .job_file(
            "other",
            job("other", &works.join("busy"), &["path = /other"]),
        )
        .job_file(
            "busy",
            job(
                "busy",
                &works.join("other"),
                &["path = /busy", "command = sleep 0.3"],
            ),
        )
        .start()
        .await;
    // Gives the other job its working directory on the host.
    svc.trigger("/other", b"{}", &[]).await.assert_status(200);
    svc.wait_run_finished("other", 1, WAIT).await;
    let with_cgroups = svc.stderr().contains("runs get cgroups of their own");
    const RUNS: u64 = 6;
    svc.trigger("/busy", b"{}", &[]).await.assert_status(200);
    for counter in 1..RUNS {
        svc.wait_run_started("busy", counter, WAIT).await;
        // Run `counter` goes on (it sleeps): this trigger waits for it in the queue.
        send_until_queued(
            WAIT,
            &format!("a trigger queued behind run {counter}"),
            async || svc.trigger("/busy", b"{}", &[]).await,
        )
        .await;
    }
    let mut made_ahead = Vec::new();
    for counter in 1..=RUNS {
        let log = svc.wait_run_finished("busy", counter, WAIT).await;
        let content = log.content();
        assert_contained("busy", counter, &content, &log.status);
        if content.contains(MADE_AHEAD) {
            made_ahead.push(counter);
        }
    }
    eprintln!("runs of the busy job with namespaces made ahead: {made_ahead:?} of 1..={RUNS}");
    if with_cgroups {
        // Runs 1 and 2 come before the controller has seen the job's runs back to back;
        // from run 3 on, the spare started at the run before was told the job's
        // directories. One may still miss it, when its spare was not ready in time (a
        // machine slow to start a runner): the next is then made ahead again.
        let from_third = made_ahead.iter().filter(|&&counter| counter >= 3).count();
        assert!(
            from_third >= 3,
            "runs of a busy job whose namespaces were made ahead: {made_ahead:?} of 1..={RUNS}"
        );
        assert!(
            !made_ahead.contains(&1),
            "the first run cannot have had a spare told its job: {made_ahead:?}"
        );
    }
}
