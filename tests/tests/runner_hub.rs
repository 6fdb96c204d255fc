//! The controller's runner hub with the real `svc-runner`: a Landlock ruleset the
//! controller built (as it does for a busy job) reaches the runner with its request, as a
//! descriptor on the runner socket, and confines the commands.

use std::sync::Arc;

use proto::{Action, ExecRequest, Sandbox};
use svc_controller::exec::{RunEvent, RunnerHub};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ruleset_the_controller_built_reaches_the_runner_and_confines_the_commands() {
    let test = "a_ruleset_the_controller_built_reaches_the_runner_and_confines_the_commands";
    if !svc_tests::has_landlock(test) {
        return;
    }
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
        job_id: "busy".into(),
        counter: 1,
        timeout_ms: Some(20_000),
        kill_grace_ms: 300,
        credentials: None,
        limits: Default::default(),
        keep_capabilities: None,
        sandbox: Some(sandbox),
        action: Action::Commands {
            commands: vec![
                "echo w > in-work && echo wrote-work".into(),
                format!("cat {}/secret || echo refused-secret", d("protected")),
                format!("echo o > {}/f || echo refused-outside", d("outside")),
            ],
            env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            dir_work: d("work"),
        },
    };

    let runner_path = svc_tests::binaries().runner.clone();
    let hub =
        RunnerHub::start(&base.join("run"), runner_path, vec![d("protected")]).expect("runner hub");
    let runner = hub.launch().await;
    let (_cancel, mut cancel_rx) = tokio::sync::watch::channel(None);
    let (mut lines, mut output) = (Vec::new(), Vec::new());
    let mut sink = |event: RunEvent<'_>| match event {
        RunEvent::Line(line) => lines.push(line),
        RunEvent::Output(_, data) => output.extend_from_slice(data),
        RunEvent::HttpStatus(_) => {}
    };
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        runner.execute(request, Some(prepared.clone()), &mut cancel_rx, &mut sink),
    )
    .await
    .expect("the run ends in time");
    let output = String::from_utf8_lossy(&output).into_owned();
    assert!(outcome.success, "{outcome:?}\n{lines:?}\n{output}");
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
