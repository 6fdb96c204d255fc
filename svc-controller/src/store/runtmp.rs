//! The temporary directory of each run: `$dir_base/var/lib/svc/tmp/<id>/<counter>`.
//!
//! The controller creates it before the runner gets the work (mode 0700, handed to the
//! job's user), the commands get it as `TMPDIR`, and the controller empties it when the
//! run ends; at start it removes what runs interrupted by a crash left there. The parent
//! directory and each job's directory in it belong to root (mode 0711): a job's user
//! reaches its own run's directory, lists nobody's, and cannot rename or replace any of
//! them. The job's directory stays from one run to the next, so that the job's sandbox,
//! which grants writing below it, is the same for each run; and so does, renamed, the
//! directory of a run once emptied (the job's spare): a new directory costs an inode
//! taken and, at its removal, one freed, work on the way to each run's start.
//!
//! Removal works without CAP_DAC_OVERRIDE (which the packaged unit does not grant),
//! whatever the job left: directories of its user with any mode, symbolic links, deep
//! trees. Each directory is first taken over (owner set to the controller with
//! CAP_CHOWN, mode 0700), so that from then on only the controller may change it; then
//! it is emptied. No operation follows a symbolic link, and the walk holds two
//! descriptors whatever the depth: a subdirectory that is not empty has its entries
//! moved up into the run's directory, which is emptied again until nothing is left.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, SFlag, fchmodat, fstatat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchownat, unlinkat};
use proto::Credentials;

use crate::config::MainConfig;

/// Mode of the directory that holds the runs' directories.
const PARENT_MODE: u32 = 0o711;
/// Mode of a run's directory.
const RUN_MODE: u32 = 0o700;
/// Name, in a job's directory, of the emptied directory of an earlier run, kept for the
/// job's next run ([`retire`], [`create`]); no run's directory has it (theirs are
/// counters).
const SPARE: &str = "spare";

/// The directory of job `id`, which holds the directories of its runs.
pub fn job_dir(main: &MainConfig, id: &str) -> PathBuf {
    main.dir_run_tmp().join(id)
}

/// The directory of run `counter` of job `id`.
pub fn run_dir(main: &MainConfig, id: &str, counter: u64) -> PathBuf {
    job_dir(main, id).join(counter.to_string())
}

/// Creates the temporary directory of run `counter` of job `id` for the job's user
/// (`owner`, the run's credentials; `None` when the run keeps the controller's) and
/// returns its path: the job's spare renamed when there is one, else a new directory.
/// One left by an earlier controller with the same name (the counter is never reused, so
/// only after a state was lost) is removed first.
pub fn create(
    main: &MainConfig,
    id: &str,
    counter: u64,
    owner: Option<&Credentials>,
) -> Result<PathBuf, String> {
    let job = job_dir(main, id);
    let dir = run_dir(main, id, counter);
    // The spare is ours, empty, mode 0700 (see `retire`), in a job's directory made and
    // checked below by an earlier run; only the controller can put anything there.
    if std::fs::rename(job.join(SPARE), &dir).is_ok() {
        hand_over(&dir, owner)?;
        return Ok(dir);
    }
    prepare_passage(&main.dir_run_tmp())?;
    prepare_passage(&job)?;
    let builder = {
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(RUN_MODE);
        builder
    };
    if let Err(err) = builder.create(&dir) {
        if err.kind() != io::ErrorKind::AlreadyExists {
            return Err(format!("cannot create {}: {err}", dir.display()));
        }
        remove(&dir).map_err(|e| format!("cannot remove the old {}: {e}", dir.display()))?;
        builder
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // The umask may have taken bits away; 0700 is what is meant either way.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(RUN_MODE))
        .map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))?;
    hand_over(&dir, owner)?;
    Ok(dir)
}

/// Gives a run's directory to the job's user, when it has one and the controller may.
fn hand_over(dir: &Path, owner: Option<&Credentials>) -> Result<(), String> {
    if let Some(creds) = owner
        && Uid::effective().is_root()
    {
        std::os::unix::fs::chown(dir, Some(creds.uid), Some(creds.gid))
            .map_err(|e| format!("cannot hand {} to {}: {e}", dir.display(), creds.user_name))?;
    }
    Ok(())
}

