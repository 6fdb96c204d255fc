//! The sandboxes of busy jobs: the Landlock ruleset of a job whose runs follow one
//! another, built once by the controller and sent to each of the job's runners with its
//! request while it stays what a new build would give.
//!
//! A runner builds its run's ruleset itself otherwise, most of it (the walk from `/`
//! that grants reading everywhere but below the protected paths, about a millisecond of
//! CPU) while it waits for its work. For a job that runs back to back (a flood of
//! triggers, a queue that never empties) that is the largest part of each run's cost,
//! and always the same result: so the run that follows another builds it here, on the
//! engine's file-work thread, and later runs reuse it after a check of the paths it was
//! built from ([`proto::sandbox::Prepared::is_current`]: one `stat` each, no walk).
//!
//! None is built while a directory on the way to the protected paths changed less than a
//! second ago (a ruleset built then would serve one run only): the runners then build
//! theirs as for any other job. A kept ruleset goes after [`KEPT_IDLE`] without a run, is rebuilt after [`MAX_AGE`]
//! whatever the checks say (the bound on how old a snapshot of the walk can be, as a
//! runner started ahead may also wait that long for its work) or after [`MAX_USES`]
//! runs, and at most [`CAPACITY`] are kept: each holds a descriptor and kernel memory
//! for its rules.
//!
//! Each run's runner adds one rule to the ruleset it is sent, for the run's own `/proc`
//! (a mount made for the run; see [`proto::sandbox::allow_reading_below`]), and a
//! ruleset sent to several runners is one kernel object: without a bound on its runs,
//! a flood's ruleset gathered a rule (and a hold on a finished run's `/proc`) per run
//! for its 10 s, and each command's `landlock_restrict_self`, which copies every rule,
//! took 0.06 ms after a build and 0.36 ms 7 s later.

use crate::util::lock::MutexExt as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proto::sandbox::Prepared;

/// A kept ruleset with no run for this long is dropped.
const KEPT_IDLE: Duration = Duration::from_secs(2);
/// A kept ruleset is rebuilt once this old.
const MAX_AGE: Duration = Duration::from_secs(10);
/// Most rulesets kept at once (the least recently used goes first).
const CAPACITY: usize = 32;
/// A kept ruleset is rebuilt after this many runs (each of which added a rule to it).
const MAX_USES: usize = 32;

/// The rulesets kept for busy jobs, by job ID.
#[derive(Default)]
pub struct Sandboxes {
    kept: Mutex<HashMap<String, Kept>>,
}

impl std::fmt::Debug for Sandboxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandboxes")
            .field("kept", &self.kept.locked().len())
            .finish()
    }
}

struct Kept {
    /// The sandbox it was built for (without [`proto::Sandbox::attached`]).
    spec: proto::Sandbox,
    prepared: Arc<Prepared>,
    built_at: Instant,
    used_at: Instant,
    /// Runs it was sent with.
    uses: usize,
}

impl Kept {
    /// Whether it was used lately enough to be kept at `now`.
    fn in_use(&self, now: Instant) -> bool {
        now.duration_since(self.used_at) < KEPT_IDLE
    }
}

impl Sandboxes {
    /// The ruleset to send with a run of job `id` whose sandbox is `spec`: the one kept
    /// for it when built for the same sandbox and still current; else, for a run that
    /// follows another run of the job (`busy`), one built now and kept; else `None`, and
    /// the runner builds it. A ruleset that cannot be built is left to the runner, which
    /// reports why. Blocking (a `stat` per path it depends on; the walk when it builds).
    pub fn for_run(&self, id: &str, spec: &proto::Sandbox, busy: bool) -> Option<Arc<Prepared>> {
        let now = Instant::now();
        let candidate = self
            .kept
            .locked()
            .get(id)
            .filter(|kept| {
                kept.in_use(now)
                    && now.duration_since(kept.built_at) < MAX_AGE
                    && kept.uses < MAX_USES
                    && kept.spec == *spec
            })
            .map(|kept| kept.prepared.clone());
        // Checked without the lock: a `stat` per path.
        match candidate {
            Some(prepared) if prepared.is_current() => {
                if let Some(kept) = self.kept.locked().get_mut(id) {
                    kept.used_at = now;
                    kept.uses += 1;
                }
                return Some(prepared);
            }
            _ => {
                self.kept.locked().remove(id);
            }
        }
        // While a directory on the way changes (a tree just made, a busy /tmp), a
        // ruleset built now would serve one run only, and its walk would sit on the way
        // to the command: the runners build theirs, walking ahead while they wait.
        if !busy || !proto::sandbox::is_settled(spec) {
            return None;
        }
        let prepared = match proto::sandbox::prepare(spec, None) {
            Ok(prepared) => Arc::new(prepared),
            Err(err) => {
                tracing::debug!(job = id, error = %err, "the sandbox is left to the runner");
                return None;
            }
        };
        // Without a ruleset (a kernel without Landlock) there is nothing to send: the
        // runner's own build is as cheap.
        prepared.ruleset()?;
        if !prepared.is_reusable() {
            // A change came right before the walk after all: for this run only.
            return Some(prepared);
        }
        let mut kept = self.kept.locked();
        kept.retain(|_, entry| entry.in_use(now));
        if kept.len() >= CAPACITY
            && let Some(oldest) = kept
                .iter()
                .min_by_key(|(_, entry)| entry.used_at)
                .map(|(id, _)| id.clone())
        {
            kept.remove(&oldest);
        }
        kept.insert(
            id.to_string(),
            Kept {
                spec: spec.clone(),
                prepared: prepared.clone(),
                built_at: now,
                used_at: now,
                uses: 1,
            },
        );
        Some(prepared)
    }

