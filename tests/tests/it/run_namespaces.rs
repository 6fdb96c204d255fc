//! Runs contained in namespaces of their own, with the real controller and runner: a job
//! that kills its parent (the review's `setsid ... & kill -9 $PPID`) neither ends its
//! supervision nor leaves a process behind; a job cannot find nor kill another run's
//! runner, nor change the permissions of another run's `TMPDIR`, request body or working
//! directory, even as the same user; a runner that cannot make namespaces says so and
//! runs as before.
//!
//! Each scenario runs with a root controller (namespaces made with CAP_SYS_ADMIN before
//! the switch to the job's user, as under the packaged unit) and with the unit's
//! capabilities less CAP_SYS_ADMIN (a drop-in that takes it back: a user namespace made
//! after the switch). They need root; elsewhere they print a notice.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use svc_tests::{
    TestService, TestServiceBuilder, WAIT, job_section, proc, without_sys_admin_wrapper,
};

/// The two ways a run is contained: the log line each gives, and a builder for it.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// Root controller: the runner has CAP_SYS_ADMIN.
    Privileged,
    /// The unit's capabilities less CAP_SYS_ADMIN: a user namespace per run.
    UserNamespace,
}

impl Way {
    fn builder(self) -> TestServiceBuilder {
        match self {
            Way::Privileged => TestService::builder(),
            Way::UserNamespace => TestService::builder().wrapper(&without_sys_admin_wrapper()),
        }
    }

    /// What the controller's start-up log says of the runs' containment.
    fn started(self) -> &'static str {
        match self {
            Way::Privileged => {
                "namespaces: each run of commands in PID, mount and IPC namespaces of its own \
                 (made with CAP_SYS_ADMIN)"
            }
            Way::UserNamespace => {
                "namespaces: each run of commands in PID, mount and IPC namespaces of its own, \
                 in a user namespace (no CAP_SYS_ADMIN); runs as root: fallback"
            }
        }
    }

    /// The line of the run's log that says the run is contained this way.
    fn note(self) -> &'static str {
        match self {
            Way::Privileged => "contained: PID, mount and IPC namespaces of the run's own: ",
            Way::UserNamespace => {
                "contained: PID, mount and IPC namespaces of the run's own (in a user namespace)"
            }
        }
    }
}

/// True when the test can run (as root, with `setpriv`); prints a notice otherwise.
fn can_run(test: &str) -> bool {
    svc_tests::can_run_unit_like(test)
}

