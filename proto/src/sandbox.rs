//! The file-system sandbox of a run's commands: one Landlock ruleset, applied in each
//! command's process between fork and exec.
//!
//! Landlock allows only what a rule grants, and a rule grants its rights on a whole
//! hierarchy. So:
//!
//! - **Writing** (and everything else: creating, removing, renaming, truncating,
//!   device ioctls) is granted below each writable path of the request (the working
//!   directory, the job's temporary directories, the job's `write_paths`), and on
//!   `/dev/null`, `/dev/zero`, `/dev/full` and `/dev/tty`.
//! - **Reading** (reading files, listing directories, executing, connecting to a Unix
//!   socket) is granted everywhere except below the protected paths. "Everything except
//!   P" is not a rule Landlock has: the builder walks from `/` down to each protected
//!   path and grants reading on every entry beside the way that is neither a protected
//!   path nor on the way to one. The directories on the way get no rule: they can be
//!   passed through (Landlock does not restrict path walks) but not listed. The walk is
//!   a snapshot: an entry created later beside one of those directories is not
//!   readable.
//! - The files of the job's own request bodies' directory, below a protected path, are
//!   readable (not listable).
//!
//! Who builds it: the runner, for a run whose request carries only the [`Sandbox`]
//! (the service's part while it waits for its work, [`prepare_base`], from the walk its
//! fork server made and it inherited when there is one: [`Walk`]); or the
//! controller, once for a busy job, kept while it is still what a new build would give
//! ([`Prepared::is_current`]) and sent to each of the job's runners with the request
//! ([`crate::fdpass`]).
//!
//! The ruleset handles every file-system right this build knows (Landlock ABI up to
//! [`NEWEST`]); a kernel with an older ABI enforces what it knows (best effort), one
//! without Landlock enforces nothing. Which of the three happened is the summary line
//! logged for the run. Nothing is opened or allocated after the fork: the child only
//! calls `landlock_restrict_self` on the prepared ruleset, after `no_new_privs`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use landlock::{
    ABI, Access as _, AccessFs, BitFlags, CompatLevel, Compatible as _, PathBeneath, Ruleset,
    RulesetAttr as _, RulesetCreated, RulesetCreatedAttr as _, Scope, make_bitflags,
};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};

mod walk;

pub use walk::Walk;
use walk::ancestors;

/// The newest Landlock ABI this build knows; every file-system right up to it is handled.
pub const NEWEST: ABI = ABI::V10;

/// Character devices a shell needs, and what the commands may do with each.
const DEVICES: &[(&str, bool)] = &[
    ("/dev/null", true),
    ("/dev/zero", true),
    ("/dev/full", true),
    ("/dev/tty", true),
    ("/dev/random", false),
    ("/dev/urandom", false),
];

/// The ruleset of a run, ready to be applied to each command.
#[derive(Debug)]
pub struct Prepared {
    /// The Landlock ruleset; `None` when the kernel enforces none.
    ruleset: Option<OwnedFd>,
    /// One line for the run's log: what is enforced, what is writable, what is not
    /// readable.
    pub summary: String,
    /// What the rules were built from.
    basis: Basis,
}

impl Prepared {
    /// A ruleset built elsewhere (by the controller, sent with the request), with its
    /// summary line.
    pub fn attached(ruleset: OwnedFd, summary: String) -> Prepared {
        Prepared {
            ruleset: Some(ruleset),
            summary,
            basis: Basis::default(),
        }
    }

    /// The ruleset's descriptor, for [`restrict`] in each command's process.
    pub fn ruleset_fd(&self) -> Option<RawFd> {
        self.ruleset.as_ref().map(|fd| fd.as_raw_fd())
    }

    /// The ruleset's descriptor, to send to a runner with its request.
    pub fn ruleset(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd as _;
        self.ruleset.as_ref().map(|fd| fd.as_fd())
    }

    /// Whether this ruleset may serve more than the run it was built for: no directory
    /// on the way had changed less than a second before the walk ([`Prepared::is_current`]
    /// is false for it from the start otherwise).
    pub fn is_reusable(&self) -> bool {
        !self.basis.unsettled
    }

    /// Whether a new build would grant the same: every directory on the way to the
    /// protected paths is the one walked, unchanged since (its modification time), and
    /// changed no later than a second before the walk began (a change within the same
    /// tick of the file system's clock would not show); every path a rule was added for
    /// (or found missing) is still the same file (or still missing). Blocking: one
    /// `stat` per path, no walk.
    pub fn is_current(&self) -> bool {
        self.basis.is_current()
    }
}

