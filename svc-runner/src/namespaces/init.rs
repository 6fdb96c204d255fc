//! The init of a run's PID namespace (its pid 1), from the clone to its end.
//!
//! It is cloned without `CLONE_VM` from a runner that may have more than one thread, so it
//! only makes system calls on what the runner prepared before the clone ([`Plan`]): no
//! allocation, no lock, nothing of the standard library that could take one. It never
//! executes anything, so no job code ever runs as the namespace's init.
//!
//! Its set-up, in its new namespaces: the user namespace's maps (when there is one),
//! mounts made private to the namespace, the service's per-run directories covered but
//! for the job's own entry, then a `/proc` of the new PID namespace. Then it serves the
//! runner on two pipes: each byte received asks it to kill every other process of the
//! namespace and reap them (the answer is how many it reaped); the end of the pipe (the
//! runner closed it or died) ends it, and with it, by the kernel's hand, whatever is left
//! in the namespace.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

/// What the init reads, prepared by the runner before the clone.
pub(super) struct Plan {
    /// The user namespace's maps, when the init was cloned into a new one.
    pub user_maps: Option<UserMaps>,
    /// The directories to cover.
    pub covers: Vec<Cover>,
    /// Read end of the runner's requests.
    pub control: RawFd,
    /// Write end of the answers.
    pub reply: RawFd,
    /// The signals the runner handles, set back to their defaults first.
    pub handled: &'static [libc::c_int],
}

/// Contents of `/proc/self/uid_map` and `gid_map`: the job's ids mapped to themselves.
pub(super) struct UserMaps {
    pub uid_map: CString,
    pub gid_map: CString,
}

/// A directory to cover with an empty file system, and the entry put back in it.
pub(super) struct Cover {
    /// The directory (its path: the covering file system is mounted there).
    pub dir: CString,
    /// The path of the entry put back, when there is one.
    pub keep: Option<CString>,
}

/// `open_tree` and `move_mount` flags (linux/mount.h).
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

/// The step of the set-up that failed, reported with its errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Stage {
    Ready = 0,
    Prctl = 1,
    UserMaps = 2,
    Propagation = 3,
    Cover = 4,
    Mountpoint = 5,
    PutBack = 6,
    ReadOnly = 7,
    Proc = 8,
    Descriptors = 9,
}

impl Stage {
    /// What the step does, for the run's log.
    pub(super) fn describe(code: u32) -> &'static str {
        match code {
            1 => "set the init's parent death signal",
            2 => "write the user namespace's maps",
            3 => "make the mounts private to the namespace",
            4 => "cover a directory of the service",
            5 => "make a mount point in a covered directory",
            6 => "put the job's directory back",
            7 => "make a covered directory read-only",
            8 => "mount /proc for the namespace",
            9 => "set up the init's descriptors",
            _ => "set up the namespace",
        }
    }
}

/// Most rounds of kill-and-reap one sweep makes (each `SWEEP_PAUSE` apart).
const SWEEP_ROUNDS: u32 = 200;
/// Pause between two rounds of a sweep, in nanoseconds.
const SWEEP_PAUSE_NS: libc::c_long = 10_000_000;

