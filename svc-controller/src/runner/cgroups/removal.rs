//! Runs' cgroups removed off the runs' path, once the runs' ends pause.
//!
//! Removing a run's cgroup (an `rmdir` in each hierarchy, then the kernel's own work to
//! take its controllers down) is CPU spent where a burst of runs ends while the last
//! ones still start: with 50 timers due together it was about a tenth of the engine's
//! share of each tick. Nothing waits for it: the run's end has killed whatever was left
//! in the cgroup and read what the run used. So the end hands the empty cgroup here,
//! and one thread removes what it was handed once no run ended for [`QUIET`], or
//! [`AT_MOST`] after the first was handed, whichever comes first. What a clean stop
//! leaves here is removed with the runs' parents (`RunCgroups::tear_down`), what a
//! crash leaves at the next start (`run::remove_left_over`).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::run::{self, Hierarchy};

/// One run's cgroup: its directory in each hierarchy.
type Dirs = Vec<(Hierarchy, PathBuf)>;

/// Cgroups handed over are removed once no other came for this long...
const QUIET: Duration = Duration::from_millis(50);

/// ...or once the first of them has waited this long, whichever comes first.
const AT_MOST: Duration = Duration::from_millis(250);

/// The remover thread's queue; `None` when the thread could not be started.
static REMOVER: OnceLock<Option<Sender<Dirs>>> = OnceLock::new();

/// Removes the directories of an emptied run's cgroup soon, on the remover thread; at
/// once when that thread cannot be had. Blocking only in that case.
pub(super) fn later(dirs: Dirs) {
    let remover = REMOVER.get_or_init(|| {
        let (queue, handed) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("svc-cgroup-rm".into())
            .spawn(move || serve(&handed));
        match spawned {
            Ok(_) => Some(queue),
            Err(err) => {
                tracing::warn!(error = %err, "cannot start the thread that removes runs' cgroups; each run's end removes its own");
                None
            }
        }
    });
    let refused = match remover {
        Some(queue) => queue.send(dirs).err().map(|refused| refused.0),
        None => Some(dirs),
    };
    if let Some(dirs) = refused {
        run::remove(&dirs);
    }
}

/// The remover thread: gathers what it is handed and removes it when [`due`] says.
fn serve(handed: &Receiver<Dirs>) {
    let mut pending: Vec<Dirs> = Vec::new();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let received = match first {
            None => handed.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(first) => {
                handed.recv_timeout(due(first, last).saturating_duration_since(Instant::now()))
            }
        };
        match received {
            Ok(dirs) => {
                last = Instant::now();
                let since = *first.get_or_insert(last);
                pending.push(dirs);
                if last < due(since, last) {
                    continue;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                remove_all(&mut pending);
                return;
            }
        }
        remove_all(&mut pending);
        first = None;
    }
}

/// When cgroups handed over since `first`, the last at `last`, are to be removed.
fn due(first: Instant, last: Instant) -> Instant {
    (first + AT_MOST).min(last + QUIET)
}

fn remove_all(pending: &mut Vec<Dirs>) {
    for dirs in pending.drain(..) {
        run::remove(&dirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_waits_for_a_pause_in_the_ends() {
        let start = Instant::now();
        // Handed one after another: due a pause after the last.
        let last = start + Duration::from_millis(40);
        assert_eq!(due(start, last), last + QUIET);
        assert_eq!(due(start, start), start + QUIET);
    }

    #[test]
    fn ends_without_a_pause_hold_no_cgroup_past_the_bound() {
        let start = Instant::now();
        let last = start + AT_MOST - Duration::from_millis(1);
        assert_eq!(due(start, last), start + AT_MOST);
    }

    #[test]
    fn a_cgroup_handed_over_is_removed() {
        let parent = tempfile::tempdir().expect("temp dir");
        let dirs: Dirs = (0..3)
            .map(|n| {
                let dir = parent.path().join(format!("run.{n}"));
                std::fs::create_dir(&dir).expect("mkdir");
                (Hierarchy::Pids, dir)
            })
            .collect();
        for dir in &dirs {
            later(vec![dir.clone()]);
        }
        let until = Instant::now() + Duration::from_secs(10);
        while dirs.iter().any(|(_, dir)| dir.exists()) {
            assert!(Instant::now() < until, "not removed within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
