//! `fake-runner`: a stand-in for `svc-runner` that misbehaves on purpose, so the tests can
//! check how the controller copes with a broken runner.
//!
//! Usage: `fake-runner <mode> <dir_base> [the arguments the controller gave the runner...]`,
//! normally through a wrapper script set as `runner_path`:
//! `exec fake-runner <mode> <dir_base> "$@"`.
//!
//! Modes:
//!
//! - `garbage`: connects and sends a frame that is not a message, then waits for the
//!   controller to close the connection;
//! - `die-mid-run`: handshakes properly (the token read from stdin, protocol version 1),
//!   waits for the work, reports a command start and one `Output` frame
//!   (`partial-output`), then exits abruptly with status 1;
//! - `bad-version`: sends `Hello` with a protocol version the controller does not speak,
//!   then waits for the controller to close the connection.
//!
//! The socket is looked for, in order, among the arguments (a path, or the value after
//! `=`), among the environment values, and as any socket in
//! `<dir_base>/var/run/svc/controller`. Notes go to `<dir_base>/test-output/fake-runner.log`.

use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::{ControllerMessage, OutputStream, PROTOCOL_VERSION, RunnerMessage};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: fake-runner <mode> <dir_base> [runner arguments...]");
        std::process::exit(64);
    }
    let mode = args[1].clone();
    let dir_base = PathBuf::from(&args[2]);
    let rest = &args[3..];
    let mut notes = Notes::open(&dir_base);
    notes.say(&format!(
        "mode {mode}, arguments {rest:?}, pid {}",
        std::process::id()
    ));
    let code = match run(&mode, &dir_base, rest, &mut notes) {
        Ok(code) => code,
        Err(err) => {
            notes.say(&format!("error: {err:#}"));
            70
        }
    };
    notes.say(&format!("exit {code}"));
    std::process::exit(code);
}

fn run(mode: &str, dir_base: &Path, args: &[String], notes: &mut Notes) -> anyhow::Result<i32> {
    let token = read_token();
    notes.say(&format!("token {:?}", token.as_deref().unwrap_or("<none>")));
    let socket =
        find_socket(dir_base, args).ok_or_else(|| anyhow::anyhow!("no controller socket found"))?;
    notes.say(&format!("socket {}", socket.display()));
    let mut stream = UnixStream::connect(&socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let token = token.unwrap_or_default();
    match mode {
        "garbage" => {
            let junk = b"this is not a message \xff\xfe";
            // Notes come before the send: the controller may kill this process right after.
            notes.say("sending the garbage frame");
            stream.write_all(&(junk.len() as u32).to_be_bytes())?;
            stream.write_all(junk)?;
            stream.flush()?;
            drain(&mut stream, notes);
            Ok(0)
        }
        "bad-version" => {
            notes.say("sending the wrong version");
            send(
                &mut stream,
                &RunnerMessage::Hello {
                    version: PROTOCOL_VERSION + 998,
                    token,
                },
            )?;
            drain(&mut stream, notes);
            Ok(2)
        }
        "die-mid-run" => {
            send(
                &mut stream,
                &RunnerMessage::Hello {
                    version: PROTOCOL_VERSION,
                    token,
                },
            )?;
            let mut command = String::from("?");
            // Welcome, then Execute.
            for _ in 0..2 {
                let message = receive(&mut stream)?;
                notes.say(&format!("received {message:?}"));
                if let ControllerMessage::Execute(request) = &message
                    && let proto::Action::Commands { commands, .. } = &request.action
                    && let Some(first) = commands.first()
                {
                    command = first.clone();
                }
                if matches!(message, ControllerMessage::Reject { .. }) {
                    return Ok(3);
                }
            }
            notes.say("sending output, then dying in the middle of the run");
            send(
                &mut stream,
                &RunnerMessage::CommandStarted {
                    index: 0,
                    command,
                    pid: std::process::id(),
                },
            )?;
            send(
                &mut stream,
                &RunnerMessage::Output {
                    stream: OutputStream::Stdout,
                    data: b"partial-output\n".to_vec(),
                },
            )?;
            stream.flush()?;
            // Abrupt: no Finished, no clean shutdown of the connection.
            std::process::exit(1);
        }
        other => anyhow::bail!("unknown mode {other:?}"),
    }
}

/// The first line of standard input (the one-time token), read for at most 5 s.
fn read_token() -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        let mut stdin = std::io::stdin().lock();
        while let Ok(1) = stdin.read(&mut byte) {
            if byte[0] == b'\n' {
                break;
            }
            line.push(byte[0]);
        }
        let _ = tx.send(String::from_utf8_lossy(&line).trim().to_owned());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .ok()
        .filter(|token| !token.is_empty())
}

fn is_socket(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_socket())
}

fn find_socket(dir_base: &Path, args: &[String]) -> Option<PathBuf> {
    let candidates = args
        .iter()
        .cloned()
        .chain(std::env::vars().map(|(_, value)| value));
    for candidate in candidates {
        for text in [
            candidate.as_str(),
            candidate.split_once('=').map_or("", |(_, v)| v),
        ] {
            if !text.is_empty() && is_socket(Path::new(text)) {
                return Some(PathBuf::from(text));
            }
        }
    }
    let runtime = dir_base.join("var/run/svc/controller");
    std::fs::read_dir(runtime)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| is_socket(path))
}

fn send(stream: &mut UnixStream, message: &RunnerMessage) -> anyhow::Result<()> {
    let frame = proto::codec::encode_frame(message)?;
    stream.write_all(&frame)?;
    Ok(())
}

fn receive(stream: &mut UnixStream) -> anyhow::Result<ControllerMessage> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    anyhow::ensure!(len <= proto::MAX_FRAME_LEN, "frame of {len} bytes");
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(serde_json::from_slice(&body)?)
}

/// Reads until the controller closes the connection (or 10 s pass).
fn drain(stream: &mut UnixStream, notes: &mut Notes) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => {
                notes.say("controller closed the connection");
                return;
            }
            Ok(n) => notes.say(&format!(
                "received {n} bytes: {}",
                String::from_utf8_lossy(&buf[..n])
            )),
            Err(err) => {
                notes.say(&format!("read: {err}"));
                return;
            }
        }
    }
}

/// Appends diagnostic lines to `<dir_base>/test-output/fake-runner.log`.
struct Notes(Option<std::fs::File>);

impl Notes {
    fn open(dir_base: &Path) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir_base.join("test-output/fake-runner.log"))
            .ok();
        Notes(file)
    }

    /// The file first: the controller may kill this process at any moment.
    fn say(&mut self, line: &str) {
        if let Some(file) = &mut self.0 {
            let _ = writeln!(file, "{line}");
        }
        eprintln!("fake-runner: {line}");
    }
}
