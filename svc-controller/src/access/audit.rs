//! The audit log: who did what to which job, from where, and how it ended, one JSON line
//! per state-changing action in `$dir_base/var/log/svc/audit.log`, rotated by size.
//!
//! Recording never blocks the caller: [`AuditLog::record`] stamps the entry (time and the
//! order it was recorded in are the caller's) and hands it to one writer thread over a
//! bounded channel with `try_send`; a full channel drops the entry and says so in the
//! service log. The writer appends each line with one `write` to a file opened for
//! appending (no fsync per line: an action is not worth a disk flush, and the line is in
//! the page cache for readers at once), and closes the file whenever its queue is empty,
//! so that no descriptor pins the log directory; it syncs the file at shutdown and before
//! a rotation. Past `audit_max_size` the file is renamed to `audit.log.1`, the older ones
//! shifted up to `audit.log.5` (the oldest dropped), as logrotate's `rotate 5` would.
//!
//! Every line carries `seq`, a number that grows by one per entry across rotations (taken
//! up again at start from the newest line), so that a page of the log is "entries before
//! `seq` N" whatever was rotated meanwhile ([`read_page`]). What a line may hold is fixed
//! by [`Entry`]: names, job IDs, addresses, statuses and reasons; never a secret, a
//! signature, a password, a cookie or a token (the reasons are the service's own error
//! messages, which never echo them).
//!
//! In cluster mode each node keeps its own file as above, and a copier also appends every
//! record, with the node's name, to the cluster's shared table, which every node's audit
//! view reads ([`AuditLog::copy_to_cluster`]).

use crate::util::lock::MutexExt as _;
use std::fs::{self, File};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::error::TrySendError as TrySendCopy;

use super::audit_repeats::Repeats;

/// Name of the current audit file in the log directory.
pub const AUDIT_FILE: &str = "audit.log";
/// Rotated files kept (`audit.log.1` .. `audit.log.5`).
pub const KEEP_ROTATED: usize = 5;
/// Entries waiting for the writer at most; past it entries are dropped (and logged).
const QUEUE: usize = 4096;
/// Bytes read from the end of a file to find its last `seq` at start.
const TAIL_BYTES: u64 = 64 * 1024;
/// Entries a page holds at most.
pub const MAX_PAGE: usize = 1000;
/// How long the shutdown waits for the writer to drain and sync.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// Who did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Actor {
    /// A logged-in account (by session), or the account a login was for.
    Account {
        /// The account's name.
        name: String,
    },
    /// A request signed with the main secret (the shared secret of API clients).
    Signed,
    /// An accepted webhook delivery, with the delivery ID its host gave, when it gave
    /// one.
    Webhook {
        /// The host's delivery ID.
        delivery: Option<String>,
    },
    /// SIGHUP.
    Signal,
    /// A request with neither a session nor a signature, or a failed login for a name
    /// that is no account (the name is not recorded: it may be a mistyped password).
    Anonymous,
}

/// What was done (or tried).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Pause a Job or JobHttp.
    Pause,
    /// Resume one.
    Resume,
    /// Cancel a Job's run.
    Cancel,
    /// Run a Job or JobHttp now (by hand).
    RunNow,
    /// A webhook delivery that triggered a Job.
    Trigger,
    /// Reload the configuration.
    Reload,
    /// A successful login.
    Login,
    /// A refused login.
    LoginFailed,
    /// A logout.
    Logout,
}

/// Which job an action was about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct JobRef {
    /// `job_exec` or `job_http`, as in the API's paths.
    pub kind: String,
    /// The job's ID.
    pub id: String,
}

/// How an action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Done.
    Ok,
    /// Refused (an answer 4xx): bad signature, CSRF, role, paused, busy...
    Refused,
    /// Failed (an answer 5xx, or an invalid configuration for a reload by signal).
    Error,
}

