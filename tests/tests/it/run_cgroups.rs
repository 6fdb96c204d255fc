//! Each run of commands in a cgroup of its own, on the real controller: a fork loop is
//! held to its run's `limit_pids` while other runs and the API go on; a run past its
//! `limit_memory` ends `failed` with reason `oom`; the CPU time and peak memory of known
//! workloads are read from the cgroup within 10 %.
//!
//! These machines mount the controllers as cgroup v1 and the tests run as root, so the
//! service gets cgroups (v1) here; where it gets none (not root, no writable hierarchy)
//! each test says so and ends, since the mode then is the fallback that
//! `rlimits.rs` tests.

use serde_json::Value;
use svc_tests::{TestService, WAIT, job_section, wait_for, wait_until};

/// Whether the service's start-up log says its runs get cgroups; if not, says why the
/// test ends here.
fn has_cgroups(svc: &TestService) -> bool {
    let log = svc.stderr();
    if log.contains("runs get cgroups of their own") {
        return true;
    }
    let why = log
        .lines()
        .find(|line| line.contains("runs get no cgroups"))
        .unwrap_or("no cgroup line in the start-up log");
    eprintln!("skipped: this host gives the service no cgroups for its runs: {why}");
    false
}

async fn run_of(svc: &TestService, id: &str, counter: u64) -> Value {
    wait_for(
        WAIT,
        &format!("run {counter} of {id} in its history"),
        async || {
            let answer = svc.runs("job_exec", id, "").await;
            answer.assert_status(200);
            answer
                .data()
                .as_array()?
                .iter()
                .find(|run| run["counter"] == counter)
                .cloned()
        },
    )
    .await
}

