//! `GET /svc/api/job_exec/log/stream?id=&counter=`: one Job log as server-sent events,
//! followed while the run goes on.
//!
//! Events, each `data` a JSON object:
//!
//! - `meta`: `{"job_id", "counter"}`, first, once;
//! - `chunk`: `{"offset", "content"}`: bytes of the log file from `offset`, in base64
//!   (a log need not be UTF-8), at most [`MAX_CHUNK`] bytes each; offsets are contiguous;
//! - `end`: `{"status", "name"}` once the log has its final name (`success` or `fail`),
//!   after its last chunk; the stream then ends;
//! - `gone`: the log disappeared (retention) before it ended; the stream ends;
//! - `timeout`: the stream reached [`MAX_STREAM`]; the client should fall back to polling.
//!
//! The log file is polled every [`POLL_EVERY`] from the last offset sent: the `.started`
//! file while it exists, then the renamed final file. A poll reads one chunk at most, and
//! the next poll comes only once the client has taken that chunk's event (the body is
//! pulled as the connection writes), at once while the log has more: a stream costs one
//! chunk of memory, however large the log and however slowly (or not at all) its client
//! reads. A client that reads nothing is dropped by the server's write timeout. Reading continues on the final
//! file at the same offset because the rename keeps the content (the same inode). The
//! stream ends when the run ends, when the client goes away (the next write fails; a
//! keep-alive comment is sent every 15 seconds), or after [`MAX_STREAM`].
//!
//! In cluster mode, a log this node does not have (another node runs the run) is
//! followed in the shared table instead, every [`POLL_SHARED_EVERY`], with the same
//! events: its node copies it there as it grows.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use futures_util::stream;
use serde_json::json;
use tokio::time::{Instant, MissedTickBehavior};

use super::query::{job_id, param, params};
use super::{ApiError, AppState};
use crate::cluster::SharedRunState;
use crate::engine::Kind;
use crate::engine::cluster_logs::shared_log_status;

/// Period of the log file polls.
pub const POLL_EVERY: Duration = Duration::from_millis(200);
/// Period of the polls of a log in the cluster's shared table, which a node copies
/// there every second.
pub const POLL_SHARED_EVERY: Duration = Duration::from_millis(500);
/// Largest number of log bytes in one `chunk` event, and in one poll.
pub const MAX_CHUNK: usize = 16 * 1024;
/// Longest life of one stream.
pub const MAX_STREAM: Duration = Duration::from_secs(6 * 60 * 60);

/// What one poll of a log found.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled {
    /// The run goes on; these bytes (possibly none) were appended since the last poll.
    Growing(Vec<u8>),
    /// The log has its final status; these are its last bytes (possibly none).
    Ended {
        /// `success` or `fail`.
        status: &'static str,
        /// Bytes after the last offset.
        rest: Vec<u8>,
    },
    /// No file of this log exists any more.
    Gone,
}

/// Follows one log file from an offset, across its rename to the final status.
#[derive(Debug, Clone)]
pub struct LogFollower {
    dir: PathBuf,
    id: String,
    counter: u64,
    offset: u64,
}

impl LogFollower {
    /// A follower of `<dir>/<id>.<counter>.<status>` starting at byte 0.
    pub fn new(dir: PathBuf, id: &str, counter: u64) -> LogFollower {
        LogFollower {
            dir,
            id: id.to_string(),
            counter,
            offset: 0,
        }
    }

