//! Integration tests of command runs, with the real binary and a fake controller.

mod common;

use std::collections::BTreeMap;

use common::*;
use proto::{
    Action, ControllerMessage, Credentials, MAX_OUTPUT_CHUNK, OutputStream, RunnerMessage,
};

fn exits(messages: &[RunnerMessage]) -> Vec<(usize, proto::ExitReport)> {
    messages
        .iter()
        .filter_map(|m| match m {
            RunnerMessage::CommandExited { index, exit } => Some((*index, *exit)),
            _ => None,
        })
        .collect()
}

fn started(messages: &[RunnerMessage]) -> Vec<usize> {
    messages
        .iter()
        .filter_map(|m| match m {
            RunnerMessage::CommandStarted { index, .. } => Some(*index),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn both_streams_are_streamed_in_chunks() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    c.execute(commands_request(
        &[
            "printf partial; sleep 0.3; printf ' rest\\n'; echo err >&2",
            "head -c 200000 /dev/zero",
        ],
        &dir,
    ))
    .await;
    let messages = c.until_finished().await;
    assert_eq!(
        finished(&messages),
        (true, "all 2 commands succeeded".into())
    );
    // The first chunk came before the newline: output is not line-buffered.
    let first = messages
        .iter()
        .find_map(|m| match m {
            RunnerMessage::Output { data, .. } => Some(data.clone()),
            _ => None,
        })
        .expect("some output");
    assert_eq!(first, b"partial");
    let stdout = output(&messages, OutputStream::Stdout);
    assert_eq!(&stdout[..13], b"partial rest\n");
    assert_eq!(stdout.len(), 13 + 200_000);
    assert!(stdout[13..].iter().all(|b| *b == 0));
    assert_eq!(output(&messages, OutputStream::Stderr), b"err\n");
    for m in &messages {
        if let RunnerMessage::Output { data, .. } = m {
            assert!(!data.is_empty() && data.len() <= MAX_OUTPUT_CHUNK);
        }
    }
    let exits = exits(&messages);
    assert_eq!(exits.len(), 2);
    assert!(exits.iter().all(|(_, e)| e.success()));
    assert!(exits[0].1.duration_ms >= 300, "{:?}", exits[0].1);
    // Before it, at most the line that says how the run is contained.
    let first = messages
        .iter()
        .find(|m| !matches!(m, RunnerMessage::Log { line } if line.starts_with("contained: ") || line.starts_with("not contained")))
        .expect("a message");
    match first {
        RunnerMessage::CommandStarted {
            index: 0,
            command,
            pid,
        } => {
            assert!(command.starts_with("printf partial"));
            assert!(*pid > 0);
        }
        other => panic!("first message: {other:?}"),
    }
    assert_eq!(c.exit_code().await, Some(0));
}

#[tokio::test]
async fn environment_is_exactly_the_given_one_and_dir_work_is_the_cwd() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    let mut request = commands_request(&["env", "pwd"], &dir);
    let given: Vec<(String, String)> = vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("HOME".into(), "/nonexistent".into()),
        ("SVC_JOB_ID".into(), "test_job".into()),
        ("WITH_SPACES".into(), "a b  c".into()),
    ];
    if let Action::Commands { env, .. } = &mut request.action {
        *env = given.clone();
    }
    c.execute(request).await;
    let messages = c.until_finished().await;
    assert!(finished(&messages).0, "{messages:?}");
    let text = String::from_utf8(output(&messages, OutputStream::Stdout)).expect("utf8");
    let mut lines: Vec<&str> = text.lines().collect();
    let pwd = lines.pop().expect("pwd line");
    assert_eq!(pwd, dir);
    let mut seen: BTreeMap<String, String> = lines
        .iter()
        .map(|l| {
            let (k, v) = l.split_once('=').expect("k=v");
            (k.to_string(), v.to_string())
        })
        .collect();
    // /bin/sh itself exports PWD; nothing else may appear.
    assert_eq!(seen.remove("PWD").as_deref(), Some(dir.as_str()));
    let expected: BTreeMap<String, String> = given.into_iter().collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_failing_command_stops_the_run() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    c.execute(commands_request(
        &["true", "echo before; exit 3", "echo never"],
        &dir,
    ))
    .await;
    let messages = c.until_finished().await;
    assert_eq!(started(&messages), vec![0, 1]);
    let exits = exits(&messages);
    assert_eq!(exits[1].1.code, Some(3));
    assert!(!exits[1].1.timed_out && !exits[1].1.cancelled);
    assert_eq!(output(&messages, OutputStream::Stdout), b"before\n");
    assert_eq!(
        finished(&messages),
        (false, "command 2 exited with code 3".into())
    );
    assert_eq!(c.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_missing_dir_work_fails_the_run() {
    let mut c = start().await;
    let dir = c.dir.path().join("missing");
    c.execute(commands_request(&["true"], dir.to_str().expect("utf8")))
        .await;
    let messages = c.until_finished().await;
    let (success, summary) = finished(&messages);
    assert!(!success);
    assert!(
        summary.starts_with("command 1 could not be started"),
        "{summary}"
    );
    assert!(started(&messages).is_empty());
}

#[tokio::test]
async fn time_limit_kills_the_command_and_its_grandchild() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    let pidfile = c.dir.path().join("pid");
    let mut request = commands_request(
        &[&format!(
            "sleep 30.101 & echo $! > {}; wait",
            pidfile.display()
        )],
        &dir,
    );
    request.timeout_ms = Some(500);
    c.execute(request).await;
    let messages = c.until_finished().await;
    read_pid(&pidfile).await;
    let logs = logs(&messages);
    assert!(
        logs.iter()
            .any(|l| l.starts_with("time limit of 0.5s reached: sending SIGTERM to process group")),
        "{logs:?}"
    );
    let exits = exits(&messages);
    assert_eq!(exits.len(), 1);
    assert!(exits[0].1.timed_out && !exits[0].1.cancelled);
    assert_eq!(exits[0].1.signal, Some(15));
    assert_eq!(finished(&messages), (false, "timed out after 0.5s".into()));
    assert!(none_runs("sleep 30.101").await, "the grandchild still runs");
    assert_eq!(c.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_grandchild_that_left_with_setsid_is_swept_after_a_normal_exit() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    let pidfile = c.dir.path().join("pid");
    // The background process keeps stdout open: the runner must not wait for it.
    c.execute(commands_request(
        &[&format!(
            "setsid sleep 30.102 & echo $! > {}",
            pidfile.display()
        )],
        &dir,
    ))
    .await;
    let begin = tokio::time::Instant::now();
    let messages = c.until_finished().await;
    assert!(begin.elapsed() < std::time::Duration::from_secs(2));
    read_pid(&pidfile).await;
    assert_eq!(finished(&messages), (true, "the command succeeded".into()));
    assert!(
        logs(&messages)
            .iter()
            .any(|l| l.starts_with("killed 1 leftover process")),
        "{messages:?}"
    );
    assert!(
        none_runs("sleep 30.102").await,
        "the setsid grandchild still runs"
    );
}

#[tokio::test]
async fn a_grandchild_that_left_with_setsid_is_killed_on_timeout() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    let pidfile = c.dir.path().join("pid");
    let mut request = commands_request(
        &[&format!(
            "setsid sleep 30.103 >/dev/null 2>&1 & echo $! > {}; sleep 30",
            pidfile.display()
        )],
        &dir,
    );
    request.timeout_ms = Some(400);
    c.execute(request).await;
    let messages = c.until_finished().await;
    read_pid(&pidfile).await;
    assert_eq!(finished(&messages), (false, "timed out after 0.4s".into()));
    assert!(
        none_runs("sleep 30.103").await,
        "the setsid grandchild still runs"
    );
}

#[tokio::test]
async fn a_command_ignoring_sigterm_gets_sigkill_after_the_grace() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    let mut request = commands_request(&["trap '' TERM; sleep 30; true"], &dir);
    request.timeout_ms = Some(300);
    request.kill_grace_ms = 300;
    c.execute(request).await;
    let begin = tokio::time::Instant::now();
    let messages = c.until_finished().await;
    assert!(begin.elapsed() >= std::time::Duration::from_millis(550));
    let logs = logs(&messages);
    assert!(
        logs.iter()
            .any(|l| l.ends_with("still running 0.3s after SIGTERM: sending SIGKILL")),
        "{logs:?}"
    );
    let exits = exits(&messages);
    assert_eq!(exits[0].1.signal, Some(9));
    assert!(exits[0].1.timed_out);
    assert_eq!(finished(&messages), (false, "timed out after 0.3s".into()));
}