/// How long before the walk a directory on the way must have last changed for a ruleset
/// to be reused ([`Prepared::is_current`]): file-system clocks tick coarsely, so a change
/// right before the walk may carry the same time as one right after.
const SETTLED: Duration = Duration::from_secs(1);

/// What a ruleset was built from ([`Prepared::is_current`]).
#[derive(Debug, Clone, Default)]
struct Basis {
    /// A directory on the way changed too shortly before the walk, or a look failed:
    /// the ruleset is for one run only.
    unsettled: bool,
    /// The directories walked, by path: their identity and modification time then
    /// (`None`: missing or not a directory reached without links).
    walked: Vec<(PathBuf, Option<DirMark>)>,
    /// The paths a rule was added for, or that were found missing: their identity then.
    granted: Vec<(PathBuf, Option<(u64, u64)>)>,
}

impl Basis {
    fn is_current(&self) -> bool {
        self.dirs_unchanged()
            && self.granted.iter().all(|(path, then)| {
                let now = nix::sys::stat::stat(path.as_path())
                    .ok()
                    .map(|stat| identity(&stat));
                now == *then
            })
    }

    /// Whether every directory walked is still the one walked, unchanged since, and had
    /// changed no later than a second before the walk began.
    fn dirs_unchanged(&self) -> bool {
        !self.unsettled
            && self.walked.iter().all(|(path, then)| {
                let now = nix::sys::stat::lstat(path.as_path())
                    .ok()
                    .filter(is_dir)
                    .map(|stat| dir_mark(&stat));
                now == *then
            })
    }

    /// Notes the directory `path` as walked (`stat`: what its descriptor showed).
    fn walked(&mut self, path: &Path, stat: Option<&FileStat>, walk_began: SystemTime) {
        let stat = stat.filter(|stat| is_dir(stat));
        if stat.is_some_and(|stat| !settled_at(stat, walk_began)) {
            self.unsettled = true;
        }
        self.walked.push((path.to_path_buf(), stat.map(dir_mark)));
    }

    /// Notes `path` as granted (`stat`: what it was then; `None`: missing).
    fn granted(&mut self, path: &Path, stat: Option<&FileStat>) {
        self.granted.push((path.to_path_buf(), stat.map(identity)));
    }
}

/// Whether the object `stat` describes last changed at least [`SETTLED`] before `at`
/// (a time it cannot tell counts as not).
fn settled_at(stat: &FileStat, at: SystemTime) -> bool {
    let changed = u64::try_from(stat.st_mtime)
        .ok()
        .zip(u32::try_from(stat.st_mtime_nsec).ok())
        .map(|(sec, nsec)| SystemTime::UNIX_EPOCH + Duration::new(sec, nsec));
    changed.is_some_and(|changed| changed + SETTLED <= at)
}

fn identity(stat: &FileStat) -> (u64, u64) {
    (stat.st_dev, stat.st_ino)
}

/// A directory's device, inode and modification time (seconds, nanoseconds).
type DirMark = (u64, u64, i64, i64);

fn dir_mark(stat: &FileStat) -> DirMark {
    (stat.st_dev, stat.st_ino, stat.st_mtime, stat.st_mtime_nsec)
}

/// What the running kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Support {
    /// Landlock with this ABI version.
    Abi(i32),
    /// Built in but not enabled at boot (`EOPNOTSUPP`).
    Disabled,
    /// Not built into the kernel (`ENOSYS`).
    Missing,
    /// Refused, by a system call filter for instance (`EPERM`).
    Refused(Errno),
}

/// The Landlock ABI of the running kernel.
fn kernel_support() -> Support {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call only returns
    // the ABI version; it reads and writes no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version > 0 {
        return Support::Abi(i32::try_from(version).unwrap_or(i32::MAX));
    }
    match Errno::last() {
        Errno::EOPNOTSUPP => Support::Disabled,
        Errno::ENOSYS => Support::Missing,
        errno => Support::Refused(errno),
    }
}

