//! A job's state file: the entry loaded from what the job saved (repaired first, see
//! `recovery.rs`), and the snapshots of its state written back, the newest last, durably
//! when asked.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{ClusterSide, Def, Engine, Entry, Kind, Queued, RunSlot, Saving, Trigger};
use crate::store::logstore::{LogDir, LogMeta};
use crate::store::state::{JobState, QueuedTrigger};
use crate::util::fsutil::Durability;
use crate::util::lock::MutexExt as _;

/// What a job left on disk, read as it is, before any repair ([`Engine::load_saved`]).
pub(super) struct Saved {
    pub(super) log_dir: LogDir,
    pub(super) state_path: PathBuf,
    /// Its logs, oldest first.
    pub(super) logs: Vec<LogMeta>,
    /// Its state file's state; `None` without a usable file.
    pub(super) loaded: Option<JobState>,
}

impl Engine {
    /// Builds an entry from disk: what the job saved is loaded ([`Engine::load_saved`]),
    /// then repaired of what a stop or a crash left ([`Engine::repair`]); the queued
    /// trigger its state file holds waits in the entry's queue.
    pub(super) fn load_entry(&self, kind: Kind, def: Def, id: &str) -> Entry {
        let mut saved = self.load_saved(kind, id);
        let mut state = self.repair(kind, id, &mut saved);
        let Saved {
            log_dir,
            state_path,
            mut logs,
            loaded,
        } = saved;
        crate::metrics::job_loaded(kind.as_str(), id, state.last_result.zip(state.last_run));
        if let Err(err) = log_dir.enforce_retention(&mut logs, def.log_retention()) {
            tracing::error!(job = id, error = %err, "cannot delete old logs");
        }
        // Only when what it says changed, or every start would rewrite and sync every
        // state file.
        if loaded.as_ref().map(JobState::to_text) != Some(state.to_text()) {
            if let Some(dir) = state_path.parent()
                && let Err(err) = std::fs::create_dir_all(dir)
            {
                tracing::error!(dir = %dir.display(), error = %err, "cannot create the state directory");
            }
            if let Err(err) = state.save(&state_path, Durability::Durable) {
                tracing::error!(job = id, error = %err, "cannot write the state file");
            }
        }
        // The queue lives in the entry; `persist` writes it back into every snapshot.
        let queued = state.queued.take().and_then(|queued| {
            let (source, queued_id) = (queued.source.clone(), queued.id);
            let trigger = Trigger::from_queued(queued);
            if trigger.is_none() {
                tracing::warn!(
                    job = id,
                    source,
                    "queued trigger of an unknown kind dropped"
                );
                crate::metrics::trigger_dropped("unknown_kind");
            }
            trigger.map(|trigger| Queued {
                trigger,
                id: queued_id,
            })
        });
        let queue_on_disk_id = queued.as_ref().and_then(|queued| queued.id);
        let queue_on_disk = queued.is_some();
        if queue_on_disk {
            tracing::info!(job = id, "a trigger queued before the restart waits to run");
        }
        Entry {
            def,
            state,
            logs,
            slot: RunSlot {
                run: None,
                queued,
                timer: None,
                next_run: None,
                log_ahead: None,
            },
            resumed: false,
            retired: false,
            log_dir,
            state_path,
            saving: Saving {
                save_lock: Arc::new(Mutex::new(())),
                queue_on_disk,
                queue_on_disk_id,
                snapshots: 0,
                saved: 0,
            },
            cluster: ClusterSide {
                finishing: None,
                remote_run: None,
            },
        }
    }

