//! The runner's side of the controller connection: connect, handshake, report, listen for
//! `Cancel`, and the shared "stop the work" signal.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use proto::fdpass::FdReader;
use proto::{
    ControllerMessage, ExecRequest, PROTOCOL_VERSION, ProtoError, RunnerCodec, RunnerMessage,
};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::watch;
use tokio_util::codec::{FramedRead, FramedWrite};

/// Longest wait for the controller's answers during the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest token accepted on standard input, in bytes (newline excluded).
pub const MAX_TOKEN_LEN: usize = 256;

/// Reading half of the connection, decoding controller messages and keeping the
/// descriptor that may come with `Execute`.
pub type Reader = FramedRead<FdReader, RunnerCodec>;
/// Writing half of the connection, encoding runner messages.
pub type Writer = FramedWrite<OwnedWriteHalf, RunnerCodec>;

/// Everything that can go wrong before the work starts.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The token could not be read from standard input.
    #[error("cannot read the token from standard input: {0}")]
    TokenRead(#[source] std::io::Error),
    /// The token line is empty, too long or not UTF-8.
    #[error("invalid token on standard input: {0}")]
    TokenInvalid(&'static str),
    /// Connecting to the controller failed.
    #[error("cannot connect to the controller at {path}: {source}")]
    Connect {
        /// The path given on the command line.
        path: String,
        /// The connect error.
        #[source]
        source: std::io::Error,
    },
    /// The connection a forked runner was born with cannot be used.
    #[error("cannot use the connection made for this runner: {0}")]
    Inherited(#[source] std::io::Error),
    /// A protocol or i/o error on the connection.
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// The controller refused the handshake.
    #[error("the controller rejected the runner: {0}")]
    Rejected(String),
    /// The controller closed the connection before sending the work.
    #[error("the controller closed the connection during the handshake")]
    Closed,
    /// The controller did not answer in time.
    #[error("the controller did not answer within {0:?}")]
    Timeout(Duration),
}

/// Why the work must end before it is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The controller sent `Cancel` with this reason.
    Cancel(String),
    /// The connection to the controller is gone (EOF or error): nothing can be reported.
    ControllerGone,
    /// The runner received SIGTERM (a plain kill, or the controller died).
    Terminated,
}

impl Stop {
    /// The reason used in the `cancelled: <reason>` summary.
    pub fn reason(&self) -> String {
        match self {
            Stop::Cancel(reason) => reason.clone(),
            Stop::ControllerGone => "the connection to the controller was lost".into(),
            Stop::Terminated => "the runner received SIGTERM".into(),
        }
    }
}

/// Sets the [`Stop`] reason once; the first reason wins.
#[derive(Debug)]
pub struct StopHandle {
    tx: watch::Sender<Option<Stop>>,
}

impl StopHandle {
    /// A new handle with no stop requested, shared by everything that may request one.
    pub fn new() -> Arc<Self> {
        let (tx, _rx) = watch::channel(None);
        Arc::new(Self { tx })
    }

    /// Requests the work to stop, unless a stop was already requested.
    pub fn stop(&self, reason: Stop) {
        self.tx.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// The stop requested so far, if any.
    pub fn current(&self) -> Option<Stop> {
        self.tx.borrow().clone()
    }

    /// A receiver to wait on with [`wait_stop`].
    pub fn subscribe(&self) -> watch::Receiver<Option<Stop>> {
        self.tx.subscribe()
    }
}

/// Waits until a stop is requested and returns its reason.
pub async fn wait_stop(rx: &mut watch::Receiver<Option<Stop>>) -> Stop {
    match rx.wait_for(Option::is_some).await {
        Ok(stop) => stop.clone().unwrap_or(Stop::ControllerGone),
        // The handle is gone: nobody can request a stop any more.
        Err(_) => std::future::pending().await,
    }
}

/// Reads the token line from `input`: at most [`MAX_TOKEN_LEN`] bytes, then `\n` or EOF.
pub fn read_token(input: impl std::io::Read) -> Result<String, ConnectionError> {
    use std::io::{BufRead as _, BufReader};
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_TOKEN_LEN + 2).unwrap_or(u64::MAX);
    BufReader::new(input.take(limit))
        .read_until(b'\n', &mut line)
        .map_err(ConnectionError::TokenRead)?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.len() > MAX_TOKEN_LEN {
        return Err(ConnectionError::TokenInvalid("longer than 256 bytes"));
    }
    if line.is_empty() {
        return Err(ConnectionError::TokenInvalid("empty"));
    }
    String::from_utf8(line).map_err(|_| ConnectionError::TokenInvalid("not UTF-8"))
}

/// Connects to the controller's socket at `path`.
pub async fn connect(path: &Path) -> Result<(Reader, Writer), ConnectionError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| ConnectionError::Connect {
            path: path.display().to_string(),
            source,
        })?;
    let (recv, send) = stream.into_split();
    Ok((
        FramedRead::new(FdReader::new(recv), RunnerCodec::new()),
        FramedWrite::new(send, RunnerCodec::new()),
    ))
}

