//! The controller's side of the runner fork server (`svc-runner --fork-server`, see
//! `proto::fork`): one pre-initialised runner that forks a runner for each run of
//! commands, so that a run does not pay for the exec and start-up of a fresh process.
//!
//! The server is started through the hub's [`Spawner`], whose thread lives while the
//! server may (a parent-death signal follows the thread that started a process).
//! Requests go out through one writer task (a `Fork` frame carries the
//! forked runner's connection as a descriptor); events come in through one reader
//! task, which answers each `fork` and each wait for a forked runner's exit. When the
//! server ends, every fork still waiting fails and every wait for an exit ends with
//! the exit unknown; [`ForkServer::is_alive`] then tells the caller to start runners the
//! plain way.

use crate::util::lock::MutexExt as _;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt as _;
use proto::fork::{ForkClientCodec, ForkEvent, ForkRequest};
use tokio::io::AsyncWriteExt as _;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;
use tokio_util::codec::FramedRead;

use crate::runner::spawner::{Spawner, runner_command};

/// How long the server has to say it is ready, and to answer a fork.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the fork server could not be started or could not fork.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    #[error("cannot start the runner fork server {path}: {source}")]
    Start {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("the runner fork server did not say it was ready: {0}")]
    NotReady(String),
    #[error(
        "the runner fork server speaks protocol version {theirs}, the controller {ours}: install matching svc-controller and svc-runner"
    )]
    Version { theirs: u32, ours: u32 },
    #[error("the runner fork server has ended")]
    Ended,
    #[error("the runner fork server did not answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot make the runner's connection: {0}")]
    Connection(#[source] io::Error),
    #[error("the runner fork server could not fork: {0}")]
    Failed(String),
}

/// One request on its way to the server, with the descriptor a `Fork` carries.
struct Outgoing {
    frame: Vec<u8>,
    fd: Option<OwnedFd>,
}

/// The answer to a fork: the runner's pid and where its exit will be told.
type ForkAnswer = Result<(u32, oneshot::Receiver<String>), ForkError>;

/// What the reader task answers.
#[derive(Default)]
struct Waiting {
    next_id: u64,
    /// Forks asked for and not answered yet, by request id.
    forks: HashMap<u64, oneshot::Sender<ForkAnswer>>,
    /// Forked runners not reaped yet, by pid: the exit text goes there.
    exits: HashMap<u32, oneshot::Sender<String>>,
}

struct Inner {
    requests: mpsc::UnboundedSender<Outgoing>,
    waiting: Mutex<Waiting>,
    alive: AtomicBool,
    /// The server process, taken and waited for once it has ended ([`ended`]).
    process: Mutex<Option<tokio::process::Child>>,
    /// The thread that started the server, kept while the server may live.
    _started_by: Arc<Spawner>,
}

/// Handle on a running fork server. Dropping the last one closes the control socket:
/// the server then ends once every runner it forked has ended.
#[derive(Clone)]
pub struct ForkServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ForkServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForkServer")
            .field("alive", &self.is_alive())
            .finish()
    }
}

