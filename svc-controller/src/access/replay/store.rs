//! One replay store: a map `(job, value) -> time first seen` in memory, mirrored by an
//! append-only file (the format is in the parent module's documentation).

use crate::util::lock::MutexExt as _;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Claim, RouteClass, Seen, StoreError};

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

/// The spend store's rule for one key, from what is live: spent by the other class of
/// route; spent by this route (a repeat); spent by another route of this class.
pub(super) fn spend_verdict(
    by_other_class: bool,
    by_this_route: bool,
    by_this_class: bool,
    class: RouteClass,
    repeatable: bool,
) -> Claim {
    if by_other_class {
        Claim::Spent
    } else if by_this_route {
        if repeatable {
            Claim::Repeat
        } else {
            Claim::Spent
        }
    } else if by_this_class && class == RouteClass::Control {
        Claim::Spent
    } else {
        Claim::New
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
        self.inner.locked()
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

    /// Atomically, for the spend store: spends `keys` (the canonical spellings of one
    /// accepted signature) for `route`, of `class`, unless [`spend_verdict`] finds them
    /// spent. A spent key is two entries: `(class marker, key)` and `(route, key)`,
    /// written with one fsync before the answer.
    pub fn claim(
        &self,
        keys: &[Vec<u8>],
        route: &str,
        class: RouteClass,
        repeatable: bool,
    ) -> Result<Claim, StoreError> {
        self.claim_at(keys, route, class, repeatable, unix_now())
    }

    pub(super) fn claim_at(
        &self,
        keys: &[Vec<u8>],
        route: &str,
        class: RouteClass,
        repeatable: bool,
        now: i64,
    ) -> Result<Claim, StoreError> {
        let ttl = self.limits.ttl_secs;
        let mut inner = self.lock();
        inner.expire(now, ttl);
        let live = |scope: &str, key: &[u8]| inner.is_live(&Key::new(scope, key), now, ttl);
        let verdicts = keys.iter().map(|key| {
            spend_verdict(
                live(class.other().marker(), key),
                live(route, key),
                live(class.marker(), key),
                class,
                repeatable,
            )
        });
        let verdict = verdicts.fold(Claim::New, |all, one| match (all, one) {
            (Claim::Spent, _) | (_, Claim::Spent) => Claim::Spent,
            (Claim::Repeat, _) | (_, Claim::Repeat) => Claim::Repeat,
            _ => Claim::New,
        });
        if verdict != Claim::New {
            return Ok(verdict);
        }
        let entries: Vec<Key> = keys
            .iter()
            .flat_map(|key| [Key::new(class.marker(), key), Key::new(route, key)])
            .collect();
        let text: String = entries.iter().map(|key| line('+', now, key)).collect();
        self.append(&mut inner, &text)?;
        for key in entries {
            inner.insert(key, now);
        }
        inner.cap(self.limits.max_entries);
        self.maybe_compact(&mut inner);
        Ok(Claim::New)
    }

    /// Takes back what [`ReplayStore::claim`] recorded for `keys` and `route` (the
    /// request was refused after all), so that a retry on the same route can run. The
    /// class marker stays: the signature was accepted once, and another class of route
    /// has no business with it. A write error is logged, as by `forget`.
    pub fn release(&self, keys: &[Vec<u8>], route: &str) {
        let now = unix_now();
        for key in keys {
            self.forget_at(route, key, now);
        }
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
        let mut first = true;
        while let Err(err) = Self::try_append(inner, path, text) {
            // The file may now end in a partial line: rewrite it from memory so that the
            // next append starts on a line of its own (on a full disk the rewrite gives
            // the space reserve back, and the append is tried once more). If the rewrite
            // fails too, the torn line is dropped at the next open.
            inner.file = None;
            let rewritten = self.compact(inner);
            if let Err(compact_err) = &rewritten {
                tracing::error!(error = %compact_err, file = %path.display(), "replay store: rewrite after a failed append failed");
            }
            if std::mem::take(&mut first)
                && rewritten.is_ok()
                && crate::util::space_reserve::is_full(&err)
            {
                // The rewrite may have given the reserve back already; if not, now.
                crate::util::space_reserve::give_back();
                continue;
            }
            return Err(self.write_error(err));
        }
        inner.file_lines += text.matches('\n').count();
        Ok(())
    }

    /// One try of [`Self::append`]: open if need be, write, sync.
    fn try_append(inner: &mut Inner, path: &Path, text: &str) -> io::Result<()> {
        if inner.file.is_none() {
            inner.file = Some(crate::util::fsutil::open_append_private(path)?);
        }
        let Some(file) = inner.file.as_mut() else {
            return Ok(());
        };
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_data())
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
        crate::util::fsutil::atomic_write(path, &inner.snapshot())?;
        inner.file_lines = inner.entries.len();
        inner.file = Some(crate::util::fsutil::open_append_private(path)?);
        Ok(())
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