/// Takes the connection a forked runner was born with (see `proto::fork`).
pub fn from_fd(connection: OwnedFd) -> Result<(Reader, Writer), ConnectionError> {
    let stream = std::os::unix::net::UnixStream::from(connection);
    let connected = stream
        .set_nonblocking(true)
        .and_then(|()| UnixStream::from_std(stream))
        .map_err(ConnectionError::Inherited)?;
    let (recv, send) = connected.into_split();
    Ok((
        FramedRead::new(FdReader::new(recv), RunnerCodec::new()),
        FramedWrite::new(send, RunnerCodec::new()),
    ))
}

/// What `Welcome` gives the runner to prepare while it waits for its work.
#[derive(Debug, Default)]
pub struct Welcomed {
    /// The protected paths, for the part of the sandbox built ahead.
    pub protected_paths: Option<Vec<String>>,
    /// The run's cgroup to join ahead ([`crate::birthplace`]).
    pub cgroup_tasks: Vec<String>,
    /// The run's private directories, for its namespaces made ahead.
    pub private_dirs: Option<Vec<proto::PrivateDir>>,
}

/// Sends `Hello` and expects `Welcome` with our protocol version; returns what it
/// carries to prepare while the runner waits for its work ([`receive_work`]).
pub async fn handshake(
    reader: &mut Reader,
    writer: &mut Writer,
    token: String,
) -> Result<Welcomed, ConnectionError> {
    writer
        .send(RunnerMessage::Hello {
            version: PROTOCOL_VERSION,
            token,
        })
        .await?;
    match next_message(reader).await? {
        ControllerMessage::Welcome {
            version,
            protected_paths,
            cgroup_tasks,
            private_dirs,
        } if version == PROTOCOL_VERSION => Ok(Welcomed {
            protected_paths,
            cgroup_tasks,
            private_dirs,
        }),
        ControllerMessage::Welcome { version, .. } => Err(ProtoError::VersionMismatch {
            peer: version,
            ours: PROTOCOL_VERSION,
        }
        .into()),
        ControllerMessage::Reject { reason } => Err(ConnectionError::Rejected(reason)),
        other => Err(ProtoError::Unexpected(kind(&other).into()).into()),
    }
}

/// Waits for the work, `Execute`, after the handshake; returns it with the descriptor
/// that came with it, if any (the sandbox's ruleset when the controller built it:
/// [`proto::Sandbox::attached`]).
pub async fn receive_work(
    reader: &mut Reader,
) -> Result<(Box<ExecRequest>, Option<OwnedFd>), ConnectionError> {
    match next_message(reader).await? {
        ControllerMessage::Execute(request) => Ok((request, reader.get_mut().take_fd())),
        ControllerMessage::Reject { reason } => Err(ConnectionError::Rejected(reason)),
        other => Err(ProtoError::Unexpected(kind(&other).into()).into()),
    }
}

async fn next_message(reader: &mut Reader) -> Result<ControllerMessage, ConnectionError> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.next()).await {
        Err(_) => Err(ConnectionError::Timeout(HANDSHAKE_TIMEOUT)),
        Ok(None) => Err(ConnectionError::Closed),
        Ok(Some(message)) => Ok(message?),
    }
}

