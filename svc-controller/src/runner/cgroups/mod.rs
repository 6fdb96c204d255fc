//! Each run of commands in a cgroup of its own, where the host lets the service make
//! them: its limits (`limit_pids`, `limit_memory`, `cpu_weight`) are then the kernel's,
//! for all its processes together, and its CPU time and peak memory are read from it.
//!
//! The mode is found once, at start-up ([`RunCgroups::set_up`]), and said in the log and
//! by `--check` ([`RunCgroups::inspect`]):
//! - **v2**, when this process's cgroup is delegated to it (its unit has `Delegate=yes`,
//!   or it is the root of a container's cgroup namespace): the controller moves itself
//!   into a leaf (`svc-controller.<instance>`), since a cgroup with children holds no
//!   process, and the runs live in `svc-runs.<instance>` beside it;
//! - **v1**, when the `pids` or `memory` hierarchy is mounted and this process's cgroup
//!   in it is writable: the runs live in `svc-runs.<instance>` below it in each;
//! - **none** otherwise, with the reason: the limits fall back to resource limits of
//!   each process (`RLIMIT_DATA`, and `RLIMIT_NPROC` when `limit_pids` is set).
//!
//! `<instance>` is derived from `dir_base`, so that services of two `dir_base`s on one
//! host keep apart and a restarted service finds what its predecessor left (removed at
//! start-up, after its processes are killed). The runs' parent has a task limit of its
//! own below the service's (the unit's `TasksMax`), so that runs together can never
//! take the last tasks the service needs to answer.

mod hierarchy;
mod layout;
mod removal;
mod run;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub use run::{RunCgroup, RunEnd};

use layout::Layout;
use proto::ResourceLimits;

/// `limit_pids` when a job sets none and the host gives runs cgroups.
pub const DEFAULT_LIMIT_PIDS: u64 = 512;

/// Tasks kept for the service itself out of its task limit: runs together may not take
/// them.
const TASKS_KEPT: u64 = 256;

/// What a run's cgroup limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Tasks (processes and threads) at once: `pids.max`.
    pub pids: Option<u64>,
    /// Bytes of memory of all its processes together: `memory.max` (v2) or
    /// `memory.limit_in_bytes` (v1), swap included where the host accounts it.
    pub memory: Option<u64>,
    /// Share of the CPU against other runs, 1 to 10000 (100: even): `cpu.weight` (v2)
    /// or `cpu.shares` (v1, scaled).
    pub cpu_weight: Option<u64>,
}

impl RunLimits {
    /// The limits of a run's cgroup: the job's, with [`DEFAULT_LIMIT_PIDS`] tasks when it
    /// sets none.
    pub fn of_run(wanted: &ResourceLimits) -> RunLimits {
        RunLimits {
            pids: Some(Self::tasks_of(wanted)),
            memory: wanted.memory,
            cpu_weight: wanted.cpu_weight,
        }
    }

    /// The tasks a run may have at once in its cgroup.
    pub fn tasks_of(wanted: &ResourceLimits) -> u64 {
        wanted.pids.unwrap_or(DEFAULT_LIMIT_PIDS)
    }

    /// These limits in a cgroup made ahead: its runner's thread that starts the commands
    /// joined it while it waited, so it holds one task more than the run's own.
    pub fn ahead(self) -> RunLimits {
        RunLimits {
            pids: self.pids.map(|pids| pids.saturating_add(1)),
            ..self
        }
    }
}

/// The runs' cgroups of this service, or why there are none.
#[derive(Debug)]
pub struct RunCgroups {
    layout: Option<Layout>,
    line: String,
    made: AtomicU64,
}

impl RunCgroups {
    /// No cgroups, for `why`.
    pub fn none(why: impl Into<String>) -> RunCgroups {
        RunCgroups {
            layout: None,
            line: format!("none ({}): {}", why.into(), layout::FALLBACK),
            made: AtomicU64::new(0),
        }
    }

    /// Finds the host's cgroups and makes the runs' parent (moving this process into its
    /// own leaf on v2, and removing what a previous service of `dir_base` left). Blocking;
    /// call it before any child process is started.
    pub fn set_up(dir_base: &Path) -> RunCgroups {
        let instance = instance(dir_base);
        match Layout::set_up(&instance, TASKS_KEPT) {
            Ok(layout) => RunCgroups {
                line: layout.describe(),
                layout: Some(layout),
                made: AtomicU64::new(0),
            },
            Err(why) => RunCgroups::none(why),
        }
    }

    /// What [`RunCgroups::set_up`] would find for this process, changing nothing: for
    /// `--check`, which does not run where the service does (its unit's cgroup).
    pub fn inspect() -> String {
        match Layout::inspect() {
            Ok(description) => description,
            Err(why) => format!("none ({why}): {}", layout::FALLBACK),
        }
    }

    /// The mode, for the start-up log: `v2 …`, `v1 …` or `none (why): …`.
    pub fn line(&self) -> &str {
        &self.line
    }

    /// Whether runs get cgroups.
    pub fn active(&self) -> bool {
        self.layout.is_some()
    }

