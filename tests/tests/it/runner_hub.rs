//! The controller's runner hub with the real `svc-runner`, both ways a runner of commands
//! starts (forked by the runner fork server, or afresh): a Landlock ruleset the controller
//! built (as it does for a busy job) reaches the runner with its request, as a descriptor
//! on the runner connection, and confines the commands; a forked runner is the fork
//! server's child, is killed when dropped unused, and the server ends with the hub.

use std::sync::Arc;

use proto::{Action, ExecRequest, Sandbox};
use svc_controller::runner::exec::{RunEvent, RunnerHub, RunnerWork};
use svc_controller::store::logstore::OutputKind;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ruleset_the_controller_built_reaches_the_runner_and_confines_the_commands() {
    let test = "a_ruleset_the_controller_built_reaches_the_runner_and_confines_the_commands";
    if !svc_tests::has_landlock(test) {
        return;
    }
    for forked in [true, false] {
        ruleset_reaches_the_runner(forked).await;
    }
}

async fn ruleset_reaches_the_runner(forked: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    for sub in ["work", "outside", "protected"] {
        std::fs::create_dir(base.join(sub)).expect("mkdir");
    }
    std::fs::write(base.join("protected/secret"), "the-secret\n").expect("write");
    let d = |sub: &str| base.join(sub).display().to_string();
    let mut sandbox = Sandbox {
        write_paths: vec![d("work")],
        protected_paths: vec![d("protected")],
        readable_dirs: Vec::new(),
        attached: None,
    };
    // Built here as the controller builds a busy job's, from the same sandbox.
    let prepared = Arc::new(proto::sandbox::prepare(&sandbox, None).expect("ruleset"));
    sandbox.attached = Some(prepared.summary.clone());
    let request = ExecRequest {
        sandbox: Some(sandbox),
        private_dirs: Vec::new(),
        ..commands_request(
            vec![
                "echo w > in-work && echo wrote-work".into(),
                format!("cat {}/secret || echo refused-secret", d("protected")),
                format!("echo o > {}/f || echo refused-outside", d("outside")),
            ],
            d("work"),
        )
    };

    let runner_path = svc_tests::binaries().runner.clone();
    let hub =
        RunnerHub::start(&base.join("run"), runner_path, vec![d("protected")]).expect("runner hub");
    hub.use_fork_server(forked);
    let runner = hub.launch(RunnerWork::Commands).await;
    let (_cancel, mut cancel_rx) = tokio::sync::watch::channel(None);
    let (mut lines, mut output) = (Vec::new(), Vec::new());
    let mut sink = |event: RunEvent<'_>| match event {
        RunEvent::Line(line) => lines.push(line),
        // Standard output only: the commands' errors come on standard error, whose
        // chunks may fall in the middle of a line of it.
        RunEvent::Output(OutputKind::Stdout, data) => output.extend_from_slice(data),
        RunEvent::Output(..) => {}
        RunEvent::HttpStatus(_) => {}
    };
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        runner.execute(request, Some(prepared.clone()), &mut cancel_rx, &mut sink),
    )
    .await
    .expect("the run ends in time");
    let output = String::from_utf8_lossy(&output).into_owned();
    assert!(
        outcome.success,
        "forked {forked}: {outcome:?}\n{lines:?}\n{output}"
    );
    for marker in ["wrote-work", "refused-secret", "refused-outside"] {
        assert!(
            output.lines().any(|line| line == marker),
            "{marker} in {output}"
        );
    }
    assert!(!output.contains("the-secret"), "{output}");
    assert!(!base.join("outside/f").exists());
    // The runner logged the summary of the ruleset it was sent.
    let summary = format!("--- {}", prepared.summary);
    assert!(lines.contains(&summary), "{summary} in {lines:?}");
}

/// A plain request of commands, without sandbox or credentials.
fn commands_request(commands: Vec<String>, dir_work: String) -> ExecRequest {
    ExecRequest {
        job_id: "plain".into(),
        counter: 1,
        timeout_ms: Some(20_000),
        kill_grace_ms: 300,
        credentials: None,
        limits: Default::default(),
        keep_capabilities: None,
        sandbox: None,
        private_dirs: Vec::new(),
        cgroup_procs: Vec::new(),
        end_yields: false,
        action: Action::Commands {
            commands,
            env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            dir_work,
        },
    }
}

/// A hub on a temporary directory with a `work` directory, protecting nothing.
fn plain_hub() -> (tempfile::TempDir, RunnerHub) {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir(base.join("work")).expect("mkdir");
    let hub = RunnerHub::start(
        &base.join("run"),
        svc_tests::binaries().runner.clone(),
        Vec::new(),
    )
    .expect("runner hub");
    (dir, hub)
}