/// Kills whatever a failed test left behind, so later tests are not confused.
struct Reaper(Vec<String>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for marker in &self.0 {
            for (pid, _) in proc::find_by_cmdline(marker) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

fn assert_contains(content: &str, needle: &str) {
    assert!(
        content.contains(needle),
        "the log says {needle:?}:\n{content}"
    );
}

async fn the_escape_leaves_nothing_behind(way: Way, n: u32) {
    let marker = proc::marker(&format!("sleep 300.43{n}1"));
    let _reaper = Reaper(vec![marker.clone()]);
    // The escapee says when it runs, in its own session, before the job kills its
    // parent; the job waits for it by polling, as an attacker would.
    let command = format!(
        "echo ppid=$PPID; setsid sh -c 'touch \"$TMPDIR/up\"; exec {marker}' & \
         while [ ! -e \"$TMPDIR/up\" ]; do sleep 0.01; done; kill -9 $PPID; wait"
    );
    let svc = way
        .builder()
        .job_file(
            "escape",
            job_section(
                "escape",
                &[
                    "path = /escape",
                    "user = nobody",
                    &format!("command = {command}"),
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/escape", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("escape", 1, WAIT).await;
    let content = log.content();
    assert_contains(&content, way.note());
    // The runner is outside the run's PID namespace: the job sees its parent as pid 0,
    // and `kill -9 0` ends the job's own process group, not its supervision.
    assert_contains(&content, "ppid=0");
    assert_contains(&content, "command 1 was killed by signal 9 (SIGKILL)");
    assert_contains(&content, "leftover process");
    assert!(
        !content.contains("runner died"),
        "the run is recorded by its runner:\n{content}"
    );
    log.assert_status("fail");
    assert!(
        proc::find_by_cmdline(&marker).is_empty(),
        "the escaped process was ended with its run"
    );
    let stderr = svc.stderr();
    assert!(
        stderr.contains("runs are contained in namespaces") && stderr.contains(way.started()),
        "the start-up log says how runs are contained:\n{stderr}"
    );
    if let Way::Privileged = way {
        let check = svc.check().await;
        let stdout = String::from_utf8_lossy(&check.stdout);
        assert!(
            stdout.contains(&format!("  containment: {}", way.started())),
            "--check says how runs are contained:\n{stdout}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_kills_its_parent_ends_itself_only_and_leaves_nothing() {
    if !can_run("a_job_that_kills_its_parent_ends_itself_only_and_leaves_nothing") {
        return;
    }
    the_escape_leaves_nothing_behind(Way::Privileged, 1).await;
    the_escape_leaves_nothing_behind(Way::UserNamespace, 2).await;
}

/// Starts `victim` (a long sleep with `marker` as the job's user) and returns the host pid
/// of its runner once the sleep runs.
async fn victim_runner(svc: &TestService, marker: &str) -> i32 {
    svc.trigger("/victim", b"the victim's body", &[])
        .await
        .assert_status(200);
    let sleeper = svc_tests::wait_for(WAIT, "the victim's command runs", async || {
        proc::find_by_cmdline(marker).first().map(|(pid, _)| *pid)
    })
    .await;
    let runner = proc::parent(sleeper).expect("the victim's command has a parent");
    assert_eq!(
        proc::comm(runner).as_deref(),
        Some("svc-runner"),
        "the parent of the victim's command is its runner"
    );
    runner
}

/// Cancels the victim and checks its run is recorded as cancelled by its runner.
async fn cancel_victim(svc: &TestService) {
    svc.cancel("victim").await.assert_status(200);
    let log = svc
        .wait_run_finished("victim", 1, Duration::from_secs(20))
        .await;
    let content = log.content();
    assert!(
        content.contains("finished: fail: cancelled"),
        "the victim's run ends when cancelled, as its runner reports:\n{content}"
    );
}

/// The victim (a long sleep) and the attacker, both of `nobody`, allowed to run at once.
fn service(builder: TestServiceBuilder, marker: &str, attacker: &str) -> TestServiceBuilder {
    builder
        .svc("max_job_running = 2")
        .job_file(
            "victim",
            job_section(
                "victim",
                &[
                    "path = /victim",
                    "user = nobody",
                    &format!("command = {marker}"),
                ],
            ),
        )
        .job_file(
            "attacker",
            job_section(
                "attacker",
                &[
                    "path = /attacker",
                    "user = nobody",
                    &format!("command = {attacker}"),
                ],
            ),
        )
}

async fn another_runs_runner_is_out_of_reach(way: Way, n: u32) {
    let marker = proc::marker(&format!("sleep 300.44{n}1"));
    let _reaper = Reaper(vec![marker.clone()]);
    // The pid is handed over in a file the test writes once the victim runs.
    let exchange = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(exchange.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let pid_file = exchange.path().join("pid");
    let attacker = format!(
        "echo runners=$(cat /proc/[0-9]*/comm | grep -c svc-runner); \
         echo shells=$(cat /proc/[0-9]*/comm | grep -c '^sh$'); \
         kill -9 $(cat {}) 2>&1; echo kill=$?",
        pid_file.display()
    );
    let svc = service(way.builder(), &marker, &attacker).start().await;
    let runner = victim_runner(&svc, &marker).await;
    std::fs::write(&pid_file, runner.to_string()).expect("write the pid");
    svc.trigger("/attacker", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("attacker", 1, WAIT).await;
    let content = log.content();
    assert_contains(&content, way.note());
    // Its /proc shows its own shells (readable: the sandbox lets it read its /proc), and
    // no runner.
    assert_contains(&content, "runners=0");
    assert!(!content.contains("shells=0"), "{content}");
    assert_contains(&content, "No such process");
    assert_contains(&content, "kill=1");
    assert!(
        proc::is_alive(runner),
        "the victim's runner {runner} lives on"
    );
    assert!(!proc::find_by_cmdline(&marker).is_empty());
    cancel_victim(&svc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_can_neither_see_nor_kill_another_runs_runner() {
    if !can_run("a_job_can_neither_see_nor_kill_another_runs_runner") {
        return;
    }
    another_runs_runner_is_out_of_reach(Way::Privileged, 1).await;
    another_runs_runner_is_out_of_reach(Way::UserNamespace, 2).await;
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|err| panic!("stat {}: {err}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

async fn another_runs_files_keep_their_permissions(way: Way, n: u32) {
    let marker = proc::marker(&format!("sleep 300.45{n}1"));
    let _reaper = Reaper(vec![marker.clone()]);
    let builder = way.builder();
    let lib = builder.dir_base().join("var/lib/svc");
    let targets = [
        lib.join("tmp/victim/1"),
        lib.join("run/victim/1.body"),
        lib.join("job/victim"),
    ];
    let attacker = targets
        .iter()
        .map(|path| format!("chmod 777 {} 2>&1; echo chmod=$?", path.display()))
        .collect::<Vec<_>>()
        .join("; ");
    let svc = service(builder, &marker, &attacker).start().await;
    victim_runner(&svc, &marker).await;
    let before: Vec<u32> = targets.iter().map(|path| mode_of(path)).collect();
    svc.trigger("/attacker", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("attacker", 1, WAIT).await;
    let content = log.content();
    assert_contains(&content, way.note());
    for path in &targets {
        // Not there at all in the attacker's mount namespace.
        assert_contains(
            &content,
            &format!(
                "chmod: cannot access '{}': No such file or directory",
                path.display()
            ),
        );
    }
    assert_eq!(
        content.matches("chmod=1").count(),
        targets.len(),
        "{content}"
    );
    let after: Vec<u32> = targets.iter().map(|path| mode_of(path)).collect();
    assert_eq!(before, after, "the victim's files keep their modes");
    cancel_victim(&svc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cannot_change_the_permissions_of_another_runs_files() {
    if !can_run("a_job_cannot_change_the_permissions_of_another_runs_files") {
        return;
    }
    another_runs_files_keep_their_permissions(Way::Privileged, 1).await;
    another_runs_files_keep_their_permissions(Way::UserNamespace, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_cannot_make_namespaces_says_so_and_runs_as_before() {
    if !can_run("a_runner_that_cannot_make_namespaces_says_so_and_runs_as_before") {
        return;
    }
    // A run as root without CAP_SYS_ADMIN (a drop-in took it back), and a
    // user namespace would take the job's capabilities away.
    let marker = &proc::marker("sleep 300.4611");
    let _reaper = Reaper(vec![marker.to_string()]);
    let command = format!(
        "echo ppid-is-runner=$([ $PPID -gt 1 ] && echo yes); setsid sh -c '{marker}' & exit 0"
    );
    let svc = Way::UserNamespace
        .builder()
        .job_file(
            "root",
            job_section("root", &["path = /root", &format!("command = {command}")]),
        )
        .start()
        .await;
    svc.trigger("/root", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("root", 1, WAIT).await;
    let content = log.content();
    assert_contains(
        &content,
        "not contained in namespaces (a run as root needs CAP_SYS_ADMIN for them",
    );
    assert_contains(&content, "ppid-is-runner=yes");
    let stderr = svc.stderr();
    assert!(
        stderr.contains(Way::UserNamespace.started()),
        "the start-up log says runs as root are not contained:\n{stderr}"
    );
    // Today's behaviour: the orphan that left the process group is swept as the
    // runner's.
    assert_contains(&content, "leftover process");
    log.assert_status("success");
    assert!(proc::find_by_cmdline(marker).is_empty());
}