impl ForkServer {
    /// Starts `runner_path --fork-server` through `spawner` (whose thread its
    /// parent-death signal then follows, and which it keeps) and waits until it is ready.
    /// Call it from a runtime (its tasks are spawned there). `socket` is the controller's
    /// runner socket: the server does not use it, it names the controller on the server's
    /// command line. `protected_paths`: those of every run's sandbox, which the server
    /// walks once for all its runners (`--protect`).
    pub async fn start(
        spawner: &Arc<Spawner>,
        runner_path: &Path,
        socket: &Path,
        protected_paths: &[String],
    ) -> Result<ForkServer, ForkError> {
        let start_error = |source| ForkError::Start {
            path: runner_path.display().to_string(),
            source,
        };
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(start_error)?;
        let mut command = runner_command(runner_path, socket);
        command.arg("--fork-server");
        for path in protected_paths {
            command.arg("--protect").arg(path);
        }
        command.stdin(Stdio::from(OwnedFd::from(theirs)));
        // Not killed with its handle: it ends by itself once the control socket is
        // closed and its runners have ended; the runtime reaps it.
        let process = spawner.spawn(command).await.map_err(start_error)?;

        ours.set_nonblocking(true).map_err(start_error)?;
        let stream = UnixStream::from_std(ours).map_err(start_error)?;
        let (read, write) = stream.into_split();
        let mut events = FramedRead::new(read, ForkClientCodec::new());
        match timeout(ANSWER_TIMEOUT, events.next()).await {
            Ok(Some(Ok(ForkEvent::Ready { version }))) if version == proto::PROTOCOL_VERSION => {}
            Ok(Some(Ok(ForkEvent::Ready { version }))) => {
                return Err(ForkError::Version {
                    theirs: version,
                    ours: proto::PROTOCOL_VERSION,
                });
            }
            Ok(Some(Ok(other))) => return Err(ForkError::NotReady(format!("it sent {other:?}"))),
            Ok(Some(Err(err))) => return Err(ForkError::NotReady(err.to_string())),
            Ok(None) => return Err(ForkError::NotReady("it exited".into())),
            Err(_) => return Err(ForkError::Timeout(ANSWER_TIMEOUT)),
        }

        let (requests, outgoing) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            requests,
            waiting: Mutex::default(),
            alive: AtomicBool::new(true),
            process: Mutex::new(Some(process)),
            _started_by: spawner.clone(),
        });
        tokio::spawn(write_requests(write, outgoing));
        tokio::spawn(read_events(events, Arc::downgrade(&inner)));
        Ok(ForkServer { inner })
    }

    /// Whether the server is still there to fork runners.
    pub fn is_alive(&self) -> bool {
        self.inner.alive.load(Ordering::Acquire)
    }

    /// Forks one runner; returns it with the controller's end of its connection.
    pub async fn fork(&self) -> Result<(ForkedRunner, UnixStream), ForkError> {
        if !self.is_alive() {
            return Err(ForkError::Ended);
        }
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(ForkError::Connection)?;
        let (answer_tx, answer_rx) = oneshot::channel();
        let id = {
            let mut waiting = self.inner.waiting.locked();
            waiting.next_id += 1;
            let id = waiting.next_id;
            waiting.forks.insert(id, answer_tx);
            id
        };
        let frame = proto::codec::encode_frame(&ForkRequest::Fork { id })
            .map_err(|err| ForkError::Failed(err.to_string()))?;
        let sent = self.inner.requests.send(Outgoing {
            frame,
            fd: Some(OwnedFd::from(theirs)),
        });
        if sent.is_err() {
            self.inner.waiting.locked().forks.remove(&id);
            return Err(ForkError::Ended);
        }
        let (pid, exit) = match timeout(ANSWER_TIMEOUT, answer_rx).await {
            Ok(Ok(answer)) => answer?,
            Ok(Err(_)) => return Err(ForkError::Ended),
            Err(_) => {
                self.inner.waiting.locked().forks.remove(&id);
                return Err(ForkError::Timeout(ANSWER_TIMEOUT));
            }
        };
        let runner = ForkedRunner {
            pid,
            exit: Some(exit),
            status: None,
            server: self.inner.clone(),
        };
        ours.set_nonblocking(true).map_err(ForkError::Connection)?;
        let stream = UnixStream::from_std(ours).map_err(ForkError::Connection)?;
        Ok((runner, stream))
    }
}

/// Sends the requests in order; a `Fork` with its runner's connection attached.
async fn write_requests(
    mut write: tokio::net::unix::OwnedWriteHalf,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
) {
    while let Some(request) = outgoing.recv().await {
        let sent = match &request.fd {
            Some(fd) => {
                proto::fdpass::send_with_fd(write.as_ref(), &request.frame, fd.as_fd()).await
            }
            None => write.write_all(&request.frame).await,
        };
        if let Err(err) = sent {
            tracing::warn!(error = %err, "cannot write to the runner fork server");
            return;
        }
    }
    // Every handle is gone: dropping the write half shuts it down, and the server ends
    // once its runners have.
}