    /// Whether a ruleset is kept that was used lately: a runner started now will then
    /// most likely be sent one, and need not build the service's part of its own while
    /// it waits.
    pub fn any_in_use(&self) -> bool {
        let now = Instant::now();
        self.kept.locked().values().any(|entry| entry.in_use(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sandbox with `work` in a fresh directory writable and nothing protected: no
    /// walk, so that whether it is current depends on `work` alone (a walk's directories
    /// here, `/tmp` among them, change at any time while tests run).
    fn spec(dir: &std::path::Path) -> proto::Sandbox {
        std::fs::create_dir_all(dir.join("work")).expect("mkdir");
        proto::Sandbox {
            write_paths: vec![dir.join("work").display().to_string()],
            protected_paths: Vec::new(),
            readable_dirs: Vec::new(),
            attached: None,
        }
    }

    /// A temporary directory, no ruleset kept yet and the sandbox of [`spec`] in it;
    /// `None` (the test is skipped, and says so) on a kernel without Landlock.
    fn fixture() -> Option<(tempfile::TempDir, Sandboxes, proto::Sandbox)> {
        if proto::sandbox::kernel_abi().is_none() {
            eprintln!("skipped: needs a kernel with Landlock");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = spec(dir.path());
        Some((dir, Sandboxes::default(), spec))
    }

    #[test]
    fn only_a_busy_job_gets_a_ruleset_built_and_another_sandbox_gets_its_own() {
        let Some((dir, sandboxes, spec)) = fixture() else {
            return;
        };
        assert!(
            sandboxes.for_run("j", &spec, false).is_none(),
            "not busy: the runner builds"
        );
        assert!(!sandboxes.any_in_use());
        let built = sandboxes.for_run("j", &spec, true).expect("busy: built");
        assert!(built.ruleset().is_some());
        assert!(sandboxes.any_in_use());
        assert!(
            built.summary.starts_with("sandbox: landlock"),
            "{}",
            built.summary
        );
        let again = sandboxes.for_run("j", &spec, false).expect("kept");
        assert!(Arc::ptr_eq(&built, &again), "reused, not built again");
        assert!(
            sandboxes.for_run("other", &spec, false).is_none(),
            "kept per job"
        );

        let mut other = spec.clone();
        other
            .protected_paths
            .push(dir.path().join("work").display().to_string());
        assert!(
            sandboxes.for_run("j", &other, false).is_none(),
            "a ruleset built for another sandbox is not used"
        );
    }

    /// Protected paths in a directory made just now: a ruleset built now would serve one
    /// run only, so none is built, and the runners build theirs.
    #[test]
    fn none_is_built_while_a_directory_on_the_way_has_just_changed() {
        let Some((dir, sandboxes, mut spec)) = fixture() else {
            return;
        };
        let protected = dir.path().join("state");
        std::fs::create_dir(&protected).expect("mkdir");
        spec.protected_paths = vec![protected.display().to_string()];
        assert!(!proto::sandbox::is_settled(&spec));
        assert!(sandboxes.for_run("j", &spec, true).is_none());
        assert!(!sandboxes.any_in_use(), "nothing kept: runners walk ahead");
    }

    /// Each run adds its `/proc` rule to the ruleset it is sent: after `MAX_USES` runs
    /// a busy job's next run gets a ruleset built afresh, and a run that does not follow
    /// another one is left to its runner.
    #[test]
    fn a_ruleset_goes_with_at_most_max_uses_runs() {
        let Some((_dir, sandboxes, spec)) = fixture() else {
            return;
        };
        let first = sandboxes.for_run("j", &spec, true).expect("built");
        for run in 2..=MAX_USES {
            let kept = sandboxes.for_run("j", &spec, run % 2 == 0).expect("kept");
            assert!(Arc::ptr_eq(&first, &kept), "run {run}: the kept ruleset");
        }
        assert!(
            sandboxes.for_run("j", &spec, false).is_none(),
            "used up: not sent again"
        );
        let second = sandboxes.for_run("j", &spec, true).expect("rebuilt");
        assert!(!Arc::ptr_eq(&first, &second), "built afresh");
        let kept = sandboxes
            .for_run("j", &spec, false)
            .expect("the new one kept");
        assert!(Arc::ptr_eq(&second, &kept));
    }

    #[test]
    fn a_ruleset_is_rebuilt_when_a_path_it_depends_on_changes() {
        let Some((dir, sandboxes, spec)) = fixture() else {
            return;
        };
        let first = sandboxes.for_run("j", &spec, true).expect("built");
        let kept = sandboxes.for_run("j", &spec, true).expect("kept");
        assert!(Arc::ptr_eq(&first, &kept));
        // The working directory replaced: the rule of the first ruleset is for the old
        // one, so the first is not sent again.
        std::fs::remove_dir(dir.path().join("work")).expect("rmdir");
        std::fs::create_dir(dir.path().join("work")).expect("mkdir");
        let second = sandboxes.for_run("j", &spec, true).expect("rebuilt");
        assert!(!Arc::ptr_eq(&first, &second));
    }
}