/// One action as the callers describe it; [`Record`] adds the time and `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct Entry {
    /// Who.
    pub actor: Actor,
    /// What.
    pub action: Action,
    /// Which job, when the action has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobRef>,
    /// The client's address (see `trusted_proxies`); `None` for a signal.
    pub address: Option<String>,
    /// How it ended.
    pub result: Outcome,
    /// The HTTP status answered, for actions made over HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it was refused or failed (the message of the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Entry {
    /// An entry for an action answered over HTTP with `status` (and `message`, kept as
    /// the reason when it is not a success).
    pub fn answered(
        actor: Actor,
        action: Action,
        job: Option<JobRef>,
        address: Option<String>,
        status: u16,
        message: &str,
    ) -> Entry {
        let result = match status {
            200..=399 => Outcome::Ok,
            400..=499 => Outcome::Refused,
            _ => Outcome::Error,
        };
        Entry {
            actor,
            action,
            job,
            address,
            result,
            status: Some(status),
            reason: (result != Outcome::Ok && !message.is_empty()).then(|| message.to_string()),
        }
    }
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Grows by one per entry, across rotations and restarts.
    pub seq: u64,
    /// When it was recorded, RFC 3339 in UTC.
    pub time: String,
    /// The rest.
    #[serde(flatten)]
    pub entry: Entry,
    /// In cluster mode's shared audit log: the node that recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A count of identical refusals answered since the line that first had this entry
    /// and not written one by one, the last at `time` (see `audit_repeats.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeated: Option<u64>,
}

