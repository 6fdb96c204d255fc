//! Crash-safe file operations: atomic replacement and durable renames.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `contents` so that a crash at any moment leaves either the old
/// file or the new one, never a torn mix: write a temp file in the same directory, fsync
/// it, rename it over `path`, fsync the directory.
pub fn atomic_write(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace_file(path, contents)?;
    sync_dir(parent_dir(path)?)
}

/// Like [`atomic_write`] without the directory sync: a crash, even a power failure,
/// still leaves the old file or the new one, complete (the new one is synced before it
/// takes the name), but after a power failure the name may still point to the old one.
/// For writes whose loss is repaired at start (see the callers).
pub fn replace_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    // The service's own records: written even on a disk a job filled.
    crate::util::space_reserve::retry_when_full(|| replace_file_once(path, contents))
}

fn replace_file_once(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = parent_dir(path)?;
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)?;
    temp.write_all(contents)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// How far a write must have reached disk when it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Contents and name on disk ([`atomic_write`]).
    Durable,
    /// Contents on disk, the name possibly not yet ([`replace_file`]).
    Atomic,
}

/// Renames `from` to `to` and makes the rename durable by syncing the directory.
pub fn durable_rename(from: &Path, to: &Path) -> io::Result<()> {
    fs::rename(from, to)?;
    sync_dir(parent_dir(to)?)
}

/// Flushes a directory's entries (new, renamed or removed names) to disk.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent_dir(path: &Path) -> io::Result<&Path> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => Ok(dir),
        _ => Ok(Path::new(".")),
    }
}

/// Prefix of the temporary files [`atomic_write`] creates.
const TEMP_PREFIX: &str = ".tmp-";

/// Removes temporary files that an [`atomic_write`] interrupted by a crash left in `dir`.
/// Only called at start, when no write can be in progress.
pub fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            if let Err(err) = fs::remove_file(entry.path()) {
                tracing::warn!(path = %entry.path().display(), error = %err, "cannot remove a stale temporary file");
            }
        }
    }
}

/// Opens `path` for appending, creating it readable and writable by the owner only
/// (mode 0600: the replay stores and the audit log name what people did, not for every
/// local user).
pub fn open_append_private(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Creates `dir` and its parents, then sets its permission bits to `mode`.
pub fn create_dir_with_mode(dir: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        atomic_write(&path, b"one").expect("first write");
        atomic_write(&path, b"two").expect("second write");
        assert_eq!(fs::read(&path).expect("read"), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state")]);
    }

    #[test]
    fn atomic_write_into_missing_directory_fails_cleanly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("missing/state");
        assert!(atomic_write(&path, b"x").is_err());
    }

    #[test]
    fn stale_temp_files_are_removed_and_others_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(".tmp-abc"), b"torn").expect("write");
        fs::write(dir.path().join("job"), b"state").expect("write");
        remove_stale_temp_files(dir.path());
        assert!(!dir.path().join(".tmp-abc").exists());
        assert!(dir.path().join("job").exists());
    }

    #[test]
    fn durable_rename_moves_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("a.started");
        let to = dir.path().join("a.success");
        fs::write(&from, b"log").expect("write");
        durable_rename(&from, &to).expect("rename");
        assert!(!from.exists());
        assert_eq!(fs::read(&to).expect("read"), b"log");
    }
}
