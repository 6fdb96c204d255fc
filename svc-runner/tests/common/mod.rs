//! A fake controller for the integration tests: listens on a socket in a temporary
//! directory, starts the real `svc-runner` binary and speaks the protocol with it.
#![allow(dead_code)]

use std::process::Stdio;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use proto::{
    Action, ControllerCodec, ControllerMessage, ExecRequest, OutputStream, PROTOCOL_VERSION,
    RunnerMessage,
};
use tokio::io::AsyncWriteExt as _;
use tokio::net::UnixListener;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::Child;
use tokio_util::codec::{FramedRead, FramedWrite};

/// Longest wait for any single step.
pub const STEP: Duration = Duration::from_secs(2);
/// Longest wait for a whole run.
pub const RUN: Duration = Duration::from_secs(6);

pub const TOKEN: &str = "test-token-0123456789";

pub struct Controller {
    pub dir: tempfile::TempDir,
    pub runner: Child,
    pub reader: Option<FramedRead<OwnedReadHalf, ControllerCodec>>,
    pub writer: Option<FramedWrite<OwnedWriteHalf, ControllerCodec>>,
}

/// Starts the runner and accepts its connection; returns before any reply to `Hello`.
pub async fn connect() -> (Controller, RunnerMessage) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runner.sock");
    let listener = UnixListener::bind(&path).expect("listen");
    let mut runner = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-runner"))
        .arg("--socket")
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn runner");
    let mut stdin = runner.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{TOKEN}\n").as_bytes())
        .await
        .expect("write token");
    drop(stdin);
    let (stream, _) = tokio::time::timeout(STEP, listener.accept())
        .await
        .expect("runner connects in time")
        .expect("accept");
    let (read, write) = stream.into_split();
    let mut controller = Controller {
        dir,
        runner,
        reader: Some(FramedRead::new(read, ControllerCodec::new())),
        writer: Some(FramedWrite::new(write, ControllerCodec::new())),
    };
    let hello = controller.next().await.expect("hello");
    (controller, hello)
}

/// Starts the runner, checks `Hello` and answers `Welcome` (with no protected paths to
/// build the sandbox ahead with).
pub async fn start() -> Controller {
    start_with(None).await
}

/// Starts the runner, checks `Hello` and answers `Welcome` with `protected_paths`, from
/// which the runner builds the service's part of the sandbox before its work comes.
pub async fn start_with(protected_paths: Option<Vec<String>>) -> Controller {
    let (mut controller, hello) = connect().await;
    assert_eq!(
        hello,
        RunnerMessage::Hello {
            version: PROTOCOL_VERSION,
            token: TOKEN.into()
        }
    );
    controller
        .send(ControllerMessage::Welcome {
            version: PROTOCOL_VERSION,
            protected_paths,
            cgroup_tasks: Vec::new(),
            private_dirs: None,
        })
        .await;
    controller
}

impl Controller {
    pub async fn send(&mut self, message: ControllerMessage) {
        let writer = self.writer.as_mut().expect("connection open");
        tokio::time::timeout(STEP, writer.send(message))
            .await
            .expect("send in time")
            .expect("send");
    }

    pub async fn execute(&mut self, request: ExecRequest) {
        self.send(ControllerMessage::Execute(Box::new(request)))
            .await;
    }

    /// Sends `Execute` with `fd` attached, as the controller sends a ruleset it built.
    pub async fn execute_with_fd(&mut self, request: ExecRequest, fd: std::os::fd::BorrowedFd<'_>) {
        let writer = self.writer.as_mut().expect("connection open");
        writer.flush().await.expect("flush");
        let stream: &tokio::net::UnixStream = writer.get_ref().as_ref();
        let message = ControllerMessage::Execute(Box::new(request));
        tokio::time::timeout(
            STEP,
            proto::fdpass::send_message_with_fd(stream, message, fd),
        )
        .await
        .expect("send in time")
        .expect("send");
    }