/// The part of a run's ruleset that depends on the service alone: reading everywhere
/// but below the protected paths, the walk from `/` that costs most of the ruleset.
/// A runner is started ahead of its work and learns the protected paths in the
/// controller's `Welcome`, so it builds this while it waits; [`prepare`] then adds the
/// run's own rules when the work comes. The walk is thus a snapshot taken when the
/// runner started, shortly before its run.
pub struct Base {
    /// The protected paths as the controller gave them: what this was built for.
    protected_paths: Vec<String>,
    /// The ruleset so far, or why none is enforced; an error when it could not be built.
    built: Result<Built, String>,
}

impl std::fmt::Debug for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Base")
            .field("protected_paths", &self.protected_paths)
            .field("enforced", &matches!(self.built, Ok(Built::Ruleset { .. })))
            .finish()
    }
}

enum Built {
    /// A ruleset that grants reading everywhere but below `protected`.
    Ruleset {
        ruleset: RulesetCreated,
        abi: i32,
        /// The protected paths as the kernel sees them ([`resolve`]).
        protected: Vec<PathBuf>,
        /// The walk's directories.
        basis: Basis,
    },
    /// The kernel enforces nothing; the summary line of the run.
    NotEnforced(Prepared),
}

/// Builds the part of the ruleset that `protected_paths` decide (see [`Base`]).
pub fn prepare_base(protected_paths: &[String]) -> Base {
    prepare_base_from(protected_paths, None)
}

/// [`prepare_base`] from `walk` when it is for the same protected paths (a runner forked
/// by the fork server inherits the server's: one rule per entry, no walk), else from a
/// walk made now.
pub fn prepare_base_from(protected_paths: &[String], walk: Option<&Walk>) -> Base {
    Base {
        protected_paths: protected_paths.to_vec(),
        built: build_base(protected_paths, walk),
    }
}

fn build_base(protected_paths: &[String], walk: Option<&Walk>) -> Result<Built, String> {
    let abi = match kernel_support() {
        Support::Abi(abi) => abi,
        Support::Disabled => {
            return Ok(Built::NotEnforced(not_enforced(
                "Landlock is not enabled in this kernel (see lsm= at boot)",
            )));
        }
        Support::Missing => {
            return Ok(Built::NotEnforced(not_enforced(
                "this kernel has no Landlock",
            )));
        }
        Support::Refused(errno) => {
            return Ok(Built::NotEnforced(not_enforced(&format!(
                "Landlock is refused here ({}: a system call filter?)",
                errno.desc()
            ))));
        }
    };
    // Scoped (ABI 6 and later): a command signals, and connects to abstract Unix
    // sockets of, only processes of its own domain, its own descendants; not the runner,
    // nor another run's processes, whatever its user may otherwise reach.
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(NEWEST))
        .and_then(|ruleset| ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(Ruleset::create);
    let mut ruleset = match ruleset {
        Ok(ruleset) => ruleset,
        // A system call filter can refuse Landlock where the kernel has it.
        Err(err) => {
            return Ok(Built::NotEnforced(not_enforced(&format!(
                "cannot create a ruleset: {err}"
            ))));
        }
    };
    let made_now;
    let walk = match walk.filter(|walk| walk.protects(protected_paths)) {
        Some(walk) => walk,
        None => {
            made_now = Walk::new(protected_paths)?;
            &made_now
        }
    };
    walk.grant(&mut ruleset)?;
    Ok(Built::Ruleset {
        ruleset,
        abi,
        protected: walk.protected.clone(),
        basis: walk.basis.clone(),
    })
}

/// Whether every directory on the way to the protected paths of `spec` last changed at
/// least a second ago, so that a ruleset built now may be reused ([`Prepared::is_current`]):
/// one `lstat` per directory, no walk. A directory that cannot be looked at counts as
/// settled (the build then finds what it finds). Blocking.
pub fn is_settled(spec: &crate::Sandbox) -> bool {
    // The directories the walk would take: those on the way to the resolved paths.
    let protected: Vec<PathBuf> = spec
        .protected_paths
        .iter()
        .map(|path| resolve(Path::new(path)))
        .collect();
    let now = SystemTime::now();
    ancestors(&protected)
        .iter()
        .all(|dir| nix::sys::stat::lstat(dir.as_path()).map_or(true, |stat| settled_at(&stat, now)))
}