fn kind(message: &ControllerMessage) -> &'static str {
    match message {
        ControllerMessage::Welcome { .. } => "welcome",
        ControllerMessage::Reject { .. } => "reject",
        ControllerMessage::Execute(_) => "execute",
        ControllerMessage::Cancel { .. } => "cancel",
    }
}

/// Reads the controller's messages after `Execute` until the connection ends: `Cancel`
/// requests a [`Stop::Cancel`], EOF or an error a [`Stop::ControllerGone`].
pub async fn listen(mut reader: Reader, stop: Arc<StopHandle>) {
    loop {
        match reader.next().await {
            Some(Ok(ControllerMessage::Cancel { reason })) => stop.stop(Stop::Cancel(reason)),
            Some(Ok(other)) => {
                eprintln!(
                    "svc-runner: ignoring unexpected {} message from the controller",
                    kind(&other)
                );
            }
            Some(Err(err)) => {
                eprintln!("svc-runner: controller connection failed: {err}");
                stop.stop(Stop::ControllerGone);
                return;
            }
            None => {
                stop.stop(Stop::ControllerGone);
                return;
            }
        }
    }
}

/// Sends [`RunnerMessage`]s to the controller. After the first failed send it drops the
/// connection, requests [`Stop::ControllerGone`] and ignores further messages.
#[derive(Debug)]
pub struct Reporter {
    writer: Option<Writer>,
    stop: Arc<StopHandle>,
}

impl Reporter {
    /// Wraps the writing half of the connection.
    pub fn new(writer: Writer, stop: Arc<StopHandle>) -> Self {
        Self {
            writer: Some(writer),
            stop,
        }
    }

    /// Sends one message; false when the connection is (or just went) away.
    pub async fn send(&mut self, message: RunnerMessage) -> bool {
        self.push(message, true).await
    }

    /// Queues one message, to go with the next one sent ([`Reporter::send`] flushes):
    /// for a message that something else soon follows, so that the controller is woken
    /// once for both. False when the connection is (or just went) away.
    pub async fn queue(&mut self, message: RunnerMessage) -> bool {
        self.push(message, false).await
    }

    async fn push(&mut self, message: RunnerMessage, flush: bool) -> bool {
        let Some(writer) = self.writer.as_mut() else {
            return false;
        };
        let pushed = if flush {
            writer.send(message).await
        } else {
            writer.feed(message).await
        };
        match pushed {
            Ok(()) => true,
            Err(err) => {
                eprintln!("svc-runner: cannot send to the controller: {err}");
                self.writer = None;
                self.stop.stop(Stop::ControllerGone);
                false
            }
        }
    }

    /// Sends a [`RunnerMessage::Log`] line.
    pub async fn log(&mut self, line: impl Into<String>) -> bool {
        self.send(RunnerMessage::Log { line: line.into() }).await
    }

    /// True while messages can still be sent.
    pub fn is_connected(&self) -> bool {
        self.writer.is_some()
    }

    /// Flushes and closes the connection.
    pub async fn close(&mut self) {
        if let Some(mut writer) = self.writer.take() {
            if let Err(err) = writer.close().await {
                eprintln!("svc-runner: closing the controller connection: {err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_one_line() {
        assert_eq!(read_token(&b"abc\n"[..]).expect("ok"), "abc");
        assert_eq!(read_token(&b"abc"[..]).expect("ok"), "abc");
        assert_eq!(read_token(&b"abc\r\nrest"[..]).expect("ok"), "abc");
        assert!(read_token(&b"\n"[..]).is_err());
        assert!(read_token(&b""[..]).is_err());
        let long = vec![b'a'; 257];
        assert!(read_token(&long[..]).is_err());
        let max = [vec![b'a'; 256], b"\n".to_vec()].concat();
        assert_eq!(read_token(&max[..]).expect("ok").len(), 256);
    }

    #[test]
    fn first_stop_wins() {
        let handle = StopHandle::new();
        assert_eq!(handle.current(), None);
        handle.stop(Stop::Cancel("a".into()));
        handle.stop(Stop::ControllerGone);
        assert_eq!(handle.current(), Some(Stop::Cancel("a".into())));
    }
}
