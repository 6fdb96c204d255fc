//! Runs' cgroups removed off the runs' path, by a thread at the lowest priority.
//!
//! Removing a run's cgroup (an `rmdir` in each hierarchy, then the kernel's own work to
//! take its controllers down) is CPU spent where a burst of runs ends while the last
//! ones still start: with 50 timers due together it was about a tenth of the engine's
//! share of each tick. Nothing waits for it: the run's end has killed whatever was left
//! in the cgroup and read what the run used. So the end hands the empty cgroup to one
//! thread at nice 19, which removes it once the CPU is not wanted by anything else (at
//! once on an idle machine, after the last starts of a burst). At most [`MAX_WAITING`]
//! cgroups wait for it: beyond that a run's end removes its own, so that a machine kept
//! busy does not pile them up. What a clean stop leaves waiting is removed with the
//! runs' parents (`RunCgroups::tear_down`), what a crash leaves at the next start
//! (`run::remove_left_over`).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};

use super::run::{self, Hierarchy};

/// One run's cgroup: its directory in each hierarchy.
type Dirs = Vec<(Hierarchy, PathBuf)>;

/// Most cgroups handed over and not taken up by the thread yet: the bound of its queue.
const MAX_WAITING: usize = 64;

/// The remover thread's nice value: the lowest priority.
const REMOVER_NICE: libc::c_int = 19;

/// The remover thread's queue; `None` when the thread could not be started.
static REMOVER: OnceLock<Option<SyncSender<Dirs>>> = OnceLock::new();

/// Removes the directories of an emptied run's cgroup soon, on the remover thread; at
/// once when that thread cannot be had or [`MAX_WAITING`] wait for it already.
/// Blocking only then.
pub(super) fn later(dirs: Dirs) {
    let remover = REMOVER.get_or_init(|| {
        let (queue, handed) = mpsc::sync_channel(MAX_WAITING);
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
        // Full (the thread is kept from the CPU) or gone: not waited for.
        Some(queue) => match queue.try_send(dirs) {
            Ok(()) => None,
            Err(TrySendError::Full(dirs) | TrySendError::Disconnected(dirs)) => Some(dirs),
        },
        None => Some(dirs),
    };
    if let Some(dirs) = refused {
        run::remove(&dirs);
    }
}

/// The remover thread: at the lowest priority, removes each cgroup it is handed.
fn serve(handed: &Receiver<Dirs>) {
    if let Err(error) = crate::util::set_thread_nice(REMOVER_NICE) {
        tracing::debug!(%error, "cannot lower the priority of the thread that removes runs' cgroups");
    }
    while let Ok(dirs) = handed.recv() {
        run::remove(&dirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_cgroup_handed_over_is_removed_by_a_thread_at_the_lowest_priority() {
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
        assert_eq!(remover_nice(), Some(REMOVER_NICE));
    }

    /// The nice value of this process's thread named `svc-cgroup-rm`.
    fn remover_nice() -> Option<libc::c_int> {
        let tasks = std::fs::read_dir("/proc/self/task").ok()?;
        tasks.flatten().find_map(|task| {
            let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
            if comm.trim() != "svc-cgroup-rm" {
                return None;
            }
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // After the command name in parentheses: nice is field 19 of the whole line.
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().nth(16)?.parse().ok()
        })
    }
}