/// Builds the ruleset of `spec`, on `base` when it was built for the same protected
/// paths (else anew). An error means the sandbox could not be built as asked (a writable
/// path that leads into a protected one, a failing system call): the run must not go on
/// without it. A kernel without Landlock is not an error: the summary says that nothing
/// is enforced.
pub fn prepare(spec: &crate::Sandbox, base: Option<Base>) -> Result<Prepared, String> {
    let base = match base {
        Some(base) if base.protected_paths == spec.protected_paths => base,
        _ => prepare_base(&spec.protected_paths),
    };
    let (mut ruleset, abi, protected, mut basis) = match base.built? {
        Built::NotEnforced(prepared) => return Ok(prepared),
        Built::Ruleset {
            ruleset,
            abi,
            protected,
            basis,
        } => (ruleset, abi, protected, basis),
    };
    let mut notes = Vec::new();
    for path in &spec.write_paths {
        if !allow_writing(&mut ruleset, Path::new(path), &protected, &mut basis)? {
            notes.push(format!("{path} does not exist"));
        }
    }
    for (device, writable) in DEVICES {
        allow_device(&mut ruleset, Path::new(device), *writable, &mut basis)?;
    }
    for dir in &spec.readable_dirs {
        allow_reading_files_below(&mut ruleset, Path::new(dir), &mut basis)?;
    }
    let ruleset: Option<OwnedFd> = ruleset.into();
    if ruleset.is_none() {
        return Ok(not_enforced("Landlock refused the ruleset"));
    }
    let writable = spec.write_paths.join(", ");
    let unreadable: Vec<String> = protected.iter().map(|p| p.display().to_string()).collect();
    let mut summary = format!(
        "sandbox: landlock ABI {abi}, {}{}; writable: {writable}; unreadable: {}",
        level(abi),
        scoped(abi),
        unreadable.join(", ")
    );
    if !notes.is_empty() {
        summary.push_str(&format!(" ({})", notes.join("; ")));
    }
    Ok(Prepared {
        ruleset,
        summary,
        basis,
    })
}

fn not_enforced(why: &str) -> Prepared {
    Prepared {
        ruleset: None,
        basis: Basis::default(),
        summary: format!(
            "sandbox: not enforced: {why}; the commands may read and write whatever their \
             user may"
        ),
    }
}

/// "fully enforced", or which rights the kernel's ABI `abi` does not restrict.
fn level(abi: i32) -> String {
    let missing = AccessFs::from_all(NEWEST) & !AccessFs::from_all(ABI::from(abi));
    if missing.is_empty() {
        return "fully enforced".into();
    }
    let names: Vec<&str> = missing.iter().map(right_name).collect();
    format!(
        "partially enforced (this kernel does not restrict {})",
        names.join(", ")
    )
}

/// What the summary says of the scopes: ABI 6 brought the signal and abstract Unix
/// socket scopes.
fn scoped(abi: i32) -> &'static str {
    if abi >= 6 {
        ", signals and abstract Unix sockets scoped to the command"
    } else {
        ", signals and abstract Unix sockets not scoped (this kernel has no Landlock scopes)"
    }
}

fn right_name(right: AccessFs) -> &'static str {
    match right {
        AccessFs::Refer => "linking and renaming across directories",
        AccessFs::Truncate => "truncation",
        AccessFs::IoctlDev => "device ioctls",
        AccessFs::ResolveUnix => "connecting to Unix sockets",
        _ => "some rights",
    }
}

/// Everything, for a writable hierarchy.
fn all_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(NEWEST)
}

/// Reading, listing, executing, and connecting to a Unix socket (which the commands
/// could do before there was a sandbox; the runner's own socket is in a protected
/// directory).
fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::from_read(NEWEST) | AccessFs::ResolveUnix
}

/// `rights` narrowed to what applies to the object `stat` describes: a rule on a file
/// with directory rights is refused by the kernel.
fn fitting(rights: BitFlags<AccessFs>, stat: &FileStat) -> BitFlags<AccessFs> {
    if is_dir(stat) {
        rights
    } else {
        rights & AccessFs::from_file(NEWEST)
    }
}

fn add(
    ruleset: &mut RulesetCreated,
    fd: OwnedFd,
    rights: BitFlags<AccessFs>,
    what: &Path,
) -> Result<(), String> {
    ruleset
        .add_rule(PathBeneath::new(fd, rights))
        .map(drop)
        .map_err(|err| format!("cannot add the sandbox rule for {}: {err}", what.display()))
}

