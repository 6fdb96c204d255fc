//! One run's cgroup: made with its limits before its runner gets the work, and at the end
//! of the run emptied (whatever is left is killed), read (CPU time, peak memory, OOM
//! kills, refused forks) and removed (soon after, see `removal.rs`). Every function
//! here is blocking.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::RunLimits;

/// How long the end of a run waits for the processes left in its cgroup to die.
const EMPTY_WAIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(5);

/// Which hierarchy a directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    /// The unified hierarchy (v2): every controller in one directory.
    Unified,
    Pids,
    Memory,
    Cpu,
    Cpuacct,
}

/// A run's cgroup: its directory in each hierarchy. Dropped without
/// [`RunCgroup::finish`], it is emptied and removed all the same.
#[derive(Debug)]
pub struct RunCgroup {
    dirs: Vec<(Hierarchy, PathBuf)>,
    finished: bool,
    /// A runner whose thread joined the cgroup ahead ([`RunCgroup::tasks_files`]): not
    /// one of the run's processes, so neither counted nor killed as left over at the
    /// run's end (its thread leaves as the runner reports the end).
    runner: Option<i32>,
    /// The limits written so far ([`RunCgroup::holds`]).
    limits: RunLimits,
}

/// What a run's cgroup tells of it at its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEnd {
    /// CPU time of all its processes, when the hierarchy accounts it.
    pub cpu_user_ms: Option<u64>,
    pub cpu_system_ms: Option<u64>,
    /// The most memory its processes used at once, when accounted.
    pub peak_memory_bytes: Option<u64>,
    /// Processes the kernel killed because the run reached its memory limit.
    pub oom_kills: u64,
    /// Forks refused because the run reached its task limit.
    pub forks_refused: u64,
    /// Processes still in the cgroup when the run ended, killed then.
    pub killed_at_end: usize,
}

/// Makes the cgroup `name` below each of `parents` with `limits`.
pub fn create(
    parents: &[(Hierarchy, PathBuf)],
    name: &str,
    limits: &RunLimits,
) -> Result<RunCgroup, String> {
    let mut cgroup = RunCgroup {
        dirs: Vec::with_capacity(parents.len()),
        finished: false,
        runner: None,
        limits: RunLimits::default(),
    };
    for (hierarchy, parent) in parents {
        let dir = parent.join(name);
        // Two controllers mounted together (cpu,cpuacct) share one directory.
        if !cgroup.dirs.iter().any(|(_, made)| *made == dir) {
            std::fs::create_dir(&dir)
                .map_err(|err| format!("cannot make the run's cgroup {}: {err}", dir.display()))?;
        }
        cgroup.dirs.push((*hierarchy, dir));
    }
    cgroup.set_limits(limits)?;
    Ok(cgroup)
}

fn set_limits(hierarchy: Hierarchy, dir: &Path, limits: &RunLimits) -> Result<(), String> {
    let set = |file: &str, value: String| {
        std::fs::write(dir.join(file), &value)
            .map_err(|err| format!("cannot set {file} = {value} in {}: {err}", dir.display()))
    };
    let optional = |file: &str, value: String| {
        if dir.join(file).exists() {
            set(file, value)
        } else {
            Ok(())
        }
    };
    match hierarchy {
        Hierarchy::Unified => {
            if let Some(pids) = limits.pids {
                set("pids.max", pids.to_string())?;
            }
            if let Some(memory) = limits.memory {
                set("memory.max", memory.to_string())?;
                // The limit is of memory, not of memory the run may also push to swap.
                optional("memory.swap.max", "0".into())?;
                // One OOM kill ends the whole run, as a time limit does.
                optional("memory.oom.group", "1".into())?;
            }
            if let Some(weight) = limits.cpu_weight {
                optional("cpu.weight", weight.to_string())?;
            }
        }
        Hierarchy::Pids => {
            if let Some(pids) = limits.pids {
                set("pids.max", pids.to_string())?;
            }
        }
        Hierarchy::Memory => {
            if let Some(memory) = limits.memory {
                set("memory.limit_in_bytes", memory.to_string())?;
                // Memory and swap together: set after the memory limit, never below it.
                optional("memory.memsw.limit_in_bytes", memory.to_string())?;
            }
        }
        Hierarchy::Cpu => {
            if let Some(weight) = limits.cpu_weight {
                // cpu.weight 100 is cpu.shares 1024, the default of both.
                set("cpu.shares", (weight * 1024 / 100).max(2).to_string())?;
            }
        }
        Hierarchy::Cpuacct => {}
    }
    Ok(())
}

