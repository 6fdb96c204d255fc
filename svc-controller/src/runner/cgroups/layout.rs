//! The runs' parent cgroups of this service, found and made at start-up: one directory in
//! the unified hierarchy (v2), or one per v1 hierarchy that holds a controller runs use.

use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::RunLimits;
use super::hierarchy::{self, Mount};
use super::run::{self, Hierarchy, RunCgroup};

/// What the limits are without cgroups.
pub const FALLBACK: &str = "limit_memory is each process's RLIMIT_DATA and a limit_pids that \
                            is set the RLIMIT_NPROC of the job's user";

/// Where runs' cgroups are made.
#[derive(Debug)]
pub struct Layout {
    version: Version,
    /// The parent of the runs' cgroups in each hierarchy used.
    parents: Vec<(Hierarchy, PathBuf)>,
    /// The task limit of the runs together, when the service has one.
    runs_tasks: Option<u64>,
    /// The service's cgroup (v2) or the controllers' (v1), for the description.
    place: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Unified,
    Legacy,
}

/// What was found, before anything is made.
struct Found {
    version: Version,
    /// The service's cgroup directory in each hierarchy to use.
    own: Vec<(Hierarchy, PathBuf, PathBuf)>,
    place: String,
}

impl Layout {
    pub fn set_up(instance: &str, tasks_kept: u64) -> Result<Layout, String> {
        let found = find()?;
        if found.version == Version::Unified {
            let own = &found.own[0].1;
            let enabled = take_over_unified(own, instance)?;
            let parent = own.join(format!("svc-runs.{instance}"));
            make_dir(&parent)?;
            run::remove_left_over(&[(Hierarchy::Unified, parent.clone())]);
            write_control(&parent.join("cgroup.subtree_control"), &enabled)?;
            let runs_tasks = limit_runs_tasks(&parent, own, &found.own[0].2, tasks_kept);
            return Ok(Layout {
                version: Version::Unified,
                parents: vec![(Hierarchy::Unified, parent)],
                runs_tasks,
                place: found.place,
            });
        }
        let mut parents = Vec::new();
        let mut runs_tasks = None;
        for (hierarchy, own, top) in &found.own {
            let parent = own.join(format!("svc-runs.{instance}"));
            make_dir(&parent)?;
            if *hierarchy == Hierarchy::Pids {
                runs_tasks = limit_runs_tasks(&parent, own, top, tasks_kept);
            }
            parents.push((*hierarchy, parent));
        }
        run::remove_left_over(&parents);
        Ok(Layout {
            version: Version::Legacy,
            parents,
            runs_tasks,
            place: found.place,
        })
    }

    pub fn inspect() -> Result<String, String> {
        let found = find()?;
        let parents = found
            .own
            .iter()
            .map(|(hierarchy, own, _)| (*hierarchy, own.clone()))
            .collect();
        Ok(Layout {
            version: found.version,
            parents,
            runs_tasks: None,
            place: found.place,
        }
        .describe())
    }

    /// The mode in a line: version, where, and which key becomes which limit.
    pub fn describe(&self) -> String {
        let has = |h: Hierarchy| self.parents.iter().any(|(p, _)| *p == h);
        let unified = self.version == Version::Unified;
        let mut limits = Vec::new();
        if unified || has(Hierarchy::Pids) {
            limits.push("limit_pids as pids.max");
        }
        if unified {
            limits.push("limit_memory as memory.max");
            limits.push("cpu_weight as cpu.weight");
        } else {
            if has(Hierarchy::Memory) {
                limits.push("limit_memory as memory.limit_in_bytes");
            }
            if has(Hierarchy::Cpu) {
                limits.push("cpu_weight as cpu.shares");
            }
        }
        let tasks = self.runs_tasks.map_or(String::new(), |limit| {
            format!("; runs together take at most {limit} tasks")
        });
        let version = if unified { "v2" } else { "v1" };
        format!(
            "{version} ({}): each run in a cgroup of its own, {}{tasks}",
            self.place,
            limits.join(", ")
        )
    }