    /// The next message, `None` on a clean close. Panics after [`STEP`].
    pub async fn next(&mut self) -> Option<RunnerMessage> {
        let reader = self.reader.as_mut().expect("connection open");
        tokio::time::timeout(STEP, reader.next())
            .await
            .expect("a message in time")
            .map(|m| m.expect("valid message"))
    }

    /// Every message up to and including `Finished` or `Error`, within [`RUN`].
    pub async fn until_finished(&mut self) -> Vec<RunnerMessage> {
        let reader = self.reader.as_mut().expect("connection open");
        let collect = async {
            let mut messages = Vec::new();
            while let Some(message) = reader.next().await {
                let message = message.expect("valid message");
                let last = matches!(
                    message,
                    RunnerMessage::Finished { .. } | RunnerMessage::Error { .. }
                );
                messages.push(message);
                if last {
                    break;
                }
            }
            messages
        };
        tokio::time::timeout(RUN, collect)
            .await
            .expect("the run finishes in time")
    }

    /// Messages until one matches `pred` (included).
    pub async fn until(&mut self, pred: impl Fn(&RunnerMessage) -> bool) -> Vec<RunnerMessage> {
        let mut messages = Vec::new();
        loop {
            let message = self.next().await.expect("connection open");
            let done = pred(&message);
            messages.push(message);
            if done {
                return messages;
            }
        }
    }

    /// Exit code of the runner, within [`STEP`].
    pub async fn exit_code(&mut self) -> Option<i32> {
        tokio::time::timeout(STEP, self.runner.wait())
            .await
            .expect("runner exits in time")
            .expect("wait")
            .code()
    }

    /// Closes both directions of the connection.
    pub fn hang_up(&mut self) {
        self.reader = None;
        self.writer = None;
    }
}

pub fn commands_request(commands: &[&str], dir_work: &str) -> ExecRequest {
    ExecRequest {
        job_id: "test_job".into(),
        counter: 1,
        timeout_ms: None,
        kill_grace_ms: 300,
        credentials: None,
        limits: Default::default(),
        keep_capabilities: None,
        sandbox: None,
        private_dirs: Vec::new(),
        cgroup_procs: Vec::new(),
        end_yields: false,
        action: Action::Commands {
            commands: commands.iter().map(|c| c.to_string()).collect(),
            env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            dir_work: dir_work.into(),
        },
    }
}

/// All bytes of one stream, concatenated.
pub fn output(messages: &[RunnerMessage], which: OutputStream) -> Vec<u8> {
    messages
        .iter()
        .filter_map(|m| match m {
            RunnerMessage::Output { stream, data } if *stream == which => Some(data.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

pub fn logs(messages: &[RunnerMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            RunnerMessage::Log { line } => Some(line.clone()),
            _ => None,
        })
        .collect()
}

pub fn finished(messages: &[RunnerMessage]) -> (bool, String) {
    match messages.last() {
        Some(RunnerMessage::Finished {
            success, summary, ..
        }) => (*success, summary.clone()),
        other => panic!("last message is not Finished: {other:?}\nall: {messages:?}"),
    }
}

/// True when no process of the host runs with `marker` in its command line (polled
/// shortly). A pid a command reports is one of its run's PID namespace, which names
/// nothing on the host: the test looks for what the command started by its arguments.
pub async fn none_runs(marker: &str) -> bool {
    let until = tokio::time::Instant::now() + Duration::from_millis(500);
    loop {
        let running = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
            .any(|cmdline| {
                let text: Vec<u8> = cmdline
                    .iter()
                    .map(|b| if *b == 0 { b' ' } else { *b })
                    .collect();
                String::from_utf8_lossy(&text).contains(marker)
            });
        if !running {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a pid written by a command, waiting for the file to be complete.
pub async fn read_pid(path: &std::path::Path) -> i32 {
    let until = tokio::time::Instant::now() + STEP;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().parse().expect("pid");
            }
        }
        assert!(tokio::time::Instant::now() < until, "no pid file {path:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