impl RunCgroup {
    /// Sets the run's limits. Blocking.
    pub fn set_limits(&mut self, limits: &RunLimits) -> Result<(), String> {
        for (hierarchy, dir) in &self.dirs {
            set_limits(*hierarchy, dir, limits)?;
        }
        self.limits = *limits;
        Ok(())
    }

    /// Whether the cgroup holds `limits` already: made with them, and nothing else
    /// written since (a limit left unset is the kernel's default, which a fresh cgroup
    /// has). A run whose limits are those its cgroup made ahead got needs no write.
    pub fn holds(&self, limits: &RunLimits) -> bool {
        self.limits == *limits
    }

    /// The `tasks` files (v1) through which a runner's thread joins the cgroup ahead of
    /// the run; `runner` is that runner's pid, which the end of the run leaves alone.
    pub fn tasks_files(&mut self, runner: u32) -> Vec<String> {
        self.runner = i32::try_from(runner).ok();
        self.files("tasks")
    }

    /// The `cgroup.procs` files each command of the run joins (one per directory).
    pub fn procs_files(&self) -> Vec<String> {
        self.files("cgroup.procs")
    }

    /// The file `name` of each of the cgroup's directories (two controllers mounted
    /// together share one).
    fn files(&self, name: &str) -> Vec<String> {
        let mut files: Vec<String> = Vec::new();
        for (_, dir) in &self.dirs {
            let file = dir.join(name).display().to_string();
            if !files.contains(&file) {
                files.push(file);
            }
        }
        files
    }

    /// Ends the run's cgroup: kills what is left in it and reads what it used; it is
    /// removed soon after, off the run's path ([`super::removal`]).
    pub fn finish(mut self) -> RunEnd {
        self.finished = true;
        let killed_at_end = empty(&self.dirs, self.runner);
        let mut end = read(&self.dirs);
        end.killed_at_end = killed_at_end;
        super::removal::later(std::mem::take(&mut self.dirs));
        end
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // The run never reported its end (it was given up, or its runner never got
        // work): a runner whose thread is in the cgroup goes with the rest, instead of
        // keeping the cgroup busy until it ends by itself.
        let dirs = std::mem::take(&mut self.dirs);
        let clean = move || {
            empty(&dirs, None);
            remove(&dirs);
        };
        // Dropped on a runtime worker (a run's task ended early): not there.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(clean)),
            Err(_) => clean(),
        }
    }
}