/// Makes sure `parent` exists as a real directory of ours with mode 0711, whatever the
/// umask (the packaged unit's is 0077): a job's user passes through it to its own run's
/// directory or file, lists nothing, and can change nothing in it. For the runs'
/// temporary directories and a job's, and the request bodies' and a job's.
pub fn prepare_passage(parent: &Path) -> Result<(), String> {
    if let Some(up) = parent.parent() {
        std::fs::create_dir_all(up).map_err(|e| format!("cannot create {}: {e}", up.display()))?;
    }
    match std::fs::DirBuilder::new().mode(PARENT_MODE).create(parent) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(format!("cannot create {}: {err}", parent.display())),
    }
    let meta = std::fs::symlink_metadata(parent)
        .map_err(|e| format!("cannot read {}: {e}", parent.display()))?;
    if !meta.file_type().is_dir() || meta.uid() != Uid::effective().as_raw() {
        return Err(format!(
            "{} must be a directory of the service's own user, not a link nor anyone else's",
            parent.display()
        ));
    }
    if meta.permissions().mode() & 0o7777 != PARENT_MODE {
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(PARENT_MODE))
            .map_err(|e| format!("cannot set the mode of {}: {e}", parent.display()))?;
    }
    Ok(())
}

/// Removes every run directory left below the parent, such as those of runs a crash
/// interrupted, and the jobs' directories that held them (made again by the next run).
/// Problems are logged; none stops the start.
pub fn remove_leftovers(main: &MainConfig) {
    let parent = main.dir_run_tmp();
    for path in entries(&parent) {
        // A job's directory is the controller's own, with the parent's mode; anything
        // else there is a run's directory (as an earlier release laid them out).
        let is_job_dir = std::fs::symlink_metadata(&path).is_ok_and(|meta| {
            meta.is_dir()
                && meta.uid() == Uid::effective().as_raw()
                && meta.permissions().mode() & 0o7777 == PARENT_MODE
        });
        let runs = if is_job_dir {
            entries(&path)
        } else {
            vec![path.clone()]
        };
        for run in runs {
            // The spare is no interrupted run's: removed without a word.
            let spare = is_job_dir && run.file_name() == Some(std::ffi::OsStr::new(SPARE));
            match remove(&run) {
                Ok(()) if spare => {}
                Ok(()) => {
                    tracing::info!(dir = %run.display(), "removed the temporary directory of an interrupted run")
                }
                Err(err) => {
                    tracing::warn!(dir = %run.display(), error = %err, "cannot remove a run's temporary directory")
                }
            }
        }
        if is_job_dir && let Err(err) = remove(&path) {
            tracing::warn!(dir = %path.display(), error = %err, "cannot remove a job's temporary directory");
        }
    }
}

/// The paths of the entries of `dir`; none when it cannot be listed (logged, but for a
/// missing `dir`).
fn entries(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.flatten().map(|entry| entry.path()).collect(),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(err) => {
            tracing::warn!(dir = %dir.display(), error = %err, "cannot list the runs' temporary directories");
            Vec::new()
        }
    }
}

/// Empties the directory of a run that ended, as [`remove`] does, and keeps it as its
/// job's spare for the next run ([`create`]), the controller's own with mode 0700; when
/// the job has a spare already, removes it.
pub fn retire(dir: &Path) -> io::Result<()> {
    let Some((parent, name)) = emptied(dir)? else {
        return Ok(());
    };
    match nix::fcntl::renameat2(
        &parent,
        name.as_bytes(),
        &parent,
        SPARE,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    ) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) => unlink(&parent, name.as_bytes(), UnlinkatFlags::RemoveDir),
        Err(err) => Err(err.into()),
    }
}

/// Removes `dir` and everything in it (see the module documentation). The parent of
/// `dir` must be a directory that only the controller may change. A missing `dir` is
/// fine.
pub fn remove(dir: &Path) -> io::Result<()> {
    match emptied(dir)? {
        Some((parent, name)) => unlink(&parent, name.as_bytes(), UnlinkatFlags::RemoveDir),
        None => Ok(()),
    }
}