#[tokio::test]
async fn cancel_ends_the_command() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    c.execute(commands_request(&["sleep 30", "echo never"], &dir))
        .await;
    let first = c
        .until(|m| matches!(m, RunnerMessage::CommandStarted { .. }))
        .await;
    assert_eq!(started(&first), vec![0]);
    c.send(ControllerMessage::Cancel {
        reason: "by test".into(),
    })
    .await;
    let messages = c.until_finished().await;
    assert!(
        logs(&messages)
            .iter()
            .any(|l| l.starts_with("cancelled (by test): sending SIGTERM to process group")),
        "{messages:?}"
    );
    let exits = exits(&messages);
    assert!(exits[0].1.cancelled && !exits[0].1.timed_out);
    assert!(started(&messages).is_empty());
    assert_eq!(finished(&messages), (false, "cancelled: by test".into()));
    assert_eq!(c.exit_code().await, Some(0));
}

#[tokio::test]
async fn losing_the_controller_kills_the_command_and_the_runner_exits() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    let pidfile = c.dir.path().join("pid");
    c.execute(commands_request(
        &[&format!(
            "sleep 30.104 & echo $! > {}; wait",
            pidfile.display()
        )],
        &dir,
    ))
    .await;
    c.until(|m| matches!(m, RunnerMessage::CommandStarted { .. }))
        .await;
    read_pid(&pidfile).await;
    c.hang_up();
    assert_eq!(c.exit_code().await, Some(2));
    assert!(none_runs("sleep 30.104").await, "the grandchild still runs");
}

