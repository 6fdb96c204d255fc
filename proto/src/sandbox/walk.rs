//! The walk from `/` to the protected paths that decides where a run's commands may
//! read: every entry beside the way, open (`O_PATH`), with the read rights that fit it.
//!
//! Walking costs an open and two looks per entry (hundreds of entries beside `/etc`,
//! `/var/lib` and `/run` on a server), and it was made by every runner. The runner fork
//! server makes it once ([`Walk::ahead`]) and its runners inherit it with their memory
//! and descriptors, so that a run adds one rule per entry from the open descriptors. A
//! walk is used while the directories on the way are unchanged ([`Walk::is_current`]):
//! an entry created, removed or renamed beside the way changes its directory's
//! modification time, which makes the server walk again before its next fork.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use landlock::{AccessFs, BitFlags, PathBeneath, RulesetCreated, RulesetCreatedAttr as _};
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat};

use super::{Basis, Support, file_type, fitting, kernel_support, read_rights, resolve};

/// A walk is made again after this long even if no directory on the way changed: a
/// bound on what a change the modification times cannot show (a mount over an entry)
/// takes to be seen.
const USED_AT_MOST: Duration = Duration::from_secs(60);

/// The entries that get a read rule for one set of protected paths (see the module).
#[derive(Debug)]
pub struct Walk {
    /// The protected paths as the controller gave them: what this walk is for.
    protected_paths: Vec<String>,
    /// The same, as the kernel sees them ([`resolve`]).
    pub(super) protected: Vec<PathBuf>,
    /// Each entry that gets a read rule: its descriptor, the rights that fit it and its
    /// path (for error messages).
    grants: Vec<(OwnedFd, BitFlags<AccessFs>, PathBuf)>,
    /// The directories walked.
    pub(super) basis: Basis,
    made_at: Instant,
}

impl Walk {
    /// Walks for `protected_paths`. Blocking: an open and a look per entry.
    pub fn new(protected_paths: &[String]) -> Result<Walk, String> {
        let protected: Vec<PathBuf> = protected_paths
            .iter()
            .map(|path| resolve(Path::new(path)))
            .collect();
        let mut basis = Basis::default();
        let grants = walk(&protected, &mut basis)?;
        Ok(Walk {
            protected_paths: protected_paths.to_vec(),
            protected,
            grants,
            basis,
            made_at: Instant::now(),
        })
    }

    /// A walk for the runners a fork server forks: `None` when the kernel enforces no
    /// Landlock (there is nothing to build) or the walk failed (each runner then walks
    /// itself and its run says why).
    pub fn ahead(protected_paths: &[String]) -> Option<Walk> {
        if protected_paths.is_empty() || !matches!(kernel_support(), Support::Abi(_)) {
            return None;
        }
        Walk::new(protected_paths).ok()
    }

    /// Whether this walk is for `protected_paths`.
    pub fn protects(&self, protected_paths: &[String]) -> bool {
        self.protected_paths == protected_paths
    }

    /// Whether a new walk would find the same entries: no directory on the way changed
    /// (nor had changed less than a second before the walk), and the walk is recent.
    /// Blocking: one `lstat` per directory on the way.
    pub fn is_current(&self) -> bool {
        self.made_at.elapsed() < USED_AT_MOST && self.basis.dirs_unchanged()
    }

    /// The paths of the entries that get a read rule.
    #[cfg(test)]
    pub(super) fn granted_paths(&self) -> impl Iterator<Item = &Path> {
        self.grants.iter().map(|(_, _, path)| path.as_path())
    }

    /// Adds a read rule per entry to `ruleset`.
    pub(super) fn grant(&self, ruleset: &mut RulesetCreated) -> Result<(), String> {
        for (fd, rights, path) in &self.grants {
            ruleset
                .add_rule(PathBeneath::new(fd, *rights))
                .map_err(|err| {
                    format!("cannot add the sandbox rule for {}: {err}", path.display())
                })?;
        }
        Ok(())
    }
}