/// Takes `dir` over and empties it; returns its parent, opened, and its name. `None`
/// when there is nothing left to do: `dir` is missing, or was not a directory and is
/// removed.
fn emptied(dir: &Path) -> io::Result<Option<(OwnedFd, &std::ffi::OsStr)>> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a directory below another one",
        ));
    };
    let parent = nix::fcntl::open(
        parent,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let stat = match fstatat(&parent, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::ENOENT) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    if !is_dir(&stat) {
        unlink(&parent, name.as_bytes(), UnlinkatFlags::NoRemoveDir)?;
        return Ok(None);
    }
    take_over(&parent, name.as_bytes(), &stat)?;
    let top = open_dir(&parent, name.as_bytes())?;
    empty(&top)?;
    Ok(Some((parent, name)))
}

/// Empties `top`, a directory already taken over.
fn empty(top: &OwnedFd) -> io::Result<()> {
    let mut moved: u64 = 0;
    loop {
        let names = list(top)?;
        if names.is_empty() {
            return Ok(());
        }
        for name in names {
            let name = name.as_bytes();
            let stat = match fstatat(top, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(Errno::ENOENT) => continue,
                Err(err) => return Err(err.into()),
            };
            if !is_dir(&stat) {
                unlink(top, name, UnlinkatFlags::NoRemoveDir)?;
                continue;
            }
            take_over(top, name, &stat)?;
            match unlinkat(top, name, UnlinkatFlags::RemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => continue,
                Err(Errno::ENOTEMPTY | Errno::EEXIST) => {}
                Err(err) => return Err(err.into()),
            }
            // Not empty: its entries move up into `top` and are handled in a later
            // round; the directory, empty then, goes.
            let sub = open_dir(top, name)?;
            for inner in list(&sub)? {
                let inner = inner.as_bytes();
                let inner_stat = match fstatat(&sub, inner, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(stat) => stat,
                    Err(Errno::ENOENT) => continue,
                    Err(err) => return Err(err.into()),
                };
                if is_dir(&inner_stat) {
                    // Moving a directory rewrites its `..`: it must be writable.
                    take_over(&sub, inner, &inner_stat)?;
                }
                let target = free_name(top, &mut moved)?;
                nix::fcntl::renameat(&sub, inner, top, target.as_bytes())?;
            }
            drop(sub);
            unlink(top, name, UnlinkatFlags::RemoveDir)?;
        }
    }
}