#[tokio::test]
async fn credentials_switch_to_nobody_when_root() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: credentials_switch_to_nobody_when_root needs root");
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .expect("passwd lookup")
        .expect("user nobody exists");
    let (uid, gid) = (nobody.uid.as_raw(), nobody.gid.as_raw());
    let mut c = start().await;
    let mut request = commands_request(&["id -u; id -g; id -G"], "/");
    request.credentials = Some(Credentials {
        uid,
        gid,
        groups: vec![gid],
        user_name: "nobody".into(),
    });
    c.execute(request).await;
    let messages = c.until_finished().await;
    assert!(finished(&messages).0, "{messages:?}");
    assert_eq!(
        String::from_utf8(output(&messages, OutputStream::Stdout)).expect("utf8"),
        format!("{uid}\n{gid}\n{gid}\n")
    );
    assert!(
        logs(&messages)
            .iter()
            .any(|l| l == &format!("running as user nobody (uid {uid}, gid {gid})"))
    );
}

#[tokio::test]
async fn sigterm_to_the_runner_ends_the_command_and_is_reported() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    let pidfile = c.dir.path().join("pid");
    c.execute(commands_request(
        &[&format!(
            "sleep 30.105 & echo $! > {}; wait",
            pidfile.display()
        )],
        &dir,
    ))
    .await;
    c.until(|m| matches!(m, RunnerMessage::CommandStarted { .. }))
        .await;
    read_pid(&pidfile).await;
    let runner = c.runner.id().expect("runner pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(runner).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill runner");
    let messages = c.until_finished().await;
    assert_eq!(
        finished(&messages),
        (false, "cancelled: the runner received SIGTERM".into())
    );
    assert!(exits(&messages)[0].1.cancelled);
    assert!(none_runs("sleep 30.105").await, "the grandchild still runs");
    assert_eq!(c.exit_code().await, Some(0));
}

#[tokio::test]
async fn impossible_credentials_are_an_error_and_nothing_runs() {
    let mut c = start().await;
    let mut request = commands_request(&["echo never"], "/");
    // As root: more groups than the kernel accepts make setgroups fail.
    // Not as root: any other user is refused.
    let other = nix::unistd::getuid().as_raw().wrapping_add(1);
    request.credentials = Some(Credentials {
        uid: other,
        gid: other,
        groups: (0..70_000).collect(),
        user_name: "someone".into(),
    });
    c.execute(request).await;
    let messages = c.until_finished().await;
    let message = match messages.as_slice() {
        [RunnerMessage::Error { message }] => message.clone(),
        other => panic!("expected only an Error: {other:?}"),
    };
    if nix::unistd::geteuid().is_root() {
        assert!(
            message.starts_with("cannot switch to user someone")
                && message.contains("setgroups(70000 groups) failed"),
            "{message}"
        );
    } else {
        assert!(
            message.starts_with("runner is not root, cannot switch to user someone"),
            "{message}"
        );
    }
    assert_eq!(c.exit_code().await, Some(1));
}

/// The pid reported for command `index`.
fn started_pid(messages: &[RunnerMessage], index: usize) -> u32 {
    messages
        .iter()
        .find_map(|m| match m {
            RunnerMessage::CommandStarted { index: i, pid, .. } if *i == index => Some(*pid),
            _ => None,
        })
        .expect("the command started")
}