    pub fn has_memory(&self) -> bool {
        self.parents
            .iter()
            .any(|(h, _)| matches!(h, Hierarchy::Unified | Hierarchy::Memory))
    }

    pub fn has_pids(&self) -> bool {
        self.parents
            .iter()
            .any(|(h, _)| matches!(h, Hierarchy::Unified | Hierarchy::Pids))
    }

    pub fn parents(&self) -> Vec<PathBuf> {
        self.parents.iter().map(|(_, dir)| dir.clone()).collect()
    }

    /// Empties and removes every cgroup below the parents ([`run::remove_below`]).
    pub fn remove_runs(&self) -> Vec<(PathBuf, usize)> {
        run::remove_below(&self.parents)
    }

    pub fn create_run(&self, name: &str, limits: &RunLimits) -> Result<RunCgroup, String> {
        run::create(&self.parents, name, limits)
    }

    /// Whether a single thread may join a cgroup (v1), which lets a runner's thread
    /// join the run's cgroup ahead of its commands ([`super::RunCgroups::create_ahead`]).
    pub fn joins_by_thread(&self) -> bool {
        self.version == Version::Legacy
    }
}

/// Finds the hierarchy to use: v2 when this process's cgroup there is delegated and has
/// controllers, else the writable v1 hierarchies of `pids`, `memory`, `cpu`, `cpuacct`.
fn find() -> Result<Found, String> {
    let read = |path: &str| {
        std::fs::read_to_string(path).map_err(|err| format!("cannot read {path}: {err}"))
    };
    let mounts = hierarchy::mounts(&read("/proc/self/mountinfo")?);
    let proc_cgroup = read("/proc/self/cgroup")?;
    let unified = find_unified(&mounts, &proc_cgroup);
    let unified_why = match unified {
        Ok(found) => return Ok(found),
        Err(why) => why,
    };
    let mut own = Vec::new();
    let mut refused = Vec::new();
    for (hierarchy, name) in [
        (Hierarchy::Pids, "pids"),
        (Hierarchy::Memory, "memory"),
        (Hierarchy::Cpu, "cpu"),
        (Hierarchy::Cpuacct, "cpuacct"),
    ] {
        let Some(mount) = mounts.iter().find(|m| {
            m.controllers
                .as_ref()
                .is_some_and(|c| c.iter().any(|c| c == name))
        }) else {
            continue;
        };
        let Some(dir) = hierarchy::legacy_path(&proc_cgroup, name)
            .and_then(|path| hierarchy::directory(mount, &path))
        else {
            refused.push(format!("{name}: this process's cgroup is not mounted"));
            continue;
        };
        if let Err(err) = writable(&dir) {
            refused.push(format!("{name}: {} is not writable ({err})", dir.display()));
            continue;
        }
        own.push((hierarchy, dir, mount.point.clone()));
    }
    if !own
        .iter()
        .any(|(h, _, _)| matches!(h, Hierarchy::Pids | Hierarchy::Memory))
    {
        refused.insert(0, unified_why);
        return Err(refused.join("; "));
    }
    let place = own
        .iter()
        .map(|(_, dir, _)| dir.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Found {
        version: Version::Legacy,
        own,
        place,
    })
}

/// The unified hierarchy, when this process's cgroup in it has controllers and is
/// delegated to it; else why not.
fn find_unified(mounts: &[Mount], proc_cgroup: &str) -> Result<Found, String> {
    let Some(mount) = mounts.iter().find(|m| m.controllers.is_none()) else {
        return Err("no cgroup v2 hierarchy is mounted".into());
    };
    let path = hierarchy::unified_path(proc_cgroup).ok_or("this process has no cgroup v2 path")?;
    let own = hierarchy::directory(mount, &path)
        .ok_or_else(|| format!("this process's cgroup v2 {path} is not mounted"))?;
    let controllers = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
    let controllers: Vec<&str> = controllers.split_whitespace().collect();
    if !controllers.contains(&"pids") && !controllers.contains(&"memory") {
        return Err(format!(
            "cgroup v2 {path} offers neither pids nor memory (here they are on v1 hierarchies)"
        ));
    }
    let namespace_root = own == mount.point;
    if !namespace_root && !delegated(&own) {
        return Err(format!(
            "cgroup v2 {path} is not delegated to the service (its unit needs Delegate=yes)"
        ));
    }
    writable(&own).map_err(|err| format!("cgroup v2 {} is not writable: {err}", own.display()))?;
    Ok(Found {
        version: Version::Unified,
        own: vec![(Hierarchy::Unified, own, mount.point.clone())],
        place: format!("delegated {path}"),
    })
}