/// A name not used in `top` (which only the controller may change).
fn free_name(top: &OwnedFd, counter: &mut u64) -> io::Result<String> {
    loop {
        *counter += 1;
        let name = format!(".svc-remove.{counter}");
        match fstatat(top, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => return Ok(name),
            Ok(_) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

/// Makes directory `name` in `dir` the controller's, mode 0700: whoever owned it can no
/// longer change it, and the controller can list and empty it without CAP_DAC_OVERRIDE.
/// Neither call follows a symbolic link (a directory swapped for one fails the removal).
fn take_over(dir: &OwnedFd, name: &[u8], stat: &FileStat) -> io::Result<()> {
    let (uid, gid) = (Uid::effective(), Gid::effective());
    if stat.st_uid != uid.as_raw() {
        fchownat(
            dir,
            name,
            Some(uid),
            Some(gid),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )?;
    }
    if stat.st_mode & 0o7777 != RUN_MODE {
        fchmodat(
            dir,
            name,
            Mode::from_bits_truncate(RUN_MODE),
            FchmodatFlags::NoFollowSymlink,
        )?;
    }
    Ok(())
}

fn open_dir(dir: &OwnedFd, name: &[u8]) -> io::Result<OwnedFd> {
    Ok(openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The names in directory `dir`, without `.` and `..`.
fn list(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    let fd = dir.try_clone()?;
    let mut handle = nix::dir::Dir::from_fd(fd)?;
    let mut names = Vec::new();
    for entry in handle.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
        }
    }
    Ok(names)
}

fn unlink(dir: &OwnedFd, name: &[u8], flag: UnlinkatFlags) -> io::Result<()> {
    match unlinkat(dir, name, flag) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

fn is_dir(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn removes_a_deep_tree_with_closed_modes_and_links_without_following_them() {
        let base = tempfile::tempdir().expect("tempdir");
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).expect("mkdir outside");
        std::fs::write(outside.join("keep"), "kept").expect("write keep");
        mode(&outside, 0o755);
        let run = base.path().join("job.1");
        std::fs::create_dir(&run).expect("mkdir run");
        // 300 levels, each with a file, a link to the outside and a closed mode.
        let mut dir = run.clone();
        let mut dirs = Vec::new();
        for level in 0..300 {
            dir = dir.join(format!("d{level}"));
            std::fs::create_dir(&dir).expect("mkdir level");
            std::fs::write(dir.join("f"), "x").expect("write f");
            std::os::unix::fs::symlink(&outside, dir.join("link")).expect("symlink");
            dirs.push(dir.clone());
        }
        for dir in dirs.iter().rev() {
            mode(dir, 0o000);
        }
        mode(&run, 0o500);
        remove(&run).expect("remove");
        assert!(!run.exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).expect("read"),
            "kept"
        );
        assert_eq!(
            std::fs::metadata(&outside)
                .expect("stat")
                .permissions()
                .mode()
                & 0o7777,
            0o755,
            "nothing outside was changed through a link"
        );
        // Gone already: fine.
        remove(&run).expect("remove again");
    }

    /// The main section of a configuration whose `dir_base` is `base`.
    fn main_in(base: &Path) -> MainConfig {
        let file = base.join("svc.conf");
        std::fs::write(&file, format!("[svc]\ndir_base = {}\n", base.display())).expect("write");
        crate::config::load(&file).expect("load").main
    }

    fn inode(path: &Path) -> u64 {
        std::fs::symlink_metadata(path).expect("stat").ino()
    }

    #[test]
    fn a_retired_run_directory_is_emptied_and_becomes_the_next_runs() {
        let base = tempfile::tempdir().expect("tempdir");
        let main = main_in(base.path());
        let first = create(&main, "j", 1, None).expect("create");
        assert_eq!(first, run_dir(&main, "j", 1));
        std::fs::create_dir_all(first.join("a/b")).expect("mkdir");
        std::fs::write(first.join("a/b/f"), "left").expect("write");
        mode(&first.join("a"), 0o500);
        mode(&first, 0o755);
        let reused = inode(&first);
        retire(&first).expect("retire");
        assert!(!first.exists());
        let spare = job_dir(&main, "j").join(SPARE);
        assert_eq!(
            std::fs::read_dir(&spare).expect("list").count(),
            0,
            "emptied"
        );
        assert_eq!(
            std::fs::metadata(&spare).expect("stat").mode() & 0o7777,
            RUN_MODE
        );

        let second = create(&main, "j", 2, None).expect("create");
        assert_eq!(second, run_dir(&main, "j", 2));
        assert_eq!(inode(&second), reused, "the spare, renamed");
        assert!(!spare.exists());
        // A second run ending while the job has a spare: its directory goes.
        let third = create(&main, "j", 3, None).expect("create");
        retire(&second).expect("retire");
        retire(&third).expect("retire");
        assert!(!second.exists() && !third.exists());
        assert!(spare.exists());
        // At the next start, the spare goes with whatever else is left.
        remove_leftovers(&main);
        assert!(!job_dir(&main, "j").exists());
    }

    #[test]
    fn a_file_or_a_link_in_place_of_the_directory_is_removed_not_followed() {
        let base = tempfile::tempdir().expect("tempdir");
        let target = base.path().join("target");
        std::fs::create_dir(&target).expect("mkdir");
        std::fs::write(target.join("keep"), "kept").expect("write");
        let link = base.path().join("job.2");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        remove(&link).expect("remove link");
        assert!(std::fs::symlink_metadata(&link).is_err());
        assert!(target.join("keep").exists());
    }
}