#[tokio::test]
async fn plain_words_run_without_a_shell_and_shell_syntax_with_one() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    // `/proc/self/stat` holds the parent of the process that reads it (its fourth
    // field): the runner when the command runs directly (pid 0 from inside the run's PID
    // namespace, where the runner is not), the shell otherwise.
    c.execute(commands_request(
        &["cat /proc/self/stat", "cat /proc/self/stat | cat"],
        &dir,
    ))
    .await;
    let messages = c.until_finished().await;
    assert!(finished(&messages).0, "{messages:?}");
    let stdout = String::from_utf8(output(&messages, OutputStream::Stdout)).expect("utf8");
    let parents: Vec<u32> = stdout
        .lines()
        .map(|line| {
            let after = line.rsplit_once(')').map_or("", |(_, after)| after);
            after
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse().ok())
                .expect("ppid")
        })
        .collect();
    assert_eq!(parents.len(), 2, "{stdout}");
    let contained = logs(&messages)
        .iter()
        .any(|line| line.starts_with("contained: "));
    let runner = if contained {
        0
    } else {
        c.runner.id().expect("runner pid")
    };
    assert_eq!(parents[0], runner, "run directly: {stdout}");
    assert_ne!(parents[1], runner, "run by the shell: {stdout}");
    assert!(started_pid(&messages, 1) > 0);
}

#[tokio::test]
async fn a_missing_program_still_gets_the_shells_message_and_exit_code() {
    let mut c = start().await;
    let dir = c.dir.path().to_str().expect("utf8").to_string();
    c.execute(commands_request(&["no-such-program-4711 --flag"], &dir))
        .await;
    let messages = c.until_finished().await;
    let exits = exits(&messages);
    assert_eq!(exits.len(), 1, "{messages:?}");
    assert_eq!(exits[0].1.code, Some(127), "{:?}", exits[0].1);
    let stderr = String::from_utf8_lossy(&output(&messages, OutputStream::Stderr)).into_owned();
    assert!(
        stderr.contains("no-such-program-4711") && stderr.contains("not found"),
        "{stderr}"
    );
}

/// A script without a `#!` line, named as a plain word, runs as the shell would run it
/// (as `execvp` did, which runs such a file with `/bin/sh`).
#[tokio::test]
async fn a_script_without_an_interpreter_line_runs_with_the_shell() {
    let mut c = start().await;
    let dir = c.dir.path();
    let script = dir.join("plain-script");
    std::fs::write(&script, "echo ran-as-shell-script \"$1\"\n").expect("write");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let dir_text = dir.to_str().expect("utf8").to_string();
    c.execute(commands_request(&["./plain-script arg"], &dir_text))
        .await;
    let messages = c.until_finished().await;
    assert!(finished(&messages).0, "{messages:?}");
    assert_eq!(
        String::from_utf8_lossy(&output(&messages, OutputStream::Stdout)),
        "ran-as-shell-script arg\n"
    );
}

/// The nice value in a `/proc/<pid>/stat` line (its 19th field, the 17th after the
/// command's name).
fn nice_of(stat_line: &str) -> i32 {
    let after = stat_line.rsplit_once(')').map_or("", |(_, after)| after);
    after
        .split_whitespace()
        .nth(16)
        .and_then(|nice| nice.parse().ok())
        .unwrap_or_else(|| panic!("no nice value in {stat_line:?}"))
}

/// A timer's run (`end_yields`): its commands, and the init while they run (its sweeps
/// are on the way of each command's end), keep the runner's priority; only the init's
/// end yields (`namespaces` tests it). The same without the flag.
#[tokio::test]
async fn a_run_whose_end_yields_keeps_its_priority_while_its_commands_run() {
    for yields in [true, false] {
        let mut c = start().await;
        let dir = c.dir.path().to_str().expect("utf8").to_string();
        let mut request = commands_request(&["cat /proc/1/stat /proc/self/stat"], &dir);
        request.end_yields = yields;
        c.execute(request).await;
        let messages = c.until_finished().await;
        assert!(finished(&messages).0, "{messages:?}");
        let stdout = String::from_utf8(output(&messages, OutputStream::Stdout)).expect("utf8");
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{stdout}");
        assert_eq!(nice_of(lines[1]), 0, "the command's own priority: {stdout}");
        let contained = logs(&messages)
            .iter()
            .any(|line| line.starts_with("contained: "));
        if contained {
            // Pid 1 of the run's PID namespace is its init.
            assert_eq!(nice_of(lines[0]), 0, "yields {yields}: {stdout}");
        }
    }
}
