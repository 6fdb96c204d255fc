//! One replay store: a map `(job, value) -> time first seen` in memory, mirrored by an
//! append-only file (the format is in the parent module's documentation).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Seen, StoreError};

/// Time to live, cap and compaction threshold of one store.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    ttl_secs: i64,
    max_entries: usize,
    compact_min_lines: usize,
}

impl Limits {
    pub(super) fn new(ttl_secs: i64, max_entries: usize, compact_min_lines: usize) -> Limits {
        Limits {
            ttl_secs,
            max_entries: max_entries.max(1),
            compact_min_lines,
        }
    }
}

/// What a store remembers: the job and the delivery ID or nonce, as raw bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    job: String,
    value: Vec<u8>,
}

impl Key {
    fn new(job: &str, value: &[u8]) -> Key {
        Key {
            job: job.to_string(),
            value: value.to_vec(),
        }
    }
}

/// One store of `(job, value)` pairs; see the module documentation.
#[derive(Debug)]
pub struct ReplayStore {
    /// `None` for a store in memory only.
    path: Option<PathBuf>,
    limits: Limits,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Key -> (first seen, sequence number).
    entries: HashMap<Key, (i64, u64)>,
    /// (first seen, sequence number) -> key: oldest first, for expiry and the cap.
    order: BTreeMap<(i64, u64), Key>,
    next_seq: u64,
    /// Append handle; reopened lazily after a compaction or a failed reopen.
    file: Option<File>,
    /// Lines in the file (live, expired, forgotten and tombstones).
    file_lines: usize,
    /// A warning about the cap was logged.
    warned_full: bool,
}

impl Inner {
    fn insert(&mut self, key: Key, seen: i64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(old) = self.entries.insert(key.clone(), (seen, seq)) {
            self.order.remove(&old);
        }
        self.order.insert((seen, seq), key);
    }

    fn remove(&mut self, key: &Key) -> bool {
        match self.entries.remove(key) {
            Some(slot) => {
                self.order.remove(&slot);
                true
            }
            None => false,
        }
    }

    /// Drops entries first seen at or before `now - ttl`.
    fn expire(&mut self, now: i64, ttl: i64) {
        while let Some(entry) = self.order.first_entry() {
            if entry.key().0 > now.saturating_sub(ttl) {
                break;
            }
            let key = entry.remove();
            self.entries.remove(&key);
        }
    }

    /// Drops the oldest entries until at most `max` remain; returns how many went.
    fn cap(&mut self, max: usize) -> usize {
        let mut dropped = 0;
        while self.entries.len() > max {
            let Some((_, key)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&key);
            dropped += 1;
        }
        dropped
    }

    /// Whether `key` is remembered at `now`.
    fn is_live(&self, key: &Key, now: i64, ttl: i64) -> bool {
        self.entries
            .get(key)
            .is_some_and(|(seen, _)| *seen > now.saturating_sub(ttl))
    }

    /// The live entries as file lines, oldest first.
    fn snapshot(&self) -> Vec<u8> {
        let mut text = Vec::with_capacity(self.order.len() * 64);
        for ((seen, _), key) in &self.order {
            text.extend_from_slice(line('+', *seen, key).as_bytes());
        }
        text
    }
}

fn line(op: char, seen: i64, key: &Key) -> String {
    format!(
        "{op} {seen} {} {}\n",
        hex::encode(key.job.as_bytes()),
        hex::encode(&key.value)
    )
}