/// Waits (bounded) until the process `pid` is gone.
async fn gone(pid: u32, what: &str) {
    let pid = i32::try_from(pid).expect("a pid");
    svc_tests::wait_until(
        std::time::Duration::from_secs(20),
        &format!("{what} (pid {pid}) is gone"),
        async || !svc_tests::proc::is_alive(pid),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_runner_is_the_fork_server_s_child_and_the_server_ends_with_the_hub() {
    let (dir, hub) = plain_hub();
    let base = dir.path().canonicalize().expect("canonical");

    // The runner's parent is the fork server. Read from here: a command cannot see its
    // runner, which stays outside the run's PID namespace.
    let runner = hub.launch(RunnerWork::Commands).await;
    let runner_pid = runner.pid().expect("forked");
    let server_pid =
        svc_tests::proc::parent(i32::try_from(runner_pid).expect("a pid")).expect("a parent");
    let server = svc_tests::proc::cmdline(server_pid).unwrap_or_default();
    assert!(server.contains("--fork-server"), "{server}");
    assert_ne!(
        u32::try_from(server_pid).ok(),
        Some(std::process::id()),
        "not the controller's child"
    );
    let request = commands_request(
        vec!["echo ran".into()],
        base.join("work").display().to_string(),
    );
    let (_cancel, mut cancel_rx) = tokio::sync::watch::channel(None);
    let mut output = Vec::new();
    let mut sink = |event: RunEvent<'_>| {
        if let RunEvent::Output(_, data) = event {
            output.extend_from_slice(data);
        }
    };
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        runner.execute(request, None, &mut cancel_rx, &mut sink),
    )
    .await
    .expect("the run ends in time");
    let output = String::from_utf8_lossy(&output).into_owned();
    assert!(outcome.success, "{outcome:?}: {output}");
    assert!(output.contains("ran"), "{output}");
    gone(runner_pid, "the runner that did its work").await;

    // A runner dropped unused is killed (and reaped by the server).
    let unused = hub.launch(RunnerWork::Commands).await;
    let unused_pid = unused.pid().expect("forked");
    assert!(std::path::Path::new(&format!("/proc/{unused_pid}")).exists());
    drop(unused);
    gone(unused_pid, "a runner dropped unused").await;

    // A JobHttp's runner is started afresh: the controller's child.
    let http = hub.launch(RunnerWork::HttpCall).await;
    let http_pid = http.pid().expect("started");
    let status = std::fs::read_to_string(format!("/proc/{http_pid}/status")).expect("status");
    let parent = status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))
        .map(str::trim)
        .expect("PPid");
    assert_eq!(parent, std::process::id().to_string(), "{status}");
    drop(http);

    // With the hub gone, the control socket closes and the server ends.
    drop(hub);
    gone(server_pid.unsigned_abs(), "the fork server").await;
}

/// A runner's parent-death signal follows the thread that started it: a runner started
/// from a thread that ends later (as the engine's runtime threads do when its work moves
/// to another thread) got SIGTERM in the middle of its run. Runners are started from
/// threads that live as long as they do, whichever thread asks for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_outlives_the_thread_that_asked_for_its_runner() {
    let (dir, hub) = plain_hub();
    let base = dir.path().canonicalize().expect("canonical");
    for forked in [true, false] {
        hub.use_fork_server(forked);
        let marker = format!("sleep 300.{}", u8::from(forked));
        // A thread of its own asks for the runner, and stays until the command runs.
        let (runner_tx, runner_rx) = tokio::sync::oneshot::channel();
        let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
        let asking = {
            let (hub, runtime) = (hub.clone(), tokio::runtime::Handle::current());
            std::thread::spawn(move || {
                let runner = runtime.block_on(hub.launch(RunnerWork::Commands));
                let _ = runner_tx.send(runner);
                let _ = end_rx.recv();
                // SAFETY: gettid has no preconditions.
                unsafe { libc::gettid() }
            })
        };
        let runner = runner_rx.await.expect("a runner");
        let request = commands_request(
            vec![marker.clone()],
            base.join("work").display().to_string(),
        );
        let (cancel, mut cancel_rx) = tokio::sync::watch::channel(None);
        let run = tokio::spawn(async move {
            let mut sink = |_: RunEvent<'_>| {};
            runner
                .execute(request, None, &mut cancel_rx, &mut sink)
                .await
        });
        svc_tests::wait_until(
            std::time::Duration::from_secs(20),
            "the command runs",
            async || !svc_tests::proc::find_by_exact_cmdline(&marker).is_empty(),
        )
        .await;

        // The asking thread ends; once it is gone, so is any signal its end sends.
        end_tx.send(()).expect("the thread waits");
        let tid = asking.join().expect("the thread ends");
        let task = format!("/proc/{}/task/{tid}", std::process::id());
        svc_tests::wait_until(
            std::time::Duration::from_secs(20),
            "the asking thread is gone",
            async || !std::path::Path::new(&task).exists(),
        )
        .await;

        cancel.send_replace(Some("the test is over".into()));
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(20), run)
            .await
            .expect("the run ends in time")
            .expect("the run task");
        assert!(!outcome.success);
        assert!(
            outcome.summary.contains("the test is over"),
            "forked {forked}: ended by the cancel, not by a signal: {outcome:?}"
        );
    }
}

/// A fork server that dies (killed by hand, by the OOM killer) is reaped at once, not
/// left a zombie of the service until the next run needs a runner; the next runner then
/// comes from a new server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_server_that_dies_is_reaped_and_replaced() {
    let (_dir, hub) = plain_hub();
    let runner = hub.launch(RunnerWork::Commands).await;
    let runner_pid = runner.pid().expect("forked");
    let server_pid =
        svc_tests::proc::parent(i32::try_from(runner_pid).expect("a pid")).expect("a parent");
    drop(runner);
    gone(runner_pid, "a runner dropped unused").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the fork server");
    svc_tests::wait_until(
        std::time::Duration::from_secs(20),
        &format!("the killed fork server (pid {server_pid}) is reaped, not a zombie"),
        async || svc_tests::proc::state(server_pid).is_none(),
    )
    .await;
    let next = hub.launch(RunnerWork::Commands).await;
    let next_pid = next.pid().expect("a runner");
    let next_server =
        svc_tests::proc::parent(i32::try_from(next_pid).expect("a pid")).expect("a parent");
    assert_ne!(next_server, server_pid, "a new server forked it");
    assert!(
        svc_tests::proc::cmdline(next_server)
            .unwrap_or_default()
            .contains("--fork-server"),
        "the next runner is forked by a new server"
    );
}