    /// Whether a run's memory is limited by its cgroup (else by `RLIMIT_DATA`).
    pub fn limits_memory(&self) -> bool {
        self.layout.as_ref().is_some_and(Layout::has_memory)
    }

    /// Whether a run's tasks are limited by its cgroup (else by `RLIMIT_NPROC`).
    pub fn limits_pids(&self) -> bool {
        self.layout.as_ref().is_some_and(Layout::has_pids)
    }

    /// Makes the cgroup of run `counter` of job `job_id` with `limits`. `Ok(None)` when
    /// runs get no cgroups. Blocking.
    pub fn create(
        &self,
        job_id: &str,
        counter: u64,
        limits: &RunLimits,
    ) -> Result<Option<RunCgroup>, String> {
        let Some(layout) = &self.layout else {
            return Ok(None);
        };
        let serial = self.made.fetch_add(1, Ordering::Relaxed);
        let name = run_name(job_id, counter, serial);
        layout.create_run(&name, limits).map(Some)
    }

    /// Makes the cgroup of the next run of a runner started ahead, for its thread that
    /// starts commands to join while it waits (v1 only, where one thread may join:
    /// `None` on v2 and without cgroups), with the limits of a run that sets none: such a
    /// run's begin then writes nothing ([`RunCgroup::holds`]); another run's sets its own
    /// ([`RunCgroup::set_limits`]). Blocking.
    pub fn create_ahead(&self) -> Option<Result<RunCgroup, String>> {
        let layout = self
            .layout
            .as_ref()
            .filter(|layout| layout.joins_by_thread())?;
        let serial = self.made.fetch_add(1, Ordering::Relaxed);
        let limits = RunLimits::of_run(&ResourceLimits::default()).ahead();
        Some(layout.create_run(&format!("ahead.{serial}"), &limits))
    }

    /// Removes the runs' parents at the service's end; on v2 the controller's leaf
    /// stays, since this process is in it. Each run removed its own cgroup, but a runner
    /// started ahead for a run that never came is dropped as the runtime ends, and the
    /// removal of its cgroup, left to a blocking thread, may never run: what is left
    /// below them goes first (its runner with it), or the parents would stay too.
    /// Blocking.
    pub fn tear_down(&self) {
        if let Some(layout) = &self.layout {
            for (parent, count) in layout.remove_runs() {
                tracing::debug!(parent = %parent.display(), count, "removed the cgroups of runners left at the stop");
            }
        }
        for parent in self.parents() {
            if let Err(err) = std::fs::remove_dir(&parent) {
                tracing::debug!(dir = %parent.display(), error = %err, "the runs' cgroup stays");
            }
        }
    }

    /// The runs' parent directories, for tests and the start-up log.
    pub fn parents(&self) -> Vec<PathBuf> {
        self.layout
            .as_ref()
            .map(Layout::parents)
            .unwrap_or_default()
    }
}

/// A name for `dir_base` that stays the same across restarts: 8 hex digits of its hash.
fn instance(dir_base: &Path) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(dir_base.as_os_str().as_encoded_bytes());
    digest[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The cgroup name of a run: the job's id (characters a cgroup name may hold, cut to
/// 64), its counter and a serial of this process (a counter can be taken again by a
/// cluster's other node, or a cgroup of the same name may be left over).
fn run_name(job_id: &str, counter: u64, serial: u64) -> String {
    let id: String = job_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{id}.{counter}.{serial}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_hold_only_safe_characters() {
        assert_eq!(run_name("deploy-web", 7, 0), "deploy-web.7.0");
        assert_eq!(run_name("../a b/ç", 1, 2), "___a_b__.1.2");
        assert_eq!(run_name(&"x".repeat(300), 1, 0).len(), 64 + 4);
    }

    #[test]
    fn the_instance_name_follows_dir_base() {
        let a = instance(Path::new("/var/lib/svc"));
        assert_eq!(a.len(), 8);
        assert_eq!(a, instance(Path::new("/var/lib/svc")));
        assert_ne!(a, instance(Path::new("/srv/other")));
    }

    #[test]
    fn a_run_gets_the_default_task_limit_and_one_task_more_in_a_cgroup_made_ahead() {
        let unset = RunLimits::of_run(&ResourceLimits::default());
        assert_eq!(unset.pids, Some(DEFAULT_LIMIT_PIDS));
        assert_eq!(unset.ahead().pids, Some(DEFAULT_LIMIT_PIDS + 1));
        let wanted = ResourceLimits {
            pids: Some(64),
            memory: Some(1 << 20),
            cpu_weight: Some(50),
            ..ResourceLimits::default()
        };
        assert_eq!(RunLimits::tasks_of(&wanted), 64);
        let own = RunLimits::of_run(&wanted).ahead();
        assert_eq!(
            own,
            RunLimits {
                pids: Some(65),
                memory: Some(1 << 20),
                cpu_weight: Some(50)
            }
        );
    }

    #[test]
    fn without_cgroups_nothing_is_made_and_the_line_says_why() {
        let none = RunCgroups::none("the test says so");
        assert!(!none.active());
        assert!(none.line().starts_with("none (the test says so): "));
        assert!(matches!(
            none.create("job", 1, &RunLimits::default()),
            Ok(None)
        ));
    }
}
