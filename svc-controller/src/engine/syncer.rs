//! Group commit of what the end of a run must make durable, off the run path.
//!
//! When a run ends, its log gets its final name and the job's state changes at once (in
//! the page cache, so a killed controller finds both), but the syncs that carry them
//! through a power failure (the log's data, its directory, the state file) are slow, and
//! nothing that follows depends on them: the next run of the job may begin meanwhile.
//! So the run hands them to the one syncer thread, which takes everything queued since
//! its last round and does each sync once per round: every log file, then every
//! directory once, then the state file of every job once (written from the state at that
//! moment, so several runs' ends cost one write). The run's own files (its temporary
//! directory, its request body) are cleared there too, before the syncs, for the same
//! reason: nothing that follows waits for it. A power failure before a round ends
//! leaves a run that ended as interrupted, never a torn file or a reused counter: logs
//! are renamed whole, the state file is replaced atomically, and the counters come from
//! reserved blocks written before they are used.

use crate::util::lock::{CondvarExt as _, MutexExt as _};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};

use crate::store::history::HistoryFile;

/// A state file write, done once per job and round; the key names the job.
pub(super) type Persist = Box<dyn FnOnce() + Send>;

/// What one run's end hands to the syncer, in one message (one wake of its thread).
#[derive(Default)]
pub(super) struct RunEnd {
    /// The finished log, whose data must reach the disk.
    pub log_file: Option<File>,
    /// The log directory, with a renamed and perhaps removed names.
    pub dir: Option<PathBuf>,
    /// The job's state file to write, keyed by its job (one write per key and round).
    pub state: Option<(String, Persist)>,
    /// Clears the files the run used (see `run_end.rs`); done first in the round.
    pub cleanup: Option<Persist>,
    /// The run's line for its job's history: appended, with the other lines of the
    /// round for the same job, in one write and one sync.
    pub history: Option<(HistoryFile, String)>,
}

/// Counts the work queued and the work done (in queue order), so that
/// [`Syncer::flush`] can wait for what was queued before it, however much is queued
/// after it.
#[derive(Default)]
struct Outstanding {
    /// (queued, done) since the start.
    count: Mutex<(u64, u64)>,
    done: Condvar,
}

/// Handle on the syncer thread. Cheap to clone; the thread ends when the last handle is
/// dropped.
#[derive(Clone)]
pub(super) struct Syncer {
    queue: Sender<RunEnd>,
    outstanding: Arc<Outstanding>,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncer").finish_non_exhaustive()
    }
}