/// Kills every process in `dirs` but `runner` until none is left (or [`EMPTY_WAIT`] has
/// passed); returns how many there were at first.
fn empty(dirs: &[(Hierarchy, PathBuf)], runner: Option<i32>) -> usize {
    let pids_in = |dir: &Path| -> Vec<i32> {
        let mut pids = pids_in(dir);
        pids.retain(|pid| Some(*pid) != runner);
        pids
    };
    let first = dirs
        .iter()
        .map(|(_, dir)| pids_in(dir).len())
        .max()
        .unwrap_or(0);
    let until = Instant::now() + EMPTY_WAIT;
    for (hierarchy, dir) in dirs {
        if *hierarchy == Hierarchy::Unified && dir.join("cgroup.kill").exists() {
            if let Err(err) = std::fs::write(dir.join("cgroup.kill"), "1") {
                tracing::warn!(dir = %dir.display(), error = %err, "cannot kill what is left of a run");
            }
        }
        loop {
            let pids = pids_in(dir);
            if pids.is_empty() {
                break;
            }
            if Instant::now() >= until {
                tracing::warn!(dir = %dir.display(), left = pids.len(), "processes of a run survived SIGKILL");
                break;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(POLL);
        }
    }
    first
}

fn pids_in(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .filter(|pid| *pid > 1)
        .collect()
}

/// What the cgroup's files say of the run.
fn read(dirs: &[(Hierarchy, PathBuf)]) -> RunEnd {
    let mut end = RunEnd::default();
    for (hierarchy, dir) in dirs {
        let file = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        match hierarchy {
            Hierarchy::Unified => {
                if let Some(stat) = file("cpu.stat") {
                    end.cpu_user_ms = keyed(&stat, "user_usec").map(|us| us / 1000);
                    end.cpu_system_ms = keyed(&stat, "system_usec").map(|us| us / 1000);
                }
                end.peak_memory_bytes = file("memory.peak").and_then(|text| number(&text));
                end.oom_kills = file("memory.events")
                    .and_then(|text| keyed(&text, "oom_kill"))
                    .unwrap_or(0);
                end.forks_refused = file("pids.events")
                    .and_then(|text| keyed(&text, "max"))
                    .unwrap_or(0);
            }
            Hierarchy::Pids => {
                end.forks_refused = file("pids.events")
                    .and_then(|text| keyed(&text, "max"))
                    .unwrap_or(0);
            }
            Hierarchy::Memory => {
                end.peak_memory_bytes =
                    file("memory.max_usage_in_bytes").and_then(|text| number(&text));
                end.oom_kills = file("memory.oom_control")
                    .and_then(|text| keyed(&text, "oom_kill"))
                    .unwrap_or(0);
            }
            Hierarchy::Cpuacct => {
                let ns = |name: &str| file(name).and_then(|text| number(&text));
                end.cpu_user_ms = ns("cpuacct.usage_user").map(|ns| ns / 1_000_000);
                end.cpu_system_ms = ns("cpuacct.usage_sys").map(|ns| ns / 1_000_000);
            }
            Hierarchy::Cpu => {}
        }
    }
    end
}

fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The value of `key` in a file of `key value` lines.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| number(value)).flatten()
    })
}

/// Removes the directories (a cgroup whose last process just died may still be busy a
/// moment: retried until [`EMPTY_WAIT`]).
pub(super) fn remove(dirs: &[(Hierarchy, PathBuf)]) {
    let until = Instant::now() + EMPTY_WAIT;
    for (_, dir) in dirs {
        loop {
            match std::fs::remove_dir(dir) {
                Ok(()) => break,
                Err(err) if err.kind() == io::ErrorKind::NotFound => break,
                Err(err) if err.raw_os_error() == Some(libc::EBUSY) && Instant::now() < until => {
                    std::thread::sleep(POLL);
                }
                Err(err) => {
                    tracing::warn!(dir = %dir.display(), error = %err, "cannot remove a run's cgroup");
                    break;
                }
            }
        }
    }
}

/// Empties and removes the runs' cgroups a previous service of this `dir_base` left
/// below `parents` (it was killed before their runs ended).
pub fn remove_left_over(parents: &[(Hierarchy, PathBuf)]) {
    for (parent, count) in remove_below(parents) {
        tracing::info!(parent = %parent.display(), count, "removed cgroups of runs a previous service left");
    }
}

