//! Integration tests of the handshake with the real binary.

mod common;

use common::*;
use proto::{ControllerMessage, PROTOCOL_VERSION, RunnerMessage};

#[tokio::test]
async fn hello_carries_the_token_and_protocol_version() {
    let (mut c, hello) = connect().await;
    assert_eq!(
        hello,
        RunnerMessage::Hello {
            version: PROTOCOL_VERSION,
            token: TOKEN.into()
        }
    );
    c.hang_up();
    assert_eq!(c.exit_code().await, Some(2));
}

#[tokio::test]
async fn reject_makes_the_runner_exit_2() {
    let (mut c, _hello) = connect().await;
    c.send(ControllerMessage::Reject {
        reason: "bad token".into(),
    })
    .await;
    assert_eq!(c.exit_code().await, Some(2));
}

#[tokio::test]
async fn a_wrong_protocol_version_makes_the_runner_exit_2() {
    let (mut c, _hello) = connect().await;
    c.send(ControllerMessage::Welcome {
        version: PROTOCOL_VERSION + 1,
        protected_paths: None,
        cgroup_tasks: Vec::new(),
        private_dirs: None,
    })
    .await;
    assert_eq!(c.exit_code().await, Some(2));
}

#[tokio::test]
async fn version_and_help_work() {
    let bin = env!("CARGO_BIN_EXE_svc-runner");
    let out = std::process::Command::new(bin)
        .arg("--version")
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("svc-runner "));
    let out = std::process::Command::new(bin)
        .arg("--help")
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--socket"));
}