    /// What job `id` left on disk, read as it is: its logs, listed, and its state file
    /// (`None` when there is none, or none that can be used).
    fn load_saved(&self, kind: Kind, id: &str) -> Saved {
        let main = &self.inner.main;
        let (log_root, state_root) = match kind {
            Kind::Job => (main.dir_job_logs(), main.dir_job_state()),
            Kind::Http => (main.dir_job_http_logs(), main.dir_job_http_state()),
        };
        let log_dir = LogDir::new(log_root.join(id), id).with_max_output(main.log_max_size);
        let state_path = state_root.join(id);
        let logs = log_dir.scan().unwrap_or_else(|err| {
            tracing::error!(job = id, error = %err, "cannot list the logs");
            Vec::new()
        });
        let loaded = JobState::load(&state_path).unwrap_or_else(|err| {
            tracing::warn!(job = id, error = %err, "state file unusable; rebuilding it from the logs");
            None
        });
        Saved {
            log_dir,
            state_path,
            logs,
            loaded,
        }
    }

    /// Writes the current state of a job to its state file; a failure is logged.
    pub(super) fn persist(&self, kind: Kind, id: &str, durability: Durability) {
        if let Err(err) = self.try_persist(kind, id, durability) {
            tracing::error!(job = id, error = %err, "cannot write the state file");
        }
    }

    /// Writes the current state of a job, its queued trigger included, to its state
    /// file. Blocking.
    pub(super) fn try_persist(
        &self,
        kind: Kind,
        id: &str,
        durability: Durability,
    ) -> Result<(), crate::store::state::StateError> {
        self.try_persist_after(kind, id, durability, None)
    }

    /// Writes the state of a job after its run ended (the syncer's write, see
    /// `run_end.rs`), unless a snapshot taken after `snapshots_at_end` was written since:
    /// that one holds the end already (in the flood of a busy job, the next run's
    /// start writes the state at once). Blocking.
    pub(super) fn persist_after(&self, kind: Kind, id: &str, snapshots_at_end: u64) {
        if let Err(err) =
            self.try_persist_after(kind, id, Durability::Atomic, Some(snapshots_at_end))
        {
            tracing::error!(job = id, error = %err, "cannot write the state file");
        }
    }

    fn try_persist_after(
        &self,
        kind: Kind,
        id: &str,
        durability: Durability,
        snapshots_before: Option<u64>,
    ) -> Result<(), crate::store::state::StateError> {
        let (save_lock, path) = {
            let mut registry = self.lock();
            let Some(entry) = registry.map(kind).get_mut(id) else {
                return Ok(());
            };
            (entry.saving.save_lock.clone(), entry.state_path.clone())
        };
        let _ordered = save_lock.locked();
        if let Some(before) = snapshots_before {
            let written = self
                .lock()
                .map(kind)
                .get(id)
                .map(|entry| entry.saving.saved);
            if written.is_some_and(|saved| saved > before) {
                return Ok(());
            }
        }
        self.write_state(kind, id, &path, durability)
    }

    /// Writes a snapshot of a job's state, taken now, to `path`. The caller holds the
    /// entry's save lock: the snapshot is taken after it, so the last writer writes the
    /// newest state, and `queue_on_disk` follows what was written. Blocking.
    pub(super) fn write_state(
        &self,
        kind: Kind,
        id: &str,
        path: &Path,
        durability: Durability,
    ) -> Result<(), crate::store::state::StateError> {
        let (snapshot, number) = {
            let mut registry = self.lock();
            let Some(entry) = registry.map(kind).get_mut(id) else {
                return Ok(());
            };
            let mut state = entry.state.clone();
            state.queued = entry.slot.queued.as_ref().map(|queued| QueuedTrigger {
                id: queued.id,
                ..queued.trigger.to_queued()
            });
            entry.saving.snapshots += 1;
            (state, entry.saving.snapshots)
        };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        snapshot.save(path, durability)?;
        if let Some(entry) = self.lock().map(kind).get_mut(id) {
            entry.saving.queue_on_disk = snapshot.queued.is_some();
            entry.saving.queue_on_disk_id = snapshot.queued.as_ref().and_then(|queued| queued.id);
            entry.saving.saved = entry.saving.saved.max(number);
        }
        Ok(())
    }
}