/// What the writer hands to the copier of cluster mode ([`AuditLog::copy_to_cluster`]).
enum ClusterCopy {
    Record(Record),
    /// Answered once everything sent before it is in the shared table (or failed to get
    /// there).
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Records waiting for the copier to the cluster at most; past it the shared table misses
/// them (the node's own file still has them), and the service log says so.
const CLUSTER_QUEUE: usize = 10_000;
/// Most records the copier appends in one transaction.
const CLUSTER_BATCH: usize = 256;
/// The longest wait between two attempts of the copier while the database is away.
const CLUSTER_RETRY_MAX: Duration = Duration::from_secs(30);

enum Message {
    Entry(Entry, chrono::DateTime<chrono::Utc>),
    /// From now on, hand each record to this copier too.
    CopyTo(tokio::sync::mpsc::Sender<ClusterCopy>),
    /// Answered once everything sent before it is written.
    Flush(tokio::sync::oneshot::Sender<()>),
    /// Sync and end.
    Stop(tokio::sync::oneshot::Sender<()>),
}

/// The handle callers record with; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    sender: SyncSender<Message>,
    dir: PathBuf,
    writer: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Starts the writer thread for `dir/audit.log`, rotated past `max_size` bytes.
    /// Blocking (it reads the newest `seq` back).
    pub fn start(dir: &Path, max_size: u64) -> io::Result<AuditLog> {
        fs::create_dir_all(dir)?;
        let writer = Writer::open(dir, max_size)?;
        let (sender, receiver) = std::sync::mpsc::sync_channel(QUEUE);
        let thread = std::thread::Builder::new()
            .name("svc-audit".into())
            .spawn(move || writer.run(receiver))?;
        Ok(AuditLog {
            sender,
            dir: dir.to_path_buf(),
            writer: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// The directory of the audit files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records `entry`, stamped now; never waits.
    pub fn record(&self, entry: Entry) {
        match self
            .sender
            .try_send(Message::Entry(entry, chrono::Utc::now()))
        {
            Ok(()) => {}
            Err(TrySendError::Full(Message::Entry(entry, _))) => {
                tracing::warn!(action = ?entry.action, "audit log: the writer is behind, entry dropped");
            }
            Err(_) => tracing::debug!("audit log: the writer has stopped, entry dropped"),
        }
    }

    /// In cluster mode: every entry written from now on is also appended to the
    /// cluster's shared audit log with this node's name, by a task on the current
    /// runtime, so that any node's audit view shows every node's actions. The node's own
    /// file stays the one that never waits for the database: an outage longer than the
    /// copier's queue leaves entries there only (said in the service log). The task ends
    /// once the writer has stopped and what it handed over is copied; answers its handle.
    pub fn copy_to_cluster(
        &self,
        store: crate::cluster::ClusterStore,
        node: String,
    ) -> tokio::task::JoinHandle<()> {
        let (sender, receiver) = tokio::sync::mpsc::channel(CLUSTER_QUEUE);
        if self.sender.try_send(Message::CopyTo(sender)).is_err() {
            tracing::error!("audit log: the writer is not taking messages; entries stay local");
        }
        tokio::spawn(copy_records(receiver, store, node))
    }

    /// Waits until every entry recorded before the call is written (readers call it so
    /// that a page shows their own last action); in cluster mode, also copied.
    pub async fn flush(&self) {
        let (done, wait) = tokio::sync::oneshot::channel();
        let sender = self.sender.clone();
        // A full queue makes `send` wait for room: off the async workers.
        let sent = tokio::task::spawn_blocking(move || sender.send(Message::Flush(done)).is_ok())
            .await
            .unwrap_or(false);
        if sent {
            let _ = wait.await;
        }
    }

    /// Writes what is queued, syncs the file and ends the writer (at shutdown). Entries
    /// recorded later are dropped.
    pub async fn shutdown(&self) {
        let (done, wait) = tokio::sync::oneshot::channel();
        let sender = self.sender.clone();
        let sent = tokio::task::spawn_blocking(move || sender.send(Message::Stop(done)).is_ok())
            .await
            .unwrap_or(false);
        if sent && tokio::time::timeout(SHUTDOWN_WAIT, wait).await.is_err() {
            tracing::warn!("audit log: the writer did not finish in time");
        }
        let thread = self.writer.locked().take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// The path of the current file (`index` 0) or of rotated file `index`.
fn file_path(dir: &Path, index: usize) -> PathBuf {
    if index == 0 {
        dir.join(AUDIT_FILE)
    } else {
        dir.join(format!("{AUDIT_FILE}.{index}"))
    }
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    max_size: u64,
    file: Option<File>,
    size: u64,
    next_seq: u64,
    /// A write error is logged once, until a write succeeds again.
    failing: bool,
    /// Cluster mode's copier of every record.
    copy: Option<tokio::sync::mpsc::Sender<ClusterCopy>>,
    /// A full copier's queue is logged once, until a record gets in again.
    copy_full: bool,
    /// Identical refusals counted, not written yet.
    repeats: Repeats,
}

impl Writer {
    fn open(dir: &Path, max_size: u64) -> io::Result<Writer> {
        let path = file_path(dir, 0);
        let mut file = crate::util::fsutil::open_append_private(&path)?;
        let mut size = file.metadata()?.len();
        if size > 0 && !ends_with_newline(&path)? {
            // A crash cut the last line: end it, so the next entry is a line of its own.
            file.write_all(b"\n")?;
            size += 1;
        }
        // The newest entry is at the end of the current file, or of the last rotated one
        // when a rotation left the current file empty.
        let last = (0..=KEEP_ROTATED)
            .find_map(|index| last_seq(&file_path(dir, index)))
            .unwrap_or(0);
        drop(file);
        Ok(Writer {
            dir: dir.to_path_buf(),
            max_size,
            file: None,
            size,
            next_seq: last + 1,
            failing: false,
            copy: None,
            copy_full: false,
            repeats: Repeats::default(),
        })
    }

    fn run(mut self, receiver: Receiver<Message>) {
        while let Some(first) = self.next_message(&receiver) {
            let mut next = first;
            while let Some(message) = next.take() {
                if !self.handle(message) {
                    return;
                }
                next = receiver.try_recv().ok();
            }
            self.write_counted(false);
            // The file is open only while entries are written: between them no
            // descriptor holds the log directory, so it can be remounted read-only or
            // unmounted, and a file moved away by hand is made anew at the next entry.
            self.file = None;
        }
        // Every handle is gone.
        self.write_counted(true);
        self.sync();
    }

    /// The next message; `Some(None)` when a window of counted refusals ended first (its
    /// line is then due), `None` once every handle is gone.
    fn next_message(&self, receiver: &Receiver<Message>) -> Option<Option<Message>> {
        let Some(due) = self.repeats.next_due() else {
            return receiver.recv().ok().map(Some);
        };
        let wait = due.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(wait) {
            Ok(message) => Some(Some(message)),
            Err(RecvTimeoutError::Timeout) => Some(None),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Carries out one message; false once the writer is to end.
    fn handle(&mut self, message: Message) -> bool {
        match message {
            Message::Entry(entry, time) => self.record(entry, time),
            Message::CopyTo(copy) => self.copy = Some(copy),
            Message::Flush(done) => {
                // Readers see the counts of the refusals before their call too.
                self.write_counted(true);
                match &self.copy {
                    // The copier answers once what came before is copied.
                    Some(copy) => {
                        if let Err(
                            TrySendCopy::Full(ClusterCopy::Flush(done))
                            | TrySendCopy::Closed(ClusterCopy::Flush(done)),
                        ) = copy.try_send(ClusterCopy::Flush(done))
                        {
                            let _ = done.send(());
                        }
                    }
                    None => {
                        let _ = done.send(());
                    }
                }
            }
            Message::Stop(done) => {
                self.write_counted(true);
                self.sync();
                let _ = done.send(());
                return false;
            }
        }
        true
    }

    /// Writes `entry` unless it repeats a refusal written less than a window ago, which
    /// is counted instead ([`Repeats`]); the counts of windows that ended go first.
    fn record(&mut self, entry: Entry, time: chrono::DateTime<chrono::Utc>) {
        let (due, write) = self.repeats.offer(&entry, time, Instant::now());
        self.write_summaries(due);
        if write {
            self.write(entry, time, None);
        }
    }

    /// Writes a line for each window of counted refusals that ended (`all`: each open
    /// one).
    fn write_counted(&mut self, all: bool) {
        let summaries = if all {
            self.repeats.all()
        } else {
            self.repeats.due(Instant::now())
        };
        self.write_summaries(summaries);
    }

    fn write_summaries(&mut self, summaries: Vec<super::audit_repeats::Summary>) {
        for (entry, count, last) in summaries {
            self.write(entry, last, Some(count));
        }
    }

    /// Syncs the current file, opening it when it is closed (a sync through any
    /// descriptor flushes the file's data).
    fn sync(&mut self) {
        let path = file_path(&self.dir, 0);
        let result = match &self.file {
            Some(file) => file.sync_all(),
            None => match File::open(&path) {
                Ok(file) => file.sync_all(),
                Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(err) => Err(err),
            },
        };
        if let Err(err) = result {
            tracing::error!(error = %err, "audit log: cannot sync");
        }
    }

    fn write(&mut self, entry: Entry, time: chrono::DateTime<chrono::Utc>, repeated: Option<u64>) {
        let record = Record {
            seq: self.next_seq,
            time: time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            entry,
            node: None,
            repeated,
        };
        self.hand_to_copier(&record);
        let mut line = match serde_json::to_vec(&record) {
            Ok(line) => line,
            Err(err) => {
                tracing::error!(error = %err, "audit log: cannot serialise an entry");
                return;
            }
        };
        line.push(b'\n');
        self.next_seq += 1;
        let len = line.len() as u64;
        if self.size > 0 && self.size + len > self.max_size {
            if let Err(err) = self.rotate() {
                tracing::error!(error = %err, "audit log: rotation failed; appending to the current file");
            }
        }
        // On a disk a job filled, once more after the reserve is given back, on a line of
        // its own (a part of the first try may have been written; readers skip it).
        let mut retry = false;
        let result = crate::util::space_reserve::retry_when_full(|| {
            let again = std::mem::replace(&mut retry, true);
            let bytes: std::borrow::Cow<'_, [u8]> = if again {
                [b"\n".as_slice(), &line].concat().into()
            } else {
                line.as_slice().into()
            };
            self.write_line(&bytes).map(|()| bytes.len() as u64)
        });
        match result {
            Ok(written) => {
                self.size += written;
                self.failing = false;
            }
            Err(err) => {
                if !self.failing {
                    tracing::error!(error = %err, "audit log: cannot write");
                }
                self.failing = true;
            }
        }
    }

    /// Appends `bytes` to the current file, opening it first if need be.
    fn write_line(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.file {
            Some(file) => file.write_all(bytes),
            None => crate::util::fsutil::open_append_private(&file_path(&self.dir, 0)).and_then(
                |mut file| {
                    let written = file.write_all(bytes);
                    self.file = Some(file);
                    written
                },
            ),
        }
    }

    /// In cluster mode, hands `record` to the copier, never waiting for it.
    fn hand_to_copier(&mut self, record: &Record) {
        let Some(copy) = &self.copy else {
            return;
        };
        match copy.try_send(ClusterCopy::Record(record.clone())) {
            Ok(()) => self.copy_full = false,
            Err(TrySendCopy::Full(_)) => {
                if !self.copy_full {
                    tracing::warn!(
                        "audit log: the copy to the cluster is behind; entries stay in this \
                         node's file only until it catches up"
                    );
                }
                self.copy_full = true;
            }
            Err(TrySendCopy::Closed(_)) => self.copy = None,
        }
    }

    /// `audit.log.4` → `.5`, ..., `audit.log` → `.1`, then a new `audit.log`.
    fn rotate(&mut self) -> io::Result<()> {
        self.sync();
        self.file = None;
        for index in (1..KEEP_ROTATED).rev() {
            match fs::rename(file_path(&self.dir, index), file_path(&self.dir, index + 1)) {
                Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        fs::rename(file_path(&self.dir, 0), file_path(&self.dir, 1))?;
        self.file = Some(crate::util::fsutil::open_append_private(&file_path(
            &self.dir, 0,
        ))?);
        self.size = 0;
        Ok(())
    }
}

/// True when the last byte of `path` is a newline.
fn ends_with_newline(path: &Path) -> io::Result<bool> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// The `seq` of the last readable line of `path`.
fn last_seq(path: &Path) -> Option<u64> {
    let mut file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    tail.split(|b| *b == b'\n')
        .rev()
        .find_map(|line| serde_json::from_slice::<Record>(line).ok())
        .map(|record| record.seq)
}

/// The copier of cluster mode: appends the writer's records to the shared table in
/// batches, with the node's name, retrying while the database is away (a reader's flush
/// is answered meanwhile: it does not wait for an outage).
async fn copy_records(
    mut receiver: tokio::sync::mpsc::Receiver<ClusterCopy>,
    store: crate::cluster::ClusterStore,
    node: String,
) {
    let mut batch: Vec<(chrono::DateTime<chrono::Utc>, serde_json::Value)> = Vec::new();
    let mut flushes = Vec::new();
    while let Some(first) = receiver.recv().await {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                ClusterCopy::Record(mut record) => {
                    let at = chrono::DateTime::parse_from_rfc3339(&record.time)
                        .map_or_else(|_| chrono::Utc::now(), |at| at.to_utc());
                    record.node = Some(node.clone());
                    match serde_json::to_value(&record) {
                        Ok(value) => batch.push((at, value)),
                        Err(err) => {
                            tracing::error!(error = %err, "audit log: cannot serialise an entry for the cluster")
                        }
                    }
                }
                ClusterCopy::Flush(done) => flushes.push(done),
            }
            if batch.len() < CLUSTER_BATCH {
                next = receiver.try_recv().ok();
            }
        }
        let mut wait = Duration::from_secs(1);
        loop {
            match store.append_audit(&batch).await {
                Ok(()) => break,
                Err(err) if err.is_unavailable() => {
                    for done in flushes.drain(..) {
                        let _ = done.send(());
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(CLUSTER_RETRY_MAX);
                }
                Err(err) => {
                    tracing::error!(error = %err, entries = batch.len(), "audit log: entries not copied to the cluster");
                    break;
                }
            }
        }
        batch.clear();
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

/// A page of the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The entries.
    pub records: Vec<Record>,
    /// The `before` of the next page, when there may be one.
    pub next_before: Option<u64>,
}

/// Up to `limit` entries (at most [`MAX_PAGE`]) whose `seq` is below `before` (all when
/// `None`), newest first, from the current file then the rotated ones. Lines that are not
/// entries (a line cut by a crash) are skipped. Blocking.
pub fn read_page(dir: &Path, before: Option<u64>, limit: usize) -> io::Result<Page> {
    let limit = limit.clamp(1, MAX_PAGE);
    let mut records: Vec<Record> = Vec::new();
    // Strictly decreasing: a rotation between two files read here would otherwise show
    // entries twice.
    let mut below = before.unwrap_or(u64::MAX);
    'files: for index in 0..=KEEP_ROTATED {
        let text = match fs::read(file_path(dir, index)) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        for line in text.split(|b| *b == b'\n').rev() {
            let Ok(record) = serde_json::from_slice::<Record>(line) else {
                continue;
            };
            if record.seq >= below {
                continue;
            }
            below = record.seq;
            records.push(record);
            if records.len() == limit {
                break 'files;
            }
        }
    }
    let next_before = (records.len() == limit && below > 1).then_some(below);
    Ok(Page {
        records,
        next_before,
    })
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