/// Empties and removes every cgroup below `parents` (runs' and runners' made ahead);
/// returns each parent that had some, with how many. Blocking.
pub fn remove_below(parents: &[(Hierarchy, PathBuf)]) -> Vec<(PathBuf, usize)> {
    let mut removed = Vec::new();
    for (hierarchy, parent) in parents {
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        let left: Vec<(Hierarchy, PathBuf)> = entries
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
            .map(|entry| (*hierarchy, entry.path()))
            .collect();
        if !left.is_empty() {
            empty(&left, None);
            remove(&left);
            removed.push((parent.clone(), left.len()));
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_files_are_read() {
        let events = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n";
        assert_eq!(keyed(events, "oom_kill"), Some(2));
        assert_eq!(keyed(events, "oom"), Some(1));
        assert_eq!(keyed(events, "max"), Some(3));
        assert_eq!(keyed(events, "absent"), None);
        assert_eq!(number("12345\n"), Some(12345));
        assert_eq!(number("max\n"), None);
    }

    /// A v2 tree stands in as plain files: what is written and read is checked, not the
    /// kernel (these machines mount their controllers as v1, where the tests of the
    /// service run for real).
    #[test]
    fn a_unified_run_cgroup_gets_its_limits_and_is_read_at_its_end() {
        let parent = tempfile::tempdir().expect("temp dir");
        let parents = [(Hierarchy::Unified, parent.path().to_path_buf())];
        let limits = RunLimits {
            pids: Some(64),
            memory: Some(32 << 20),
            cpu_weight: Some(50),
        };
        // The optional files (swap, OOM group, CPU weight) are the kernel's to make:
        // absent here, they are left alone.
        let dir = parent.path().join("job.1.0");
        let cgroup = create(&parents, "job.1.0", &limits).expect("create");
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert_eq!(read("pids.max"), "64");
        assert_eq!(read("memory.max"), (32u64 << 20).to_string());
        assert_eq!(
            cgroup.procs_files(),
            vec![dir.join("cgroup.procs").display().to_string()]
        );
        std::fs::write(
            dir.join("cpu.stat"),
            "usage_usec 9000\nuser_usec 7000\nsystem_usec 2000\n",
        )
        .expect("write");
        std::fs::write(dir.join("memory.peak"), "1048576\n").expect("write");
        std::fs::write(dir.join("memory.events"), "oom 1\noom_kill 1\n").expect("write");
        let end = read_end(&cgroup);
        assert_eq!(end.cpu_user_ms, Some(7));
        assert_eq!(end.cpu_system_ms, Some(2));
        assert_eq!(end.peak_memory_bytes, Some(1 << 20));
        assert_eq!(end.oom_kills, 1);
        // Plain files are no cgroup: what the end cannot remove it leaves.
        std::mem::forget(cgroup);
    }

    fn read_end(cgroup: &RunCgroup) -> RunEnd {
        read(&cgroup.dirs)
    }

    #[test]
    fn a_cgroup_holds_the_limits_last_written_and_no_others() {
        let parent = tempfile::tempdir().expect("temp dir");
        let parents = [(Hierarchy::Pids, parent.path().to_path_buf())];
        let made = RunLimits {
            pids: Some(513),
            ..RunLimits::default()
        };
        let mut cgroup = create(&parents, "ahead.0", &made).expect("create");
        assert!(cgroup.holds(&made));
        let wanted = RunLimits {
            memory: Some(1 << 30),
            ..made
        };
        assert!(!cgroup.holds(&wanted));
        let fewer = RunLimits {
            pids: Some(65),
            ..RunLimits::default()
        };
        assert!(!cgroup.holds(&fewer));
        cgroup.set_limits(&fewer).expect("set");
        assert!(cgroup.holds(&fewer));
        let read = std::fs::read_to_string(parent.path().join("ahead.0/pids.max"));
        assert_eq!(read.expect("read"), "65");
        // Plain files are no cgroup: what the end cannot remove it leaves.
        std::mem::forget(cgroup);
    }

    #[test]
    fn a_v1_cpu_weight_becomes_shares() {
        let dir = tempfile::tempdir().expect("temp dir");
        let limits = RunLimits {
            cpu_weight: Some(100),
            ..RunLimits::default()
        };
        set_limits(Hierarchy::Cpu, dir.path(), &limits).expect("set");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("cpu.shares")).expect("read"),
            "1024"
        );
    }
}