impl Syncer {
    /// Starts the syncer thread; if the thread cannot be started, the work is done
    /// at once by whoever hands it over.
    pub(super) fn start() -> Syncer {
        let (queue, rx) = mpsc::channel();
        let outstanding = Arc::new(Outstanding::default());
        let syncer = Syncer {
            queue,
            outstanding: outstanding.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("svc-syncer".into())
            .spawn(move || run(&rx, &outstanding));
        if let Err(err) = spawned {
            tracing::error!(error = %err, "cannot start the syncer thread: ends of runs are synced inline");
        }
        syncer
    }

    /// Queues what a run's end must make durable.
    pub(super) fn run_end(&self, end: RunEnd) {
        self.outstanding.count.locked().0 += 1;
        if let Err(mpsc::SendError(end)) = self.queue.send(end) {
            // No thread: do it here, in the caller's (blocking) context.
            do_round(vec![end]);
            self.outstanding.finished(1);
        }
    }

    /// Waits until everything queued so far is done (not what is queued meanwhile).
    /// Blocking.
    pub(super) fn flush(&self) {
        let mut count = self.outstanding.count.locked();
        let target = count.0;
        while count.1 < target {
            count = self.outstanding.done.waited(count);
        }
    }
}

impl Outstanding {
    fn finished(&self, n: u64) {
        self.count.locked().1 += n;
        self.done.notify_all();
    }
}

/// The thread: waits for work, takes all that is queued, does it as one round.
fn run(rx: &Receiver<RunEnd>, outstanding: &Outstanding) {
    while let Ok(first) = rx.recv() {
        let mut round = vec![first];
        round.extend(rx.try_iter());
        let n = round.len() as u64;
        do_round(round);
        outstanding.finished(n);
    }
}

/// Syncs each log file, then each directory once, then appends to each job's history
/// once, then writes each job's state once (the last write queued for it: each writes
/// the state as it is when it runs).
fn do_round(mut round: Vec<RunEnd>) {
    let mut dirs = BTreeSet::new();
    let mut histories: BTreeMap<PathBuf, (HistoryFile, String)> = BTreeMap::new();
    let mut states: Vec<(String, Persist)> = Vec::new();
    for end in &mut round {
        if let Some(cleanup) = end.cleanup.take() {
            cleanup();
        }
    }
    for end in round {
        if let Some(file) = end.log_file
            && let Err(err) = file.sync_data()
        {
            tracing::error!(error = %err, "cannot sync a finished log");
        }
        dirs.extend(end.dir);
        if let Some((file, line)) = end.history {
            histories
                .entry(file.path().to_path_buf())
                .or_insert_with(|| (file, String::new()))
                .1
                .push_str(&line);
        }
        if let Some((key, persist)) = end.state {
            match states.iter_mut().find(|(queued, _)| *queued == key) {
                Some(slot) => slot.1 = persist,
                None => states.push((key, persist)),
            }
        }
    }
    for dir in dirs {
        if let Err(err) = crate::util::fsutil::sync_dir(&dir) {
            tracing::error!(dir = %dir.display(), error = %err, "cannot sync a log directory");
        }
    }
    for (file, lines) in histories.into_values() {
        if let Err(err) = file.append(&lines) {
            tracing::error!(file = %file.path().display(), error = %err, "cannot add to a run history");
        }
    }
    for (_, persist) in states {
        persist();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_round_writes_each_state_once_and_flush_waits_for_it() {
        let syncer = Syncer::start();
        let dir = tempfile::tempdir().expect("temp dir");
        let writes = Arc::new(AtomicUsize::new(0));
        let path = dir.path().join("log");
        std::fs::write(&path, b"line\n").expect("write");
        // Hold the thread up in a state write until the rest is queued, so that the rest
        // is done as one round: `entered` says the thread is in it, `gate` lets it go.
        let entered = Arc::new((Mutex::new(false), Condvar::new()));
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        {
            let (entered, gate) = (entered.clone(), gate.clone());
            syncer.run_end(RunEnd {
                history: None,
                state: Some((
                    "first".into(),
                    Box::new(move || {
                        *entered.0.locked() = true;
                        entered.1.notify_all();
                        let mut open = gate.0.locked();
                        while !*open {
                            open = gate.1.waited(open);
                        }
                    }),
                )),
                ..RunEnd::default()
            });
        }
        {
            let mut inside = entered.0.locked();
            while !*inside {
                inside = entered.1.waited(inside);
            }
        }
        // Four ends of runs of one job, each with its log and directory, queued while
        // the thread is held.
        let cleanups = Arc::new(AtomicUsize::new(0));
        let history = HistoryFile::new(&dir.path().join("history"), "job");
        for counter in 1..=4u64 {
            let (writes, cleanups) = (writes.clone(), cleanups.clone());
            let line = format!("{{\"counter\":{counter}}}\n");
            syncer.run_end(RunEnd {
                history: Some((history.clone(), line)),
                log_file: Some(File::open(&path).expect("open")),
                dir: Some(dir.path().to_path_buf()),
                state: Some((
                    "job".into(),
                    Box::new(move || {
                        writes.fetch_add(1, Ordering::SeqCst);
                    }),
                )),
                cleanup: Some(Box::new(move || {
                    cleanups.fetch_add(1, Ordering::SeqCst);
                })),
            });
        }
        assert_eq!(*syncer.outstanding.count.locked(), (5, 0));
        {
            let (open, cv) = &*gate;
            *open.locked() = true;
            cv.notify_all();
        }
        syncer.flush();
        assert_eq!(*syncer.outstanding.count.locked(), (5, 5));
        // The four state writes of one job were done in one round: one of them ran.
        assert_eq!(writes.load(Ordering::SeqCst), 1);
        // Each run's files were cleared, and before the flush returned.
        assert_eq!(cleanups.load(Ordering::SeqCst), 4);
        // Each run's history line is there, in order.
        let text = std::fs::read_to_string(history.path()).expect("history");
        assert_eq!(
            text,
            "{\"counter\":1}\n{\"counter\":2}\n{\"counter\":3}\n{\"counter\":4}\n"
        );
    }

    #[test]
    fn flush_with_nothing_queued_returns() {
        Syncer::start().flush();
    }
}