/// Tasks a fork loop may have: few, so that the loop meets the limit at once.
const LIMIT_PIDS: u64 = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_loop_is_held_to_its_runs_limit_while_other_runs_and_the_api_go_on() {
    // A shell starts 100 sleepers (more than the limit lets it) until a fork fails,
    // which ends it; the command then counts the processes its run has (its PID
    // namespace's /proc, with builtins only: no fork is left), says so, and becomes a
    // sleeper itself, holding the run until it is cancelled.
    let bomb = "sh -c 'i=0; while [ $i -lt 100 ]; do sleep 300 & i=$((i+1)); done' 2>/dev/null; \
                n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo \"processes $n\"; \
                exec sleep 300";
    let mut svc = TestService::builder()
        .svc("max_job_running = 4")
        .job_file(
            "bomb",
            job_section(
                "bomb",
                &[
                    "path = /bomb",
                    &format!("command = {bomb}"),
                    &format!("limit_pids = {LIMIT_PIDS}"),
                    "timeout = 60s",
                ],
            ),
        )
        .job_file(
            "other",
            job_section(
                "other",
                &[
                    "path = /other",
                    "command = sh -c 'echo one; echo two' | wc -l",
                ],
            ),
        )
        .build();
    svc.start().await;
    if !has_cgroups(&svc) {
        return;
    }
    svc.trigger("/bomb", b"", &[]).await.assert_status(200);
    let counted = wait_for(WAIT, "the fork loop's count of its processes", async || {
        // 404 until the run has begun.
        if svc.log("bomb", 1).await.status != 200 {
            return None;
        }
        let log = svc.log_content("bomb", 1).await;
        // (The command's own line holds the words too, with `$n`.)
        log.lines()
            .filter_map(|line| {
                line.rsplit_once(" processes ")?
                    .1
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .next()
    })
    .await;
    // The namespace's init (pid 1) is the runner's, outside the run's cgroup.
    assert!(
        counted <= LIMIT_PIDS + 1,
        "{counted} processes in a run limited to {LIMIT_PIDS} tasks"
    );

    // While the loop holds every task its run may have: another run, and the API.
    svc.trigger("/other", b"", &[]).await.assert_status(200);
    let other = run_of(&svc, "other", 1).await;
    assert_eq!(other["status"], "success", "{other}");
    svc.get("/svc/api/environment").await.assert_status(200);

    svc.cancel("bomb").await.assert_status(200);
    let bomb = run_of(&svc, "bomb", 1).await;
    assert_eq!(bomb["status"], "canceled", "{bomb}");
    let log = svc.log_content("bomb", 1).await;
    assert!(
        log.contains("fork(s) refused, the run reached its limit of 16 tasks"),
        "{log}"
    );
    svc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_memory_limit_ends_failed_with_reason_oom() {
    // dd holds one buffer of its block size: 128 MiB against a limit of 32 MiB.
    let mut svc = TestService::builder()
        .job_file(
            "hog",
            job_section(
                "hog",
                &[
                    "path = /hog",
                    "command = dd if=/dev/zero of=/dev/null bs=128M count=1",
                    "limit_memory = 32M",
                ],
            ),
        )
        .build();
    svc.start().await;
    if !has_cgroups(&svc) {
        return;
    }
    svc.trigger("/hog", b"", &[]).await.assert_status(200);
    let run = run_of(&svc, "hog", 1).await;
    assert_eq!(run["status"], "fail", "{run}");
    assert_eq!(run["reason"], "oom", "{run}");
    let summary = run["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("oom: out of memory (limit_memory = 32M)"),
        "{run}"
    );
    let log = svc.log_content("hog", 1).await;
    assert!(
        log.contains("--- oom: the kernel killed 1 process(es) of the run at its memory limit"),
        "{log}"
    );
    assert_eq!(run["usage"]["measured_by"], "cgroup", "{run}");
    svc.stop().await;
}

/// Bytes `dd` holds at once (its one buffer), and CPU ticks (10 ms) the burner spends.
const HOLD_BYTES: u64 = 96 << 20;
const BURN_TICKS: u64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_time_and_peak_memory_are_read_from_the_cgroup_within_ten_percent() {
    // The burner loops until the kernel has charged its shell BURN_TICKS (its own
    // /proc/<pid>/stat), then prints what it was charged in the end: known in CPU time
    // whatever the machine's load (a loaded machine lets it run past the mark between
    // two looks).
    let burner = format!(
        "command = t=0; while [ $t -lt {BURN_TICKS} ]; do i=0; \
         while [ $i -lt 300 ]; do i=$((i+1)); done; \
         read -r _ _ _ _ _ _ _ _ _ _ _ _ _ u s _ < /proc/$$/stat; t=$((u+s)); done; \
         echo charged=$t"
    );
    let hold = format!("command = dd if=/dev/zero of=/dev/null bs={HOLD_BYTES} count=1");
    let mut svc = TestService::builder()
        .svc("max_job_running = 2")
        .job_file("burn", job_section("burn", &["path = /burn", &burner]))
        .job_file("hold", job_section("hold", &["path = /hold", &hold]))
        .build();
    svc.start().await;
    if !has_cgroups(&svc) {
        return;
    }
    svc.trigger("/burn", b"", &[]).await.assert_status(200);
    svc.trigger("/hold", b"", &[]).await.assert_status(200);

    let burn = run_of(&svc, "burn", 1).await;
    assert_eq!(burn["status"], "success", "{burn}");
    assert_eq!(burn["usage"]["measured_by"], "cgroup", "{burn}");
    let ms = |run: &Value, field: &str| run["usage"][field].as_u64().unwrap_or(0);
    let cpu = ms(&burn, "cpu_user_ms") + ms(&burn, "cpu_system_ms");
    let log = svc.log_content("burn", 1).await;
    // The last mention: the first is the command line itself.
    let charged: u64 = log
        .rsplit("charged=")
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ticks| ticks.parse().ok())
        .unwrap_or_else(|| panic!("the burner says what it was charged:\n{log}"));
    assert!(charged >= BURN_TICKS, "{log}");
    // Within ten percent of what the kernel charged the shell, give or take the one
    // tick its own figure is rounded to, plus what the run's runner spends meanwhile in
    // the same cgroup: it watches the run's processes every 20 ms (measured: 230 ms in a
    // 3.4 s run of a debug build on a loaded machine), allowed a tenth of the run's time.
    let spent = charged * 10;
    let watching = burn["duration_ms"].as_u64().unwrap_or(0) / 10;
    assert!(
        (spent * 9 / 10 - 10..=spent * 11 / 10 + 10 + watching).contains(&cpu),
        "{cpu} ms of CPU recorded for a burner charged {spent} ms: {burn}"
    );

    let hold = run_of(&svc, "hold", 1).await;
    assert_eq!(hold["status"], "success", "{hold}");
    let peak = ms(&hold, "peak_memory_bytes");
    assert!(
        (HOLD_BYTES..=HOLD_BYTES * 11 / 10).contains(&peak),
        "{peak} bytes of peak memory recorded for {HOLD_BYTES} held: {hold}"
    );
    svc.stop().await;
}

/// Each command is born in its run's cgroup: on v1 a thread of the runner joined it while
/// the runner waited for its work and forks the commands, so no command waits for a move
/// as it starts. The command's own `/proc/self/cgroup` names the run's cgroup in each
/// hierarchy; the runner's thread is neither counted nor killed as left over; the runner
/// keeps itself off the OOM killer's list, and each command has the service's OOM score
/// back; the run's cgroup is gone once the run is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_born_in_their_runs_cgroup_and_the_runner_is_not_left_over() {
    let mut svc = TestService::builder()
        .job_file(
            "where",
            job_section(
                "where",
                &[
                    "path = /where",
                    "command = cat /proc/self/cgroup",
                    "command = cat /proc/self/oom_score_adj",
                    // Its task limit where v1 mounts it (none where it does not).
                    "command = cat /sys/fs/cgroup/pids$(sed -n s/^[0-9]*:pids://p /proc/self/cgroup)/pids.max || echo none",
                ],
            ),
        )
        .build();
    svc.start().await;
    if !has_cgroups(&svc) {
        return;
    }
    let own_score = std::fs::read_to_string("/proc/self/oom_score_adj").expect("own score");
    for counter in 1..=3 {
        svc.trigger("/where", b"", &[]).await.assert_status(200);
        let run = run_of(&svc, "where", counter).await;
        assert_eq!(run["status"], "success", "{run}");
        let log = svc.log_content("where", counter).await;
        if svc.stderr().contains("cgroups=v1") {
            // Born in the cgroup made for its runner ahead, in each hierarchy.
            for hierarchy in ["pids", "memory"] {
                let path = log
                    .lines()
                    .find_map(|line| line.split_once(&format!(":{hierarchy}:")))
                    .map(|(_, path)| path.trim())
                    .unwrap_or_else(|| panic!("no {hierarchy} line: {log}"));
                let (parent, name) = path.rsplit_once('/').unwrap_or_default();
                assert!(
                    parent.contains("/svc-runs.") && name.starts_with("ahead."),
                    "the command is in its run's {hierarchy} cgroup made ahead: {log}"
                );
            }
            // The default limit_pids (512, and one task more for its runner's thread)
            // is in force: a run that sets none finds it in its cgroup made ahead,
            // where its begin no longer writes it.
            let pids_max = output_after(&log, "/pids.max || echo none");
            assert_eq!(pids_max, Some("513"), "the run's task limit: {log}");
        } else {
            assert!(
                log.lines()
                    .any(|line| line.contains(" 0::/") && line.contains("/svc-runs.")),
                "the command is in its run's cgroup: {log}"
            );
        }
        assert!(!log.contains("left in the run's cgroup"), "{log}");
        let score = output_after(&log, "$ cat /proc/self/oom_score_adj");
        assert_eq!(
            score,
            Some(own_score.trim()),
            "the command has the service's OOM score: {log}"
        );
    }
    // The runs' parent in the pids hierarchy, from the last command's line for it.
    let log = svc.log_content("where", 3).await;
    if let Some(parent) = runs_parent(&log, "pids") {
        // Only the cgroup made for the next run's runner, started ahead, may be left.
        wait_until(WAIT, "the runs' cgroups removed", async || {
            std::fs::read_dir(&parent).map_or(0, |dirs| {
                dirs.flatten()
                    .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
                    .count()
            }) <= 1
        })
        .await;
        // A clean stop leaves nothing: the cgroup of the runner started ahead, and then
        // the parent, are removed.
        svc.stop().await;
        assert!(
            !parent.exists(),
            "{} is left after the stop: {:?}",
            parent.display(),
            std::fs::read_dir(&parent)
                .map(|dirs| dirs.flatten().map(|d| d.file_name()).collect::<Vec<_>>())
        );
        return;
    }
    svc.stop().await;
}

/// The last word of the log line after the one that ends with `command` (a command's
/// one-line output, after its time stamp).
fn output_after<'a>(log: &'a str, command: &str) -> Option<&'a str> {
    let lines: Vec<&str> = log.lines().collect();
    lines
        .iter()
        .position(|line| line.ends_with(command))
        .and_then(|at| lines.get(at + 1))
        .and_then(|line| line.rsplit(' ').next())
}

/// The directory of the runs' parent cgroup in v1 `hierarchy`, from a command's
/// `/proc/self/cgroup` line in `log` and where the hierarchy is mounted.
fn runs_parent(log: &str, hierarchy: &str) -> Option<std::path::PathBuf> {
    let path = log.lines().find_map(|line| {
        line.split_once(&format!(":{hierarchy}:"))
            .map(|(_, path)| path)
    })?;
    let parent = path.trim().rsplit_once('/')?.0.to_string();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let options = after.split(' ').nth(2)?;
        (after.starts_with("cgroup ") && options.split(',').any(|o| o == hierarchy))
            .then(|| before.split(' ').nth(4))
            .flatten()
    })?;
    Some(std::path::Path::new(mount).join(parent.trim_start_matches('/')))
}