/// Grants everything below `path`; false when it does not exist. A path that leads
/// elsewhere through a symbolic link must not lead into, onto or above a protected one:
/// a job that may replace a directory of its `write_paths` with a link would otherwise
/// open the controller's state to its next run.
fn allow_writing(
    ruleset: &mut RulesetCreated,
    path: &Path,
    protected: &[PathBuf],
    basis: &mut Basis,
) -> Result<bool, String> {
    let fd = match nix::fcntl::open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => {
            basis.granted(path, None);
            return Ok(false);
        }
        Err(err) => return Err(format!("cannot open {}: {err}", path.display())),
    };
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|err| format!("cannot tell where {} leads: {err}", path.display()))?;
    if real != path {
        if let Some(hit) = protected.iter().find(|p| overlaps(&real, p)) {
            return Err(format!(
                "the writable path {} leads to {}, which is or holds the protected {}: \
                 not running the commands",
                path.display(),
                real.display(),
                hit.display()
            ));
        }
    }
    let stat = fstat(&fd).map_err(|err| format!("cannot stat {}: {err}", path.display()))?;
    basis.granted(path, Some(&stat));
    add(ruleset, fd, fitting(all_rights(), &stat), path)?;
    Ok(true)
}

/// Grants reading (and writing, when `writable`) on a character device, when it is one.
fn allow_device(
    ruleset: &mut RulesetCreated,
    path: &Path,
    writable: bool,
    basis: &mut Basis,
) -> Result<(), String> {
    let Ok(fd) = nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        basis.granted(path, None);
        return Ok(());
    };
    let Ok(stat) = fstat(&fd) else {
        basis.unsettled = true;
        return Ok(());
    };
    basis.granted(path, Some(&stat));
    if file_type(&stat) != SFlag::S_IFCHR {
        return Ok(());
    }
    let rights = if writable {
        make_bitflags!(AccessFs::{ReadFile | WriteFile | Truncate | IoctlDev})
    } else {
        make_bitflags!(AccessFs::{ReadFile | IoctlDev})
    };
    add(ruleset, fd, rights, path)
}

/// Grants reading the files below directory `path` (not listing it), when it exists
/// and is a directory reached without following a symbolic link at its end.
fn allow_reading_files_below(
    ruleset: &mut RulesetCreated,
    path: &Path,
    basis: &mut Basis,
) -> Result<(), String> {
    let fd = match nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => {
            basis.granted(path, None);
            return Ok(());
        }
        Err(err) => return Err(format!("cannot open {}: {err}", path.display())),
    };
    let stat = fstat(&fd).map_err(|err| format!("cannot stat {}: {err}", path.display()))?;
    basis.granted(path, Some(&stat));
    add(ruleset, fd, AccessFs::ReadFile.into(), path)
}

/// True when `a` and `b` are the same path or one is below the other.
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `path` as the kernel sees it: the longest part that exists with its symbolic links
/// resolved, followed by the rest as given.
fn resolve(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest: Vec<&OsStr> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

fn file_type(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

fn is_dir(stat: &FileStat) -> bool {
    file_type(stat) == SFlag::S_IFDIR
}

/// The Landlock ABI version this kernel offers; `None` without Landlock (not built in,
/// not enabled at boot, or refused by a system call filter).
pub fn kernel_abi() -> Option<u32> {
    match kernel_support() {
        Support::Abi(abi) => u32::try_from(abi).ok(),
        Support::Disabled | Support::Missing | Support::Refused(_) => None,
    }
}

/// Adds to `ruleset` a rule that grants reading (files, listing, executing) below the
/// directory open as `dir`: a run's own `/proc`, mounted after the ruleset was built (the
/// walk granted reading on the host's, a different file system). A kept ruleset shared by
/// a busy job's runs gets one such rule per run until it is rebuilt (the controller
/// sends one with a bounded number of runs).
pub fn allow_reading_below(ruleset: RawFd, dir: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    /// `struct landlock_path_beneath_attr` (packed, as in the kernel's header).
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = PathBeneathAttr {
        allowed_access: (AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir).bits(),
        parent_fd: dir.as_raw_fd(),
    };
    // SAFETY: the attribute is a local of the layout the kernel expects, read during the
    // call only; the descriptors are checked by the kernel.
    let result = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Applies the ruleset to the calling (child) process; `no_new_privs` must be set.
/// Async-signal-safe: one system call, no allocation.
pub fn restrict(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: integer arguments only; the kernel checks the descriptor.
    let result = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;