/// The init's entry point (`clone`'s function): `arg` is the runner's [`Plan`].
pub(super) extern "C" fn main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Plan` the runner passed to `clone`; without `CLONE_VM` this
    // process has its own copy of it, which nothing else changes.
    let plan = unsafe { &*(arg as *const Plan) };
    match set_up(plan) {
        Ok(()) => {
            // The answers' pipe is standard output from here on (`set_up`).
            report(1, Stage::Ready as u32, 0);
            joined();
            serve()
        }
        Err((stage, err)) => {
            report(plan.reply, stage as u32, err.raw_os_error().unwrap_or(0));
            // SAFETY: ends this process without running anything of the runner's.
            unsafe { libc::_exit(1) }
        }
    }
}

/// Writes a stage and errno to the answers' pipe, as 8 bytes.
fn report(fd: RawFd, stage: u32, errno: i32) {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&stage.to_ne_bytes());
    bytes[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: writes a local buffer; a failure leaves the runner reading an end of file,
    // which it takes as a failed set-up.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

fn check(stage: Stage, result: libc::c_int) -> Result<(), (Stage, io::Error)> {
    if result < 0 {
        Err((stage, io::Error::last_os_error()))
    } else {
        Ok(())
    }
}

fn set_up(plan: &Plan) -> Result<(), (Stage, io::Error)> {
    // SAFETY: prctl and signal with integer arguments. The init dies with the runner.
    // The runner's handlers are not the init's: a signal handled here would run the
    // runner's code.
    unsafe {
        check(
            Stage::Prctl,
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0),
        )?;
        for &signal in plan.handled {
            libc::signal(signal, libc::SIG_DFL);
        }
        // Told apart from the runner in `ps` (it is the run's pid 1), and not taken for
        // one by a job that looks for runners.
        libc::prctl(libc::PR_SET_NAME, c"svc-run-init".as_ptr(), 0, 0, 0);
    }
    if let Some(maps) = &plan.user_maps {
        // The init's own `/proc` files belong to root while it is not dumpable (as a
        // runner is after its switch to the job's user): dumpable for the time it writes
        // its maps, before any job process exists.
        // SAFETY: prctl with integer arguments.
        check(Stage::Prctl, unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0)
        })?;
        write_file(c"/proc/self/uid_map", &maps.uid_map)?;
        // Required before an unprivileged gid_map; the job cannot change its groups in
        // the namespace, which it could not outside it either.
        write_file(c"/proc/self/setgroups", c"deny")?;
        write_file(c"/proc/self/gid_map", &maps.gid_map)?;
    }
    // SAFETY: mount with prepared NUL-terminated strings (or null where none is needed).
    unsafe {
        // Nothing mounted here reaches the host; what the host mounts still shows.
        check(
            Stage::Propagation,
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ),
        )?;
    }
    for cover in &plan.covers {
        cover_dir(cover)?;
    }
    // SAFETY: as above. Mounted by a process of the new PID namespace, this `/proc`
    // shows that namespace's processes only.
    unsafe {
        check(
            Stage::Proc,
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ),
        )?;
    }
    descriptors(plan)
}

/// Covers one directory with an empty tmpfs, puts the job's entry back (a copy of its
/// mount tree taken before, in this namespace: a bind mount can only come from the
/// caller's own mount namespace), and makes the tmpfs read-only.
fn cover_dir(cover: &Cover) -> Result<(), (Stage, io::Error)> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: open_tree, mount, mkdir, move_mount and close with prepared
    // NUL-terminated strings and the descriptor open_tree returned.
    unsafe {
        let tree = match &cover.keep {
            Some(keep) => {
                let tree = libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    keep.as_ptr(),
                    OPEN_TREE_CLONE
                        | libc::O_CLOEXEC as libc::c_uint
                        | libc::AT_RECURSIVE as libc::c_uint
                        | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
                );
                let tree = libc::c_int::try_from(tree).unwrap_or(-1);
                match tree {
                    -1 if io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) => None,
                    tree => {
                        check(Stage::PutBack, tree)?;
                        Some((tree, keep))
                    }
                }
            }
            None => None,
        };
        check(
            Stage::Cover,
            libc::mount(
                c"tmpfs".as_ptr(),
                cover.dir.as_ptr(),
                c"tmpfs".as_ptr(),
                flags,
                c"mode=0711,size=16k,nr_inodes=16".as_ptr().cast(),
            ),
        )?;
        if let Some((tree, target)) = tree {
            check(Stage::Mountpoint, libc::mkdir(target.as_ptr(), 0o711))?;
            let moved = libc::syscall(
                libc::SYS_move_mount,
                tree,
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            );
            check(Stage::PutBack, libc::c_int::try_from(moved).unwrap_or(-1))?;
            libc::close(tree);
        }
        check(
            Stage::ReadOnly,
            libc::mount(
                std::ptr::null(),
                cover.dir.as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
                std::ptr::null(),
            ),
        )
    }
}

/// Writes `text` to the file at `path` (one of the init's own `/proc` files).
fn write_file(path: &std::ffi::CStr, text: &std::ffi::CStr) -> Result<(), (Stage, io::Error)> {
    // SAFETY: open, write and close on prepared strings and the descriptor just opened.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(Stage::UserMaps, fd)?;
        let bytes = text.to_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let result = if usize::try_from(written).ok() == Some(bytes.len()) {
            Ok(())
        } else {
            Err((Stage::UserMaps, io::Error::last_os_error()))
        };
        libc::close(fd);
        result
    }
}

/// Leaves the init with three descriptors: the requests on 0, the answers on 1 and a
/// signalfd for `SIGCHLD` on 2 (every signal is blocked: the runner blocked them all
/// around the clone). Nothing of the runner's stays open in it, its connection to the
/// controller included.
fn descriptors(plan: &Plan) -> Result<(), (Stage, io::Error)> {
    // SAFETY: descriptor and signal-mask system calls on local values; the three
    // descriptors are first copied above 2, so that moving one down cannot close another.
    unsafe {
        let mut chld = crate::spawn::unsafe_zeroed_sigset();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        let signals = libc::signalfd(-1, &chld, 0);
        check(Stage::Descriptors, signals)?;
        let mut high = [plan.control, plan.reply, signals];
        for fd in &mut high {
            *fd = libc::fcntl(*fd, libc::F_DUPFD, 10);
            check(Stage::Descriptors, *fd)?;
        }
        for (target, fd) in (0..).zip(high) {
            check(Stage::Descriptors, libc::dup2(fd, target))?;
        }
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..4096 {
                libc::close(fd);
            }
        }
    }
    Ok(())
}

/// Waits for the runner to have joined the namespaces (its first byte), then makes the
/// init not dumpable, so that nobody (the job's user included) may trace it or read its
/// memory, and says so. Not before: joining through the init's pidfd is a look at it
/// that a runner without CAP_SYS_PTRACE may only take while it is dumpable.
fn joined() {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads one byte into a local.
        let read = unsafe { libc::read(0, (&raw mut byte).cast(), 1) };
        match read {
            1 => break,
            _ if read < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
            _ => end(),
        }
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        end();
    }
    let bytes = 0u32.to_ne_bytes();
    // SAFETY: writes a local buffer to the answers' pipe.
    unsafe { libc::write(1, bytes.as_ptr().cast(), bytes.len()) };
}

/// The nice value the init takes when the runner asks it to yield (`y`).
const LOWEST_PRIORITY: libc::c_int = 19;

/// Serves the runner's requests until its pipe ends, reaping orphans meanwhile: `s`
/// sweeps the namespace and answers how many it reaped; `y` lowers the init's priority.
fn serve() -> ! {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: 2,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: polls two descriptors of a local array.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            end();
        }
        if fds[1].revents != 0 {
            let mut info = [0u8; 128 * 4];
            // SAFETY: reads pending signal records into a local buffer.
            unsafe { libc::read(2, info.as_mut_ptr().cast(), info.len()) };
            reap();
        }
        if fds[0].revents != 0 {
            let mut byte = 0u8;
            // SAFETY: reads one byte into a local.
            let read = unsafe { libc::read(0, (&raw mut byte).cast(), 1) };
            match read {
                1 if byte == b'y' => {
                    // Raising its own nice value needs no privilege.
                    // SAFETY: setpriority with integer arguments.
                    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LOWEST_PRIORITY) };
                }
                1 => {
                    let count = sweep();
                    let bytes = count.to_ne_bytes();
                    // SAFETY: writes a local buffer to the answers' pipe.
                    unsafe { libc::write(1, bytes.as_ptr().cast(), bytes.len()) };
                }
                0 => end(),
                _ if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
                _ => end(),
            }
        }
    }
}

/// Ends the init; the kernel kills whatever is left in the namespace.
fn end() -> ! {
    // SAFETY: ends this process without running anything of the runner's.
    unsafe { libc::_exit(0) }
}

/// Reaps every child that has ended; returns how many.
fn reap() -> u32 {
    let mut count = 0;
    loop {
        let mut status = 0;
        // SAFETY: waits for any child of the init, writing into a local integer.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {
            count += 1;
        } else {
            return count;
        }
    }
}

/// Kills every other process of the namespace (`kill(-1)` from its init reaches all of
/// them, nested namespaces included) until none is left, and reaps them. Bounded: a
/// process of the runner's that it has not reaped yet still counts for `kill`.
fn sweep() -> u32 {
    let mut count = reap();
    for _ in 0..SWEEP_ROUNDS {
        // SAFETY: kill with integer arguments.
        let signalled = unsafe { libc::kill(-1, libc::SIGKILL) } == 0;
        count += reap();
        if !signalled {
            break;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: SWEEP_PAUSE_NS,
        };
        // SAFETY: sleeps for a local duration.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
    count + reap()
}