/// Answers forks and exits until the server ends, then fails whatever still waits. Holds
/// the handle weakly: when the last one is gone, the control socket closes (see
/// [`write_requests`]) and this ends.
async fn read_events(
    mut events: FramedRead<tokio::net::unix::OwnedReadHalf, ForkClientCodec>,
    inner: Weak<Inner>,
) {
    loop {
        let event = events.next().await;
        let Some(inner) = inner.upgrade() else { return };
        match event {
            Some(Ok(ForkEvent::Forked { id, pid })) => {
                let (exit_tx, exit_rx) = oneshot::channel();
                let mut waiting = inner.waiting.locked();
                waiting.exits.insert(pid, exit_tx);
                if let Some(answer) = waiting.forks.remove(&id) {
                    let _ = answer.send(Ok((pid, exit_rx)));
                }
                // (When the fork was given up meanwhile, the runner's connection was
                // closed with it: the runner exits at once.)
            }
            Some(Ok(ForkEvent::ForkFailed { id, message })) => {
                if let Some(answer) = inner.waiting.locked().forks.remove(&id) {
                    let _ = answer.send(Err(ForkError::Failed(message)));
                }
            }
            Some(Ok(ForkEvent::Exited { pid, code, signal })) => {
                if let Some(exit) = inner.waiting.locked().exits.remove(&pid) {
                    let _ = exit.send(proto::fork::exit_text(code, signal));
                }
            }
            Some(Ok(ForkEvent::Ready { .. })) => {}
            Some(Err(err)) => {
                tracing::warn!(error = %err, "the runner fork server sent an invalid frame");
                return ended(&inner);
            }
            None => return ended(&inner),
        }
    }
}

/// The server ended while the controller still uses it: whatever waits for it fails.
fn ended(inner: &Inner) {
    inner.alive.store(false, Ordering::Release);
    let mut waiting = inner.waiting.locked();
    for (_, answer) in waiting.forks.drain() {
        let _ = answer.send(Err(ForkError::Ended));
    }
    // Dropped senders: their waits end with the exit unknown.
    waiting.exits.clear();
    drop(waiting);
    // Reaped now, not when the hub next needs a server and drops this one: a server
    // that died (killed by hand, by the OOM killer) would otherwise stay a zombie of
    // the service until the next run.
    if let Some(mut process) = inner.process.locked().take() {
        tokio::spawn(async move {
            let _ = process.wait().await;
        });
    }
    tracing::warn!("the runner fork server ended; runners are started afresh until another is up");
}

/// A runner forked by the server. Dropping it before its exit kills it.
#[derive(Debug)]
pub struct ForkedRunner {
    pid: u32,
    exit: Option<oneshot::Receiver<String>>,
    status: Option<String>,
    server: Arc<Inner>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForkServer").finish_non_exhaustive()
    }
}

impl ForkedRunner {
    /// Its pid.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Waits for its exit; how it ended, in the standard library's words
    /// (`exit status: 0`, `signal: 9`).
    pub async fn wait(&mut self) -> String {
        if let Some(status) = &self.status {
            return status.clone();
        }
        let status = match self.exit.take() {
            Some(exit) => exit
                .await
                .unwrap_or_else(|_| "unknown (the runner fork server ended)".to_string()),
            None => "unknown".to_string(),
        };
        self.status = Some(status.clone());
        status
    }

    /// Asks the server to kill it, unless it was seen to exit.
    pub fn start_kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        if let Ok(frame) = proto::codec::encode_frame(&ForkRequest::Kill { pid: self.pid }) {
            let _ = self.server.requests.send(Outgoing { frame, fd: None });
        }
    }
}

impl Drop for ForkedRunner {
    fn drop(&mut self) {
        self.start_kill();
    }
}
