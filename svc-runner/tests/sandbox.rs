//! What confines each command of a run, checked with the real binary and a fake
//! controller: `no_new_privs` for every command.

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