    /// Offset of the next byte to read.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn path(&self, status: &str) -> PathBuf {
        self.dir
            .join(format!("{}.{}.{}", self.id, self.counter, status))
    }

    /// True when a file of this log exists, whatever its status.
    pub fn exists(&self) -> bool {
        ["started", "success", "fail"]
            .iter()
            .any(|status| self.path(status).is_file())
    }

    /// Reads what was appended since the last poll, at most [`MAX_CHUNK`] bytes: a full
    /// chunk means there may be more, whatever the file's name (call again).
    pub fn poll(&mut self) -> io::Result<Polled> {
        match self.read_from(&self.path("started"), MAX_CHUNK) {
            Ok(bytes) => return Ok(Polled::Growing(bytes)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
        for status in ["success", "fail"] {
            match self.read_from(&self.path(status), MAX_CHUNK) {
                Ok(bytes) if bytes.len() == MAX_CHUNK => return Ok(Polled::Growing(bytes)),
                Ok(rest) => return Ok(Polled::Ended { status, rest }),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        Ok(Polled::Gone)
    }

    fn read_from(&mut self, path: &std::path::Path, max: usize) -> io::Result<Vec<u8>> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::with_capacity(max.min(MAX_CHUNK));
        file.take(u64::try_from(max).unwrap_or(u64::MAX))
            .read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        Ok(bytes)
    }
}

/// `chunk` events for `bytes` read ending at `end_offset`.
fn chunk_events(bytes: &[u8], end_offset: u64, out: &mut VecDeque<Event>) {
    let mut offset = end_offset - bytes.len() as u64;
    for piece in bytes.chunks(MAX_CHUNK) {
        let data = json!({
            "offset": offset,
            "content": base64::engine::general_purpose::STANDARD.encode(piece),
        });
        out.push_back(Event::default().event("chunk").data(data.to_string()));
        offset += piece.len() as u64;
    }
}

/// Follows one log in the cluster's shared table (a run another node runs or ran), from
/// an offset.
#[derive(Clone)]
struct SharedFollower {
    engine: crate::engine::Engine,
    id: String,
    counter: u64,
    offset: u64,
}

impl SharedFollower {
    /// What was copied since the last poll. An unreachable database is no end: the
    /// stream waits for it.
    async fn poll(&mut self) -> io::Result<Polled> {
        let read = self
            .engine
            .cluster_log(Kind::Job, &self.id, self.counter, self.offset, MAX_CHUNK)
            .await;
        let log = match read {
            Ok(Some(log)) => log,
            Ok(None) => return Ok(Polled::Gone),
            Err(crate::engine::EngineError::Unavailable) => return Ok(Polled::Growing(Vec::new())),
            Err(err) => return Err(io::Error::other(err.to_string())),
        };
        self.offset += log.bytes.len() as u64;
        Ok(match log.state {
            // A full chunk: there may be more, whatever the run's state.
            _ if log.bytes.len() >= MAX_CHUNK => Polled::Growing(log.bytes),
            SharedRunState::Running => Polled::Growing(log.bytes),
            state => Polled::Ended {
                status: shared_log_status(state),
                rest: log.bytes,
            },
        })
    }
}

/// Where a stream reads its log: this node's file, or the cluster's copy.
enum Follower {
    File(LogFollower),
    Shared(SharedFollower),
}

impl Follower {
    async fn poll(self) -> (Follower, io::Result<Polled>) {
        match self {
            Follower::File(mut follower) => {
                let polled = tokio::task::spawn_blocking(move || {
                    let result = follower.poll();
                    (follower, result)
                })
                .await;
                match polled {
                    Ok((follower, result)) => (Follower::File(follower), result),
                    Err(err) => {
                        tracing::error!(error = %err, "log stream: poll task failed");
                        let gone = LogFollower::new(PathBuf::new(), "", 0);
                        (Follower::File(gone), Ok(Polled::Gone))
                    }
                }
            }
            Follower::Shared(mut follower) => {
                let result = follower.poll().await;
                (Follower::Shared(follower), result)
            }
        }
    }

    fn offset(&self) -> u64 {
        match self {
            Follower::File(follower) => follower.offset(),
            Follower::Shared(follower) => follower.offset,
        }
    }

    fn id_counter(&self) -> (&str, u64) {
        match self {
            Follower::File(follower) => (&follower.id, follower.counter),
            Follower::Shared(follower) => (&follower.id, follower.counter),
        }
    }
}

/// State carried from one step of the event stream to the next.
struct StreamState {
    pending: VecDeque<Event>,
    follower: Option<Follower>,
    ticker: tokio::time::Interval,
    deadline: Instant,
    /// The last poll read a full chunk: the next one comes at once, not at the tick.
    behind: bool,
}

/// One step: the next pending event, else polls until there is one or the log ended.
async fn next_event(mut state: StreamState) -> Option<(Result<Event, Infallible>, StreamState)> {
    loop {
        if let Some(event) = state.pending.pop_front() {
            return Some((Ok(event), state));
        }
        let follower = state.follower.take()?;
        if Instant::now() >= state.deadline {
            state
                .pending
                .push_back(Event::default().event("timeout").data("{}"));
            continue;
        }
        if !state.behind {
            state.ticker.tick().await;
        }
        let (follower, result) = follower.poll().await;
        state.behind = matches!(&result, Ok(Polled::Growing(bytes)) if bytes.len() >= MAX_CHUNK);
        match result {
            Ok(Polled::Growing(bytes)) => {
                chunk_events(&bytes, follower.offset(), &mut state.pending);
                state.follower = Some(follower);
            }
            Ok(Polled::Ended { status, rest }) => {
                chunk_events(&rest, follower.offset(), &mut state.pending);
                let (id, counter) = follower.id_counter();
                let name = format!("{id}.{counter}.{status}");
                let data = json!({ "status": status, "name": name });
                state
                    .pending
                    .push_back(Event::default().event("end").data(data.to_string()));
            }
            Ok(Polled::Gone) => {
                state
                    .pending
                    .push_back(Event::default().event("gone").data("{}"));
            }
            Err(err) => {
                let (id, counter) = follower.id_counter();
                tracing::error!(job = %id, counter, error = %err, "log stream: cannot read the log");
                state
                    .pending
                    .push_back(Event::default().event("gone").data("{}"));
            }
        }
    }
}

/// The handler: 400 for a bad `id` or `counter`, 404 for an unknown job or log, else
/// the event stream.
pub(super) async fn stream(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = params(query.unwrap_or_default().as_bytes());
    let id = job_id(param(&pairs, "id"))?.to_string();
    let counter: u64 = param(&pairs, "counter")
        .ok_or_else(|| ApiError::bad_request("missing log counter"))?
        .parse()
        .map_err(|_| ApiError::bad_request("invalid log counter"))?;
    // Unknown job: 404 (the error converts from the engine's NotFound).
    state.engine.log_counters(Kind::Job, &id)?;
    let dir = state.engine.main().dir_job_logs().join(&id);
    let follower = LogFollower::new(dir, &id, counter);
    let exists = {
        let probe = follower.clone();
        tokio::task::spawn_blocking(move || probe.exists())
            .await
            .unwrap_or(false)
    };
    let (follower, every) = if exists {
        (Follower::File(follower), POLL_EVERY)
    } else {
        // Not this node's run: in cluster mode, the copy in the shared table.
        let shared = state
            .engine
            .cluster_log(Kind::Job, &id, counter, 0, 0)
            .await?;
        if shared.is_none() {
            return Err(ApiError::log_not_found());
        }
        let follower = SharedFollower {
            engine: state.engine.clone(),
            id: id.clone(),
            counter,
            offset: 0,
        };
        (Follower::Shared(follower), POLL_SHARED_EVERY)
    };
    let mut pending = VecDeque::new();
    let meta = json!({ "job_id": id, "counter": counter });
    pending.push_back(Event::default().event("meta").data(meta.to_string()));
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let initial = StreamState {
        pending,
        follower: Some(follower),
        ticker,
        deadline: Instant::now() + MAX_STREAM,
        behind: false,
    };
    let events = stream::unfold(initial, next_event);
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follower(dir: &tempfile::TempDir) -> LogFollower {
        LogFollower::new(dir.path().to_path_buf(), "job", 3)
    }

    fn append(path: &std::path::Path, text: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the log");
        file.write_all(text.as_bytes()).expect("append to the log");
    }

    #[test]
    fn follows_a_growing_log_across_its_rename() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let started = dir.path().join("job.3.started");
        let mut f = follower(&dir);
        assert!(!f.exists());
        assert_eq!(f.poll().expect("poll"), Polled::Gone);

        append(&started, "line 1\n");
        assert!(f.exists());
        assert_eq!(
            f.poll().expect("poll"),
            Polled::Growing(b"line 1\n".to_vec())
        );
        assert_eq!(f.poll().expect("poll"), Polled::Growing(Vec::new()));
        append(&started, "line 2\npart");
        assert_eq!(
            f.poll().expect("poll"),
            Polled::Growing(b"line 2\npart".to_vec())
        );
        assert_eq!(f.offset(), 18);

        append(&started, "ial\n=== end\n");
        std::fs::rename(&started, dir.path().join("job.3.success")).expect("rename");
        assert_eq!(
            f.poll().expect("poll"),
            Polled::Ended {
                status: "success",
                rest: b"ial\n=== end\n".to_vec()
            }
        );
    }

    #[test]
    fn a_finished_log_is_read_whole_then_ends() {
        let dir = tempfile::tempdir().expect("temporary directory");
        append(&dir.path().join("job.3.fail"), "a\nb\n");
        let mut f = follower(&dir);
        assert_eq!(
            f.poll().expect("poll"),
            Polled::Ended {
                status: "fail",
                rest: b"a\nb\n".to_vec()
            }
        );
        // Other counters and jobs are not mixed in.
        append(&dir.path().join("job.4.started"), "other\n");
        append(&dir.path().join("jobx.3.started"), "other\n");
        assert!(matches!(f.poll().expect("poll"), Polled::Ended { .. }));
    }

    #[test]
    fn a_log_deleted_while_followed_is_gone() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let started = dir.path().join("job.3.started");
        append(&started, "x\n");
        let mut f = follower(&dir);
        assert!(matches!(f.poll().expect("poll"), Polled::Growing(_)));
        std::fs::remove_file(&started).expect("remove");
        assert_eq!(f.poll().expect("poll"), Polled::Gone);
    }

    #[test]
    fn large_growth_is_read_in_bounded_steps() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let started = dir.path().join("job.3.started");
        let big = "x".repeat(MAX_CHUNK + 10);
        append(&started, &big);
        let mut f = follower(&dir);
        match f.poll().expect("poll") {
            Polled::Growing(bytes) => assert_eq!(bytes.len(), MAX_CHUNK),
            other => panic!("expected growth, got {other:?}"),
        }
        match f.poll().expect("poll") {
            Polled::Growing(bytes) => assert_eq!(bytes.len(), 10),
            other => panic!("expected growth, got {other:?}"),
        }
    }

    #[test]
    fn a_large_finished_log_is_read_in_bounded_steps_then_ends() {
        // The review's memory finding: a finished log was read whole by one poll.
        let dir = tempfile::tempdir().expect("temporary directory");
        append(
            &dir.path().join("job.3.fail"),
            &"y".repeat(3 * MAX_CHUNK + 7),
        );
        let mut f = follower(&dir);
        for _ in 0..3 {
            match f.poll().expect("poll") {
                Polled::Growing(bytes) => assert_eq!(bytes.len(), MAX_CHUNK),
                other => panic!("expected a chunk, got {other:?}"),
            }
        }
        assert_eq!(
            f.poll().expect("poll"),
            Polled::Ended {
                status: "fail",
                rest: b"yyyyyyy".to_vec()
            }
        );
    }

    #[test]
    fn chunks_carry_contiguous_offsets() {
        let bytes = vec![b'a'; MAX_CHUNK * 2 + 5];
        let mut events = VecDeque::new();
        chunk_events(&bytes, 100 + bytes.len() as u64, &mut events);
        assert_eq!(events.len(), 3);
        let mut empty = VecDeque::new();
        chunk_events(&[], 7, &mut empty);
        assert!(empty.is_empty());
    }

    #[tokio::test]
    async fn the_event_stream_ends_after_the_final_status() {
        use futures_util::StreamExt as _;
        let dir = tempfile::tempdir().expect("temporary directory");
        append(&dir.path().join("job.3.success"), "done\n");
        let mut ticker = tokio::time::interval(Duration::from_millis(1));
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let state = StreamState {
            pending: VecDeque::new(),
            follower: Some(Follower::File(follower(&dir))),
            ticker,
            deadline: Instant::now() + Duration::from_secs(5),
            behind: false,
        };
        let events: Vec<_> = stream::unfold(state, next_event).collect().await;
        // One chunk, then the end event.
        assert_eq!(events.len(), 2);
    }
}
