//! What confines each command of a run, checked with the real binary and a fake
//! controller: `no_new_privs` for every command, and the Landlock ruleset of
//! `proto::Sandbox` (writes only below the writable paths, no reading below a protected
//! path but the run's own body). The tests run as root in CI: root passes file modes,
//! not Landlock.

mod common;

use std::os::unix::fs::PermissionsExt as _;

use common::*;
use proto::{Credentials, OutputStream};

fn stdout_text(messages: &[proto::RunnerMessage]) -> String {
    String::from_utf8(output(messages, OutputStream::Stdout)).expect("utf8")
}

/// The credentials of `nobody`, when the test runs as root (else `None`, and a notice).
fn nobody(test: &str) -> Option<Credentials> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: {test} needs root");
        return None;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .expect("passwd lookup")
        .expect("user nobody exists");
    Some(Credentials {
        uid: nobody.uid.as_raw(),
        gid: nobody.gid.as_raw(),
        groups: vec![nobody.gid.as_raw()],
        user_name: "nobody".into(),
    })
}

#[tokio::test]
async fn every_command_runs_with_no_new_privs() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    c.execute(commands_request(
        &[
            "grep NoNewPrivs /proc/self/status",
            "grep NoNewPrivs /proc/$$/status",
        ],
        &dir,
    ))
    .await;
    let messages = c.until_finished().await;
    assert!(finished(&messages).0, "{messages:?}");
    let text = stdout_text(&messages);
    let values: Vec<Vec<&str>> = text
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        values,
        [["NoNewPrivs:", "1"], ["NoNewPrivs:", "1"]],
        "{text}"
    );
}

#[tokio::test]
async fn a_setuid_program_grants_nothing_to_a_job_of_another_user() {
    let Some(nobody) = nobody("a_setuid_program_grants_nothing_to_a_job_of_another_user") else {
        return;
    };
    let mut c = start().await;
    let dir = c.dir.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    // A copy of id(1) owned by root with the setuid bit: without no_new_privs it would
    // run with effective uid 0.
    let id = dir.join("id-setuid");
    std::fs::copy("/usr/bin/id", &id).expect("copy id");
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).expect("setuid");
    assert_eq!(
        std::fs::metadata(&id).expect("stat").permissions().mode() & 0o7777,
        0o4755
    );
    let mut request = commands_request(&["./id-setuid -u"], dir.to_str().expect("utf8"));
    let uid = nobody.uid;
    request.credentials = Some(nobody);
    c.execute(request).await;
    let messages = c.until_finished().await;
    assert!(finished(&messages).0, "{messages:?}");
    assert_eq!(stdout_text(&messages), format!("{uid}\n"));
}

/// True when the kernel has Landlock; otherwise prints that `test` is skipped.
fn landlock(test: &str) -> bool {
    let abi = svc_runner::sandbox::kernel_abi();
    if abi.is_none() {
        eprintln!("skipped: {test} needs a kernel with Landlock");
    }
    abi.is_some()
}

/// A tree for the sandbox tests, below a fresh temporary directory:
///
/// ```text
/// work/  tmp/  extra/            writable
/// outside/readme                 readable, not writable
/// protected/secret, other-body   neither
/// protected/bodies/body          readable: the job's own bodies' directory
/// link -> protected              a writable path swapped for a link
/// ```
struct Tree {
    _dir: tempfile::TempDir,
    base: std::path::PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        for sub in [
            "work",
            "tmp",
            "extra",
            "outside",
            "protected",
            "protected/bodies",
        ] {
            std::fs::create_dir(base.join(sub)).expect("mkdir");
        }
        std::fs::write(base.join("outside/readme"), "readable\n").expect("write");
        std::fs::write(base.join("protected/secret"), "the-secret\n").expect("write");
        std::fs::write(base.join("protected/other-body"), "other-body\n").expect("write");
        std::fs::write(base.join("protected/bodies/body"), "own-body\n").expect("write");
        std::os::unix::fs::symlink(base.join("protected"), base.join("link")).expect("link");
        Tree { _dir: dir, base }
    }

    fn path(&self, sub: &str) -> String {
        self.base.join(sub).display().to_string()
    }

    fn sandbox(&self, writable: &[&str]) -> proto::Sandbox {
        proto::Sandbox {
            write_paths: writable.iter().map(|sub| self.path(sub)).collect(),
            protected_paths: vec![self.path("protected")],
            readable_dirs: vec![self.path("protected/bodies")],
            attached: None,
        }
    }
}

#[tokio::test]
async fn commands_write_only_below_the_writable_paths_and_read_no_protected_one() {
    if !landlock("commands_write_only_below_the_writable_paths_and_read_no_protected_one") {
        return;
    }
    let tree = Tree::new();
    check_confinement(&tree, Built::InRunner(None)).await;
}

/// The same with the ruleset built by the controller and sent with the request, as it is
/// for a busy job.
#[tokio::test]
async fn a_ruleset_sent_with_the_work_confines_the_same() {
    if !landlock("a_ruleset_sent_with_the_work_confines_the_same") {
        return;
    }
    let tree = Tree::new();
    check_confinement(&tree, Built::Sent).await;
}

/// A request that announces a ruleset and comes without one is not run, and the runner
/// says why.
#[tokio::test]
async fn a_request_without_the_ruleset_it_announces_is_not_run() {
    let tree = Tree::new();
    let mut c = start().await;
    let mut request = commands_request(&["echo ran > ran"], &tree.path("work"));
    let mut sandbox = tree.sandbox(&["work"]);
    sandbox.attached = Some("sandbox: built by the controller".into());
    request.sandbox = Some(sandbox);
    c.execute(request).await;
    let messages = c.until_finished().await;
    match messages.as_slice() {
        [proto::RunnerMessage::Error { message }] => {
            assert!(message.contains("sent none"), "{message}");
        }
        other => panic!("one error, not {other:?}"),
    }
    assert_eq!(c.exit_code().await, Some(1), "the work was not done");
    assert!(!tree.base.join("work/ran").exists(), "nothing ran");
}

