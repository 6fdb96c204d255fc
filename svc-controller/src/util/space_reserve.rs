//! Room kept on the disk of the state directory for the service's own records, so that
//! a job that fills the disk does not stop state, replay and audit writes.
//!
//! At start the service allocates a reserve file of [`RESERVE_BYTES`] in `dir_state`
//! (with `fallocate`, so its blocks are really taken). When a write of the service's
//! own records fails because the disk is full ([`retry_when_full`]), the reserve is
//! given back (the file truncated to nothing) and the write tried once more: the state
//! file of the run that filled the disk, the audit entry of the pause that follows, the
//! spent signature of that pause, all still land. From then on new runs are refused
//! ([`runs_refused`], a 503 that says why), since each run writes a log and a TMPDIR,
//! until the disk has room again, when the reserve is taken back.
//!
//! One reserve per process, so the writers in `fsutil`, `replay` and `audit` reach it
//! without being handed it; a process that never installs one (the tools, unit tests)
//! simply has none.

use std::fs::File;
use std::io;
use std::os::fd::AsFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Bytes kept in reserve.
pub const RESERVE_BYTES: u64 = 8 << 20;
/// The reserve's file name in `dir_state`.
pub const FILE_NAME: &str = "space-reserve";
/// Free bytes needed, beyond the reserve itself, before it is taken back and runs are
/// allowed again.
const ROOM_AGAIN: u64 = RESERVE_BYTES;
/// How often a refused run looks at the disk again, in seconds.
const LOOK_EVERY_SECS: i64 = 1;

#[derive(Debug)]
struct Reserve {
    path: PathBuf,
    /// The reserve's blocks are taken (not given back to a write).
    held: AtomicBool,
    /// Unix seconds of the last look at the free space while released.
    looked: AtomicI64,
}

static RESERVE: OnceLock<Reserve> = OnceLock::new();

/// Allocates the reserve in `dir_state` (blocking). A disk already too full to hold it
/// is no reason not to start: the service starts as if the reserve had just been given
/// back, refusing runs until there is room.
pub fn install(dir_state: &Path) -> io::Result<()> {
    let path = dir_state.join(FILE_NAME);
    let held = match allocate(&path) {
        Ok(()) => true,
        Err(err) if is_full(&err) => {
            tracing::error!(
                file = %path.display(),
                "the disk is full: no room for the reserve of the service's records; runs are refused until there is room"
            );
            false
        }
        Err(err) => return Err(err),
    };
    let reserve = Reserve {
        path,
        held: AtomicBool::new(held),
        looked: AtomicI64::new(0),
    };
    if let Err(reserve) = RESERVE.set(reserve) {
        tracing::warn!(file = %reserve.path.display(), "a second space reserve was not installed");
    }
    Ok(())
}

fn allocate(path: &Path) -> io::Result<()> {
    let file = File::options()
        .create(true)
        .write(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    let len = i64::try_from(RESERVE_BYTES).unwrap_or(i64::MAX);
    nix::fcntl::fallocate(file.as_fd(), nix::fcntl::FallocateFlags::empty(), 0, len)
        .map_err(io::Error::from)?;
    file.sync_all()
}

/// True for the errors of a full disk (or a full quota).
pub fn is_full(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Runs `write` (a write of the service's own records); when it fails because the disk
/// is full and the reserve was held, gives the reserve back and runs it once more.
pub fn retry_when_full<T>(mut write: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    match write() {
        Err(err) if is_full(&err) && give_back() => write(),
        other => other,
    }
}

/// Gives the reserve back; true when it was held (a retry may now fit). For a writer
/// that retries in its own way after a full disk.
pub fn give_back() -> bool {
    let Some(reserve) = RESERVE.get() else {
        return false;
    };
    if !reserve.held.swap(false, Ordering::SeqCst) {
        return false;
    }
    let released = File::options()
        .write(true)
        .open(&reserve.path)
        .and_then(|file| file.set_len(0));
    match released {
        Ok(()) => tracing::error!(
            file = %reserve.path.display(),
            bytes = RESERVE_BYTES,
            "the disk is full: gave back the reserve so that the service's records are still written; runs are refused until there is room again"
        ),
        Err(err) => tracing::error!(
            file = %reserve.path.display(),
            error = %err,
            "the disk is full, and the reserve could not be given back"
        ),
    }
    true
}

/// Why runs are refused now, if they are: the reserve was given back and the disk has
/// not had room since. Looks at the disk at most once a second while refusing, and
/// takes the reserve back once there is room (blocking: a `statvfs` and an allocation).
pub fn runs_refused() -> Option<String> {
    let reserve = RESERVE.get()?;
    if reserve.held.load(Ordering::SeqCst) {
        return None;
    }
    let dir = reserve.path.parent().unwrap_or(Path::new("/"));
    let now = unix_secs();
    let last = reserve.looked.load(Ordering::SeqCst);
    if now.saturating_sub(last) >= LOOK_EVERY_SECS
        && reserve
            .looked
            .compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        && free_bytes(dir).is_some_and(|free| free >= RESERVE_BYTES + ROOM_AGAIN)
    {
        match allocate(&reserve.path) {
            Ok(()) => {
                reserve.held.store(true, Ordering::SeqCst);
                tracing::info!(file = %reserve.path.display(), "the disk has room again: reserve taken back, runs allowed");
                return None;
            }
            Err(err) => {
                tracing::warn!(file = %reserve.path.display(), error = %err, "cannot take the reserve back yet");
            }
        }
    }
    Some(format!(
        "the disk of {} is full: runs are refused until it has {} MiB free",
        dir.display(),
        (RESERVE_BYTES + ROOM_AGAIN) >> 20
    ))
}

/// [`runs_refused`] for async callers: an atomic look while the reserve is held, the
/// disk's own look (at most once a second) on a blocking thread while it is not.
pub async fn runs_refused_now() -> Option<String> {
    let reserve = RESERVE.get()?;
    if reserve.held.load(Ordering::SeqCst) {
        return None;
    }
    tokio::task::spawn_blocking(runs_refused)
        .await
        .unwrap_or_else(|_| Some("the disk is full".to_string()))
}

fn unix_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let stat = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(stat.blocks_available().saturating_mul(stat.fragment_size()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_errors_of_a_full_disk_are_known() {
        assert!(is_full(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(is_full(&io::Error::from_raw_os_error(libc::EDQUOT)));
        assert!(!is_full(&io::Error::from_raw_os_error(libc::EACCES)));
    }

    #[test]
    fn without_a_reserve_a_full_disk_is_an_error_and_runs_are_allowed() {
        // Unit tests install no reserve: the write is tried once.
        let mut tries = 0;
        let result: io::Result<()> = retry_when_full(|| {
            tries += 1;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert!(result.is_err());
        assert_eq!(tries, 1);
        assert_eq!(runs_refused(), None);
    }

    #[test]
    fn the_reserve_file_takes_its_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        allocate(&path).expect("allocate");
        let meta = std::fs::metadata(&path).expect("metadata");
        assert_eq!(meta.len(), RESERVE_BYTES);
        use std::os::unix::fs::MetadataExt as _;
        assert!(meta.blocks() * 512 >= RESERVE_BYTES, "not sparse");
    }
}