/// The entries beside the way from `/` to the `protected` paths that get a read rule
/// (see the module documentation of `sandbox`); notes the directories walked in `basis`.
fn walk(
    protected: &[PathBuf],
    basis: &mut Basis,
) -> Result<Vec<(OwnedFd, BitFlags<AccessFs>, PathBuf)>, String> {
    let walk_began = SystemTime::now();
    let on_the_way = ancestors(protected);
    if on_the_way.is_empty() {
        if protected.iter().any(|p| p == Path::new("/")) {
            return Ok(Vec::new());
        }
        let root = nix::fcntl::open("/", OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|err| format!("cannot open /: {err}"))?;
        return Ok(vec![(root, read_rights(), PathBuf::from("/"))]);
    }
    let skipped = names_to_skip(&on_the_way, protected);
    let mut grants = Vec::new();
    for dir in &on_the_way {
        // A directory that is gone or was swapped for a link grants nothing: safe.
        let Ok(fd) = open_dir_no_symlinks(dir) else {
            basis.walked(dir, None, walk_began);
            continue;
        };
        // Before the listing: a change made after this look shows in a later one.
        basis.walked(dir, fstat(&fd).ok().as_ref(), walk_began);
        let skip = skipped.get(dir.as_path());
        for name in list(&fd).map_err(|err| format!("cannot list {}: {err}", dir.display()))? {
            if skip.is_some_and(|skip| skip.contains(name.as_os_str())) {
                continue;
            }
            let opened = openat(
                &fd,
                name.as_bytes(),
                OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            );
            let Ok(entry_fd) = opened else {
                // Gone since the listing, or out of reach: nothing to grant.
                continue;
            };
            let Ok(stat) = fstat(&entry_fd) else {
                continue;
            };
            // A symbolic link needs no rule: what counts is where it leads, which is
            // readable or not on its own.
            if file_type(&stat) == SFlag::S_IFLNK {
                continue;
            }
            grants.push((entry_fd, fitting(read_rights(), &stat), dir.join(&name)));
        }
    }
    Ok(grants)
}

/// For each directory on the way, the names in it that get no read rule: the next step
/// towards a protected path (a directory on the way, or the protected path itself). An
/// entry `dir/name` overlaps a protected path exactly when it is one of those, since no
/// directory on the way is below a protected path; so one look-up per entry replaces
/// comparing its path with every protected path.
pub(super) fn names_to_skip<'a>(
    on_the_way: &'a BTreeSet<PathBuf>,
    protected: &'a [PathBuf],
) -> HashMap<&'a Path, HashSet<&'a OsStr>> {
    let mut skipped: HashMap<&Path, HashSet<&OsStr>> = HashMap::new();
    for path in on_the_way.iter().chain(protected) {
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            skipped.entry(parent).or_default().insert(name);
        }
    }
    skipped
}

/// The directories on the way from `/` to the protected paths (`/` included), without
/// those that are protected or below a protected path.
pub(super) fn ancestors(protected: &[PathBuf]) -> BTreeSet<PathBuf> {
    protected
        .iter()
        .flat_map(|path| path.ancestors().skip(1))
        .filter(|dir| !protected.iter().any(|p| dir.starts_with(p)))
        .map(Path::to_path_buf)
        .collect()
}

/// Opens directory `path` for listing, refusing a symbolic link at any step.
fn open_dir_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    let mut fd = nix::fcntl::open(
        "/",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    for part in path.iter().skip(1) {
        fd = openat(
            &fd,
            part.as_bytes(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
    }
    Ok(openat(
        &fd,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The names in directory `fd`, without `.` and `..`.
fn list(fd: &OwnedFd) -> io::Result<Vec<std::ffi::OsString>> {
    let mut dir = nix::dir::Dir::from_fd(fd.try_clone()?)?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    Ok(names)
}