/// Whether systemd marked `dir` delegated (`trusted.delegate` or `user.delegate` = 1).
fn delegated(dir: &Path) -> bool {
    ["trusted.delegate", "user.delegate"]
        .iter()
        .any(|name| xattr_is_one(dir, name))
}

fn xattr_is_one(dir: &Path, name: &str) -> bool {
    let (Ok(path), Ok(name)) = (
        std::ffi::CString::new(dir.as_os_str().as_bytes()),
        std::ffi::CString::new(name),
    ) else {
        return false;
    };
    let mut value = [0u8; 8];
    // SAFETY: both names are NUL-terminated and `value` is writable for its length.
    let len = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        )
    };
    usize::try_from(len).is_ok_and(|len| &value[..len] == b"1")
}

fn writable(dir: &Path) -> io::Result<()> {
    nix::unistd::access(&dir.join("cgroup.procs"), nix::unistd::AccessFlags::W_OK)
        .map_err(io::Error::from)
}

/// Moves every process of the delegated `own` cgroup into a leaf of this service (a
/// cgroup with children holds none) and enables the controllers runs use for its
/// children; returns those enabled (`+pids +memory +cpu`, as far as offered).
fn take_over_unified(own: &Path, instance: &str) -> Result<Vec<String>, String> {
    let leaf = own.join(format!("svc-controller.{instance}"));
    make_dir(&leaf)?;
    let procs = std::fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
    let mut moving: Vec<String> = procs.lines().map(str::to_string).collect();
    moving.push(std::process::id().to_string());
    for pid in moving {
        // A process that ended meanwhile (ESRCH) is not in the way any more.
        match std::fs::write(leaf.join("cgroup.procs"), &pid) {
            Ok(()) => {}
            Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {}
            Err(err) => {
                return Err(format!(
                    "cannot move process {pid} into {}: {err}",
                    leaf.display()
                ));
            }
        }
    }
    let offered = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
    let enabled: Vec<String> = ["pids", "memory", "cpu"]
        .iter()
        .filter(|name| offered.split_whitespace().any(|offered| offered == **name))
        .map(|name| format!("+{name}"))
        .collect();
    write_control(&own.join("cgroup.subtree_control"), &enabled)?;
    Ok(enabled)
}

fn write_control(file: &Path, enabled: &[String]) -> Result<(), String> {
    for controller in enabled {
        std::fs::write(file, controller)
            .map_err(|err| format!("cannot write {controller} to {}: {err}", file.display()))?;
    }
    Ok(())
}

fn make_dir(dir: &Path) -> Result<(), String> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(format!("cannot make the cgroup {}: {err}", dir.display())),
    }
}

/// Gives the runs' `parent` a task limit that keeps [`TASKS_KEPT`](super::TASKS_KEPT)
/// (or half, when the service's limit is small) of the service's `own` limit for itself.
fn limit_runs_tasks(parent: &Path, own: &Path, top: &Path, kept: u64) -> Option<u64> {
    let limit = hierarchy::tasks_limit(own, top)?;
    let runs = limit.saturating_sub(kept).max(limit / 2).max(1);
    match std::fs::write(parent.join("pids.max"), runs.to_string()) {
        Ok(()) => Some(runs),
        Err(err) => {
            tracing::warn!(error = %err, dir = %parent.display(), "cannot limit the tasks of the runs together");
            None
        }
    }
}