/// The same, with the service's part of the sandbox built while the runner waited for
/// its work, as the controller has it (the `Welcome` carries the protected paths); a
/// part built for other protected paths than the request's is not used: the request's
/// paths are the ones protected.
#[tokio::test]
async fn a_sandbox_built_ahead_of_the_work_confines_the_same() {
    if !landlock("a_sandbox_built_ahead_of_the_work_confines_the_same") {
        return;
    }
    for ahead in ["protected", "outside"] {
        let tree = Tree::new();
        check_confinement(&tree, Built::InRunner(Some(vec![tree.path(ahead)]))).await;
    }
}

/// Who builds the ruleset of [`check_confinement`].
enum Built {
    /// The runner, with these protected paths in the `Welcome` to build ahead with.
    InRunner(Option<Vec<String>>),
    /// The controller (here the test), which sends it with the request.
    Sent,
}

/// Runs commands that try every kind of access in `tree`'s sandbox, built as `built`
/// says, and checks what each could do.
async fn check_confinement(tree: &Tree, built: Built) {
    let ahead = match &built {
        Built::InRunner(ahead) => ahead.clone(),
        Built::Sent => None,
    };
    let mut c = start_with(ahead).await;
    let mut request = commands_request(
        &[
            "echo w > f && echo wrote-work",
            "echo t > \"$B/tmp/f\" && echo wrote-tmp",
            "mkdir \"$B/extra/d\" && echo e > \"$B/extra/d/f\" && echo wrote-extra",
            "echo o > \"$B/outside/f\" || echo refused-outside",
            "echo o >> \"$B/outside/readme\" || echo refused-append",
            "cat \"$B/outside/readme\"",
            "cat \"$B/protected/secret\" || echo refused-secret",
            "cat \"$B/protected/other-body\" || echo refused-other-body",
            "ls \"$B/protected\" || echo refused-listing",
            "cat \"$B/protected/bodies/body\"",
            "ls \"$B/protected/bodies\" || echo refused-bodies-listing",
            "echo to-null > /dev/null && head -c 5 /dev/zero | wc -c && \
             head -c 7 /dev/urandom | wc -c",
            "echo to-stderr > /dev/stderr",
        ],
        &tree.path("work"),
    );
    if let proto::Action::Commands { env, .. } = &mut request.action {
        env.push(("B".into(), tree.path("")));
    }
    let mut sandbox = tree.sandbox(&["work", "tmp", "extra"]);
    match built {
        Built::InRunner(_) => {
            request.sandbox = Some(sandbox);
            c.execute(request).await;
        }
        Built::Sent => {
            let prepared = svc_runner::sandbox::prepare(&sandbox, None).expect("ruleset");
            sandbox.attached = Some(prepared.summary.clone());
            request.sandbox = Some(sandbox);
            let fd = prepared.ruleset().expect("a kernel with Landlock");
            c.execute_with_fd(request, fd).await;
        }
    }
    let messages = c.until_finished().await;
    assert!(finished(&messages).0, "{messages:?}");
    let stdout = stdout_text(&messages);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "wrote-work",
            "wrote-tmp",
            "wrote-extra",
            "refused-outside",
            "refused-append",
            "readable",
            "refused-secret",
            "refused-other-body",
            "refused-listing",
            "own-body",
            "refused-bodies-listing",
            "5",
            "7",
        ],
        "{messages:?}"
    );
    let stderr = String::from_utf8(output(&messages, OutputStream::Stderr)).expect("utf8");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(stderr.contains("to-stderr"), "{stderr}");
    assert!(!stderr.contains("the-secret") && !stderr.contains("other-body\n"));
    assert_eq!(
        std::fs::read_to_string(tree.base.join("extra/d/f")).expect("read"),
        "e\n"
    );
    assert!(!tree.base.join("outside/f").exists());
    let summary = logs(&messages)
        .into_iter()
        .find(|line| line.starts_with("sandbox: "))
        .expect("a sandbox line");
    let writable = format!(
        "writable: {}, {}, {}; unreadable: {}",
        tree.path("work"),
        tree.path("tmp"),
        tree.path("extra"),
        tree.path("protected")
    );
    assert!(
        summary.starts_with("sandbox: landlock ABI ") && summary.contains(&writable),
        "{summary}"
    );
    assert!(summary.contains("enforced"), "{summary}");
}

#[tokio::test]
async fn a_writable_path_that_leads_into_a_protected_one_stops_the_run() {
    if !landlock("a_writable_path_that_leads_into_a_protected_one_stops_the_run") {
        return;
    }
    let tree = Tree::new();
    let mut c = start().await;
    let mut request = commands_request(&["echo ran"], &tree.path("work"));
    request.sandbox = Some(tree.sandbox(&["work", "link"]));
    c.execute(request).await;
    let messages = c.until_finished().await;
    match messages.last() {
        Some(proto::RunnerMessage::Error { message }) => {
            assert!(
                message.contains(&tree.path("link"))
                    && message.contains("leads to")
                    && message.contains(&tree.path("protected")),
                "{message}"
            );
        }
        other => panic!("an error, not {other:?}: {messages:?}"),
    }
    assert!(stdout_text(&messages).is_empty());
}
