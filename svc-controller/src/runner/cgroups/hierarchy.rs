//! Where this process's cgroups are: the cgroup file systems mounted here (from
//! `/proc/self/mountinfo`) and this process's place in each (from `/proc/self/cgroup`),
//! joined into the directories that hold its cgroup, one per hierarchy.

use std::path::{Path, PathBuf};

/// The controllers a run's cgroup uses.
pub const CONTROLLERS: [&str; 4] = ["pids", "memory", "cpu", "cpuacct"];

/// A cgroup file system mounted here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub point: PathBuf,
    /// The cgroup of the file system that is the mount's root (`/` unless only a part
    /// is mounted, as in a container).
    pub root: String,
    /// `None` for the unified hierarchy (v2); else the v1 controllers it holds.
    pub controllers: Option<Vec<String>>,
}

/// The cgroup file system mounts in `mountinfo` (its text).
pub fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo.lines().filter_map(mount).collect()
}

/// One line of `mountinfo`: `id parent major:minor root point options [optional...] -
/// fstype source super-options`.
fn mount(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let fields: Vec<&str> = left.split(' ').collect();
    let (root, point) = (fields.get(3)?, fields.get(4)?);
    let mut right = right.split(' ');
    let fstype = right.next()?;
    let super_options = right.nth(1).unwrap_or_default();
    let controllers = match fstype {
        "cgroup2" => None,
        "cgroup" => Some(
            super_options
                .split(',')
                .filter(|option| CONTROLLERS.contains(option))
                .map(str::to_string)
                .collect(),
        ),
        _ => return None,
    };
    Some(Mount {
        point: PathBuf::from(unescape(point)),
        root: unescape(root),
        controllers,
    })
}

/// `mountinfo` writes space, tab, newline and backslash as octal escapes.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|code| u8::from_str_radix(code, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// This process's cgroup in the unified hierarchy (`0::/path`), from `/proc/self/cgroup`.
pub fn unified_path(proc_cgroup: &str) -> Option<String> {
    proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_string)
}

/// This process's cgroup in the v1 hierarchy that holds `controller`.
pub fn legacy_path(proc_cgroup: &str, controller: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|name| name == controller)
            .then(|| path.to_string())
    })
}

/// The directory of the cgroup `path` below `mount`: the mount's root is taken off the
/// path (a container sees its own part of the hierarchy mounted at the usual place).
/// `None` when the cgroup lies outside what is mounted.
pub fn directory(mount: &Mount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let inside = path.strip_prefix(root)?;
    if !(inside.is_empty() || inside.starts_with('/')) {
        return None;
    }
    let relative = inside.trim_start_matches('/');
    if relative.split('/').any(|part| part == "..") {
        return None;
    }
    Some(if relative.is_empty() {
        mount.point.clone()
    } else {
        mount.point.join(relative)
    })
}

/// The smallest `pids.max` of `dir` and its parents up to `top` (the mount point):
/// the task limit the run cgroups below `dir` share with this process. `None`: no limit.
pub fn tasks_limit(dir: &Path, top: &Path) -> Option<u64> {
    let mut limit: Option<u64> = None;
    for ancestor in dir.ancestors() {
        if !ancestor.starts_with(top) {
            break;
        }
        if let Ok(text) = std::fs::read_to_string(ancestor.join("pids.max"))
            && let Ok(value) = text.trim().parse::<u64>()
        {
            limit = Some(limit.map_or(value, |limit| limit.min(value)));
        }
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw
27 25 0:25 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
28 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
29 25 0:27 /machine.slice/box /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
30 25 0:28 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
31 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
";

    #[test]
    fn cgroup_mounts_are_found_with_their_controllers() {
        let mounts = mounts(HYBRID);
        assert_eq!(mounts.len(), 5, "{mounts:?}");
        assert_eq!(mounts[0].controllers, None);
        assert_eq!(mounts[0].point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(
            mounts[2].controllers,
            Some(vec!["cpu".into(), "cpuacct".into()])
        );
        assert_eq!(mounts[3].root, "/machine.slice/box");
        assert_eq!(mounts[4].controllers, Some(vec![]));
    }

    #[test]
    fn escaped_mount_points_are_read_back() {
        let line = "26 25 0:24 / /sys/fs/cgroup/with\\040space rw - cgroup2 cgroup2 rw";
        assert_eq!(
            mounts(line)[0].point,
            PathBuf::from("/sys/fs/cgroup/with space")
        );
    }

    #[test]
    fn the_process_path_is_found_per_hierarchy() {
        let cgroup = "9:name=systemd:/system.slice/svc.service\n8:pids:/system.slice/svc.service\n\
                      4:cpu,cpuacct:/\n0::/system.slice/svc.service\n";
        assert_eq!(
            unified_path(cgroup).as_deref(),
            Some("/system.slice/svc.service")
        );
        assert_eq!(
            legacy_path(cgroup, "pids").as_deref(),
            Some("/system.slice/svc.service")
        );
        assert_eq!(legacy_path(cgroup, "cpuacct").as_deref(), Some("/"));
        assert_eq!(legacy_path(cgroup, "memory"), None);
    }

    #[test]
    fn the_mount_root_is_taken_off_the_path() {
        let mounts = mounts(HYBRID);
        let memory = &mounts[3];
        assert_eq!(
            directory(memory, "/machine.slice/box/system.slice/svc.service"),
            Some(PathBuf::from(
                "/sys/fs/cgroup/memory/system.slice/svc.service"
            ))
        );
        assert_eq!(
            directory(memory, "/machine.slice/box"),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(directory(memory, "/machine.slice/boxer"), None);
        assert_eq!(directory(memory, "/elsewhere"), None);
        assert_eq!(
            directory(&mounts[1], "/"),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
        assert_eq!(directory(&mounts[1], "/a/../b"), None);
    }

    #[test]
    fn the_tasks_limit_is_the_smallest_of_the_ancestors() {
        let top = tempfile::tempdir().expect("temp dir");
        let unit = top.path().join("system.slice/svc.service");
        std::fs::create_dir_all(&unit).expect("dirs");
        std::fs::write(top.path().join("system.slice/pids.max"), "900\n").expect("write");
        std::fs::write(unit.join("pids.max"), "max\n").expect("write");
        assert_eq!(tasks_limit(&unit, top.path()), Some(900));
        std::fs::write(unit.join("pids.max"), "300\n").expect("write");
        assert_eq!(tasks_limit(&unit, top.path()), Some(300));
        assert_eq!(tasks_limit(top.path(), top.path()), None);
    }
}