/// Parses a complete line (without its newline).
fn parse_line(line: &[u8]) -> Option<(bool, i64, Key)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut parts = text.split(' ');
    let add = match parts.next()? {
        "+" => true,
        "-" => false,
        _ => return None,
    };
    let seen = parts.next()?.parse().ok()?;
    let job = String::from_utf8(hex::decode(parts.next()?).ok()?).ok()?;
    let value = hex::decode(parts.next()?).ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((add, seen, Key { job, value }))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl ReplayStore {
    pub(super) fn in_memory(limits: Limits) -> ReplayStore {
        ReplayStore {
            path: None,
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Loads `path` (missing = empty) as of `now`, then rewrites it with the live
    /// entries only, which also drops a torn last line.
    pub(super) fn open_at(path: &Path, limits: Limits, now: i64) -> io::Result<ReplayStore> {
        let mut inner = Inner::default();
        let contents = match std::fs::read(path) {
            Ok(contents) => contents,
            Err(err) if err.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(err) => return Err(err),
        };
        let mut lines: Vec<&[u8]> = contents.split(|b| *b == b'\n').collect();
        // The part after the last newline: empty, or a line torn by a crash.
        let torn = lines.pop().is_some_and(|rest| !rest.is_empty());
        let mut bad = 0usize;
        for raw in lines {
            match parse_line(raw) {
                Some((true, seen, key)) => inner.insert(key, seen),
                Some((false, _, key)) => {
                    inner.remove(&key);
                }
                None => bad += 1,
            }
        }
        if torn {
            tracing::warn!(file = %path.display(), "replay store: ignored a torn last line");
        }
        if bad > 0 {
            tracing::warn!(file = %path.display(), lines = bad, "replay store: ignored lines that do not parse");
        }
        inner.expire(now, limits.ttl_secs);
        inner.cap(limits.max_entries);
        let store = ReplayStore {
            path: Some(path.to_path_buf()),
            limits,
            inner: Mutex::new(inner),
        };
        store.compact(&mut store.lock())?;
        Ok(store)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The data stays consistent even if a holder panicked: every change is a
        // complete map update.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Atomically: when `(job, value)` is remembered, answers [`Seen::Replay`] and
    /// changes nothing; otherwise records it (durably, before answering) and answers
    /// [`Seen::New`]. On a write error nothing is recorded.
    pub fn check_and_record(&self, job: &str, value: &[u8]) -> Result<Seen, StoreError> {
        self.check_and_record_at(job, value, unix_now())
    }

    /// Forgets `(job, value)`, so that a retry of a request whose trigger was refused
    /// can run. A write error is logged: the entry is forgotten in memory, and would only
    /// come back after a restart.
    pub fn forget(&self, job: &str, value: &[u8]) {
        self.forget_at(job, value, unix_now());
    }

    /// Whether `(job, value)` is remembered, without recording anything. Waits while a
    /// write (with its fsync) holds the store: blocking.
    pub fn is_recorded(&self, job: &str, value: &[u8]) -> bool {
        self.lock()
            .is_live(&Key::new(job, value), unix_now(), self.limits.ttl_secs)
    }

    /// Like [`ReplayStore::is_recorded`], but answers at once: `None` when a write holds
    /// the store, so that an async caller never waits for an fsync on its thread.
    pub fn try_is_recorded(&self, job: &str, value: &[u8]) -> Option<bool> {
        let inner = match self.inner.try_lock() {
            Ok(inner) => inner,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(inner.is_live(&Key::new(job, value), unix_now(), self.limits.ttl_secs))
    }

    /// Number of live entries (expired ones may still be counted until the next change).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_and_record_at(&self, job: &str, value: &[u8], now: i64) -> Result<Seen, StoreError> {
        let key = Key {
            job: job.to_string(),
            value: value.to_vec(),
        };
        let mut inner = self.lock();
        inner.expire(now, self.limits.ttl_secs);
        if inner.is_live(&key, now, self.limits.ttl_secs) {
            return Ok(Seen::Replay);
        }
        self.append(&mut inner, &line('+', now, &key))?;
        inner.insert(key, now);
        let dropped = inner.cap(self.limits.max_entries);
        if dropped > 0 && !inner.warned_full {
            inner.warned_full = true;
            tracing::warn!(
                file = %self.display_path(),
                max = self.limits.max_entries,
                "replay store full: the oldest entries are dropped"
            );
        }
        self.maybe_compact(&mut inner);
        Ok(Seen::New)
    }

    fn forget_at(&self, job: &str, value: &[u8], now: i64) {
        let key = Key {
            job: job.to_string(),
            value: value.to_vec(),
        };
        let mut inner = self.lock();
        if !inner.remove(&key) {
            return;
        }
        if let Err(err) = self.append(&mut inner, &line('-', now, &key)) {
            tracing::error!(error = %err, "replay store: cannot record a forgotten entry");
        }
        self.maybe_compact(&mut inner);
    }

    fn display_path(&self) -> String {
        self.path
            .as_deref()
            .map_or_else(|| "(memory)".to_string(), |p| p.display().to_string())
    }

    fn write_error(&self, source: io::Error) -> StoreError {
        StoreError {
            path: self.display_path(),
            source,
        }
    }

    /// Appends one line and fsyncs it. Memory-only stores do nothing.
    fn append(&self, inner: &mut Inner, text: &str) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if inner.file.is_none() {
            inner.file = Some(
                crate::fsutil::open_append_private(path).map_err(|err| self.write_error(err))?,
            );
        }
        let Some(file) = inner.file.as_mut() else {
            return Ok(());
        };
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync_data());
        if let Err(err) = written {
            // The file may now end in a partial line: rewrite it from memory so that the
            // next append starts on a line of its own. If that fails too, the torn line
            // is dropped at the next open.
            inner.file = None;
            if let Err(compact_err) = self.compact(inner) {
                tracing::error!(error = %compact_err, file = %path.display(), "replay store: rewrite after a failed append failed");
            }
            return Err(self.write_error(err));
        }
        inner.file_lines += 1;
        Ok(())
    }

    fn maybe_compact(&self, inner: &mut Inner) {
        let live = inner.entries.len();
        if inner.file_lines >= self.limits.compact_min_lines
            && inner.file_lines > live.saturating_mul(2)
            && let Err(err) = self.compact(inner)
        {
            // The appended lines stay valid; compaction is retried at the next change.
            tracing::error!(error = %err, file = %self.display_path(), "replay store: compaction failed");
        }
    }

    /// Replaces the file with the live entries (atomic rewrite) and reopens it.
    fn compact(&self, inner: &mut Inner) -> io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        inner.file = None;
        crate::fsutil::atomic_write(path, &inner.snapshot())?;
        inner.file_lines = inner.entries.len();
        inner.file = Some(crate::fsutil::open_append_private(path)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::ReplayStores;
    use super::*;

    const T0: i64 = 1_700_000_000;
    const TTL: i64 = 100;

    fn open(dir: &Path, max: usize, compact_min: usize, now: i64) -> ReplayStore {
        ReplayStore::open_at(
            &dir.join("store.log"),
            Limits::new(TTL, max, compact_min),
            now,
        )
        .expect("open")
    }

    fn record(store: &ReplayStore, job: &str, value: &[u8], now: i64) -> Seen {
        store.check_and_record_at(job, value, now).expect("record")
    }

    fn file_lines(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("store.log"))
            .expect("read")
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn insert_duplicate_and_per_job_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 10, 1000, T0);
        assert_eq!(record(&store, "a", b"d1", T0), Seen::New);
        assert_eq!(record(&store, "a", b"d1", T0 + 1), Seen::Replay);
        // The same value for another job, and another value, are new.
        assert_eq!(record(&store, "b", b"d1", T0 + 1), Seen::New);
        assert_eq!(record(&store, "a", b"d2", T0 + 1), Seen::New);
        // Raw bytes, including non-UTF-8 and spaces, are kept as they are.
        assert_eq!(record(&store, "a", b"\xff x\n", T0 + 1), Seen::New);
        assert_eq!(record(&store, "a", b"\xff x\n", T0 + 2), Seen::Replay);
        assert_eq!(store.len(), 4);
        // A replay changes nothing on disk.
        assert_eq!(file_lines(dir.path()).len(), 4);
    }

    #[test]
    fn a_look_answers_at_once_unless_a_write_holds_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 10, 1000, unix_now());
        assert_eq!(
            store.check_and_record("a", b"sig").expect("record"),
            Seen::New
        );
        assert_eq!(store.try_is_recorded("a", b"sig"), Some(true));
        assert_eq!(store.try_is_recorded("a", b"other"), Some(false));
        assert_eq!(store.try_is_recorded("b", b"sig"), Some(false));
        // A write in progress holds the lock (through its fsync): no waiting.
        let writing = store.lock();
        assert_eq!(store.try_is_recorded("a", b"sig"), None);
        drop(writing);
        assert!(store.is_recorded("a", b"sig"));
    }

    #[test]
    fn entries_expire_after_the_time_to_live() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 10, 1000, T0);
        assert_eq!(record(&store, "a", b"d", T0), Seen::New);
        assert_eq!(record(&store, "a", b"d", T0 + TTL - 1), Seen::Replay);
        assert_eq!(record(&store, "a", b"d", T0 + TTL), Seen::New);
        assert_eq!(record(&store, "a", b"d", T0 + TTL + 1), Seen::Replay);
        // Expired entries are dropped as time goes on.
        assert_eq!(record(&store, "a", b"other", T0 + 3 * TTL), Seen::New);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn forget_lets_a_retry_run_and_survives_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 10, 1000, T0);
        assert_eq!(record(&store, "a", b"d", T0), Seen::New);
        assert_eq!(record(&store, "a", b"e", T0), Seen::New);
        store.forget_at("a", b"d", T0 + 1);
        // Forgetting something unknown is a no-op.
        store.forget_at("a", b"unknown", T0 + 1);
        assert_eq!(file_lines(dir.path()).len(), 3);
        drop(store);
        let store = open(dir.path(), 10, 1000, T0 + 2);
        assert_eq!(store.len(), 1);
        assert_eq!(record(&store, "a", b"e", T0 + 2), Seen::Replay);
        assert_eq!(record(&store, "a", b"d", T0 + 2), Seen::New);
    }

    #[test]
    fn the_cap_drops_the_oldest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 3, 1000, T0);
        for (i, value) in [b"1", b"2", b"3", b"4"].iter().enumerate() {
            let now = T0 + i64::try_from(i).expect("small");
            assert_eq!(record(&store, "a", *value, now), Seen::New);
        }
        assert_eq!(store.len(), 3);
        assert_eq!(record(&store, "a", b"4", T0 + 5), Seen::Replay);
        assert_eq!(record(&store, "a", b"2", T0 + 5), Seen::Replay);
        // "1" was dropped: it is new again (and now "2" is the oldest to go).
        assert_eq!(record(&store, "a", b"1", T0 + 5), Seen::New);
        assert_eq!(record(&store, "a", b"2", T0 + 6), Seen::New);
        drop(store);
        // The cap also holds when a file written with a larger cap is loaded.
        let store = open(dir.path(), 2, 1000, T0 + 7);
        assert_eq!(store.len(), 2);
        assert_eq!(file_lines(dir.path()).len(), 2);
    }

    #[test]
    fn survives_reopen_and_expires_on_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 10, 1000, T0);
        assert_eq!(record(&store, "a", b"old", T0), Seen::New);
        assert_eq!(record(&store, "a", b"new", T0 + 50), Seen::New);
        drop(store);
        let store = open(dir.path(), 10, 1000, T0 + 60);
        assert_eq!(record(&store, "a", b"old", T0 + 60), Seen::Replay);
        assert_eq!(record(&store, "a", b"new", T0 + 60), Seen::Replay);
        drop(store);
        // Reopened after "old" expired: it is gone from memory and from the file.
        let store = open(dir.path(), 10, 1000, T0 + 120);
        assert_eq!(store.len(), 1);
        assert_eq!(file_lines(dir.path()).len(), 1);
        assert_eq!(record(&store, "a", b"new", T0 + 120), Seen::Replay);
        assert_eq!(record(&store, "a", b"old", T0 + 120), Seen::New);
    }

    #[test]
    fn torn_last_line_and_garbage_are_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 10, 1000, T0);
        assert_eq!(record(&store, "a", b"kept", T0), Seen::New);
        drop(store);
        // A crash in the middle of an append of "torn", plus a line that never parsed.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("store.log"))
            .expect("open");
        let whole = line(
            '+',
            T0,
            &Key {
                job: "a".into(),
                value: b"torn".to_vec(),
            },
        );
        file.write_all(b"? what\n").expect("write");
        file.write_all(&whole.as_bytes()[..whole.len() - 3])
            .expect("write");
        drop(file);
        let store = open(dir.path(), 10, 1000, T0 + 1);
        assert_eq!(store.len(), 1);
        assert_eq!(record(&store, "a", b"kept", T0 + 1), Seen::Replay);
        assert_eq!(record(&store, "a", b"torn", T0 + 1), Seen::New);
        drop(store);
        // The rewrite on open removed the fragment: the next append started a new line.
        let store = open(dir.path(), 10, 1000, T0 + 2);
        assert_eq!(store.len(), 2);
        assert_eq!(record(&store, "a", b"torn", T0 + 2), Seen::Replay);
        assert!(file_lines(dir.path()).iter().all(|l| l.starts_with("+ ")));
    }

    #[test]
    fn compaction_keeps_live_entries_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 1000, 8, T0);
        // Six entries that will expire, and one that will still be live.
        for i in 0..6u8 {
            assert_eq!(record(&store, "a", &[b'x', i], T0), Seen::New);
        }
        assert_eq!(record(&store, "a", b"live", T0 + 50), Seen::New);
        assert_eq!(file_lines(dir.path()).len(), 7);
        // At T0 + TTL the six have expired: 8 lines for 2 live entries, compacted.
        assert_eq!(record(&store, "a", b"late", T0 + TTL), Seen::New);
        let lines = file_lines(dir.path());
        assert_eq!(lines.len(), 2, "{lines:?}");
        drop(store);
        let store = open(dir.path(), 1000, 8, T0 + TTL + 1);
        assert_eq!(record(&store, "a", b"live", T0 + TTL + 1), Seen::Replay);
        assert_eq!(record(&store, "a", b"late", T0 + TTL + 1), Seen::Replay);
        assert_eq!(record(&store, "a", &[b'x', 0], T0 + TTL + 1), Seen::New);
    }

    #[test]
    fn forgotten_entries_are_compacted_away() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 1000, 4, T0);
        assert_eq!(record(&store, "a", b"keep", T0), Seen::New);
        for i in 0..3u8 {
            assert_eq!(record(&store, "a", &[i], T0), Seen::New);
            store.forget_at("a", &[i], T0);
        }
        assert!(file_lines(dir.path()).len() <= 3);
        assert_eq!(store.len(), 1);
        drop(store);
        let store = open(dir.path(), 1000, 4, T0 + 1);
        assert_eq!(record(&store, "a", b"keep", T0 + 1), Seen::Replay);
        assert_eq!(record(&store, "a", &[0], T0 + 1), Seen::New);
    }

    #[test]
    fn concurrent_records_of_one_value_let_exactly_one_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = std::sync::Arc::new(open(dir.path(), 1000, 1000, T0));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                std::thread::spawn(move || record(&store, "a", b"same", T0))
            })
            .collect();
        let new = handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .filter(|seen| *seen == Seen::New)
            .count();
        assert_eq!(new, 1);
    }

    #[test]
    fn a_write_failure_records_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path(), 10, 1000, T0);
        // Make the append handle unusable: a read-only handle on the same file.
        store.lock().file = Some(File::open(dir.path().join("store.log")).expect("open"));
        let err = store
            .check_and_record_at("a", b"d", T0)
            .expect_err("write fails");
        assert!(err.to_string().contains("store.log"), "{err}");
        assert_eq!(store.len(), 0);
        // The store recovers: the handle was reopened by the rewrite.
        assert_eq!(record(&store, "a", b"d", T0), Seen::New);
        assert_eq!(record(&store, "a", b"d", T0), Seen::Replay);
    }

    #[test]
    fn stores_open_in_a_new_directory_and_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("var/lib/svc/replay");
        let stores = ReplayStores::open(&path).expect("open");
        assert_eq!(
            stores
                .nonces()
                .check_and_record("job", b"n1")
                .expect("record"),
            Seen::New
        );
        assert_eq!(
            stores
                .deliveries()
                .check_and_record("job", b"n1")
                .expect("record"),
            Seen::New
        );
        drop(stores);
        let stores = ReplayStores::open(&path).expect("reopen");
        assert_eq!(
            stores
                .nonces()
                .check_and_record("job", b"n1")
                .expect("record"),
            Seen::Replay
        );
        assert_eq!(stores.deliveries().len(), 1);
        let memory = ReplayStores::in_memory();
        assert_eq!(
            memory
                .nonces()
                .check_and_record("job", b"n")
                .expect("record"),
            Seen::New
        );
        assert_eq!(
            memory
                .nonces()
                .check_and_record("job", b"n")
                .expect("record"),
            Seen::Replay
        );
    }
}
