//! Starting a command's process with a `vfork`-style clone, and waiting for it.
//!
//! The standard library starts a process that needs work done between fork and exec (a
//! `pre_exec` hook: the resource limits, capabilities, `no_new_privs` and the Landlock
//! ruleset of [`crate::commands`]) with `fork`: the runner's page tables are copied,
//! the child tears them down again when it executes, and the runner takes a
//! copy-on-write fault for every page it writes afterwards. Here the child shares the
//! runner's memory (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does) on a stack of its
//! own, and the runner's thread waits until the child has executed the program or
//! given up. Everything the child needs is prepared before the clone: it only makes
//! system calls, allocates nothing and takes no lock.
//!
//! Signals: the runner blocks all of them around the clone, so that none is handled in
//! the child with the runner's handlers (which would wake the runner's runtime); the
//! child sets the signals the runner handles or ignores back to their default and
//! unblocks everything before it executes, as the standard library does for its
//! children.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// What to start. `argv[0]` is the program: a path, or a name looked up in the `PATH`
/// of `env`, as `execvp` would.
#[derive(Debug, Clone, Copy)]
pub struct Spec<'a> {
    pub argv: &'a [&'a str],
    pub env: &'a [(String, String)],
    pub dir: &'a str,
}

/// A started command: its pid, which is also its process group, and the reading ends
/// of its standard output and error. Dropping it leaves the process alone.
#[derive(Debug)]
pub struct Child {
    pid: i32,
    /// Readable when the process has ended (`None` on a kernel without `pidfd_open`:
    /// the wait then polls).
    pidfd: Option<AsyncFd<OwnedFd>>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
}

/// The child's work between the clone and the program, after its standard streams,
/// process group and working directory: it must be async-signal-safe and allocate
/// nothing (it runs on memory the runner shares).
pub type PreExec<'a> = &'a (dyn Fn() -> io::Result<()> + Sync);

/// What a clone on another thread ([`crate::birthplace`]) reads.
struct CloneArgs<'a>(&'a Prepared<'a>, &'a Stack);

// SAFETY: the pointers of `Prepared` and the stack point into memory owned by `spawn`'s
// frame, which waits until the clone on the other thread has returned; that thread only
// reads them (as the child does, which shares the memory until it executes).
unsafe impl Sync for CloneArgs<'_> {}

/// Size of the stack the child runs on until it executes the program.
const CHILD_STACK: usize = 64 * 1024;

/// How often a wait polls where the kernel has no `pidfd_open`.
const POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// Everything the child reads, prepared before the clone.
struct Prepared<'a> {
    /// Candidate paths of the program, tried in order.
    paths: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    dir: CString,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    /// Write end of the pipe on which the child reports why it could not execute.
    error: RawFd,
    /// The signals to set back to their default disposition.
    handled: &'static [libc::c_int],
    pre_exec: PreExec<'a>,
}

/// Starts `spec` with `pre_exec` run in the child just before it executes. An error is
/// the child's own when it got that far: `NotFound` for a program that is not there,
/// `PermissionDenied` for one that cannot be executed.
pub fn spawn(
    spec: &Spec<'_>,
    pre_exec: PreExec<'_>,
    birthplace: Option<&crate::birthplace::Birthplace>,
) -> io::Result<Child> {
    let program = spec
        .argv
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no program"))?;
    let cstring = |text: &str| {
        CString::new(text).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{text:?} holds a NUL byte"),
            )
        })
    };
    let paths = candidates(program, spec.env)
        .iter()
        .map(|path| cstring(path))
        .collect::<io::Result<Vec<_>>>()?;
    let argv_owned = spec
        .argv
        .iter()
        .map(|arg| cstring(arg))
        .collect::<io::Result<Vec<_>>>()?;
    let env_owned = spec
        .env
        .iter()
        .map(|(name, value)| cstring(&format!("{name}={value}")))
        .collect::<io::Result<Vec<_>>>()?;
    let null_terminated = |strings: &[CString]| {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect::<Vec<_>>()
    };

    let stdin = nix::fcntl::open(
        "/dev/null",
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    let (out_read, out_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (err_read, err_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (report_read, report_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let prepared = Prepared {
        paths,
        argv: null_terminated(&argv_owned),
        envp: null_terminated(&env_owned),
        dir: cstring(spec.dir)?,
        stdin: stdin.as_raw_fd(),
        stdout: out_write.as_raw_fd(),
        stderr: err_write.as_raw_fd(),
        error: report_write.as_raw_fd(),
        handled: handled_signals(),
        pre_exec,
    };
    let stack = Stack::new()?;
    let pid = match birthplace {
        // Forked by the thread already in the run's cgroup: born there.
        Some(place) => {
            let args = CloneArgs(&prepared, &stack);
            let args = &args;
            place.run(&move || clone_child(args.0, args.1))??
        }
        None => clone_child(&prepared, &stack)?,
    };
    drop((stdin, out_write, err_write, report_write, stack));

    // The child has executed the program (the report pipe closed without a word) or
    // written why not and exited.
    let mut errno = [0u8; 4];
    let mut got = 0;
    let report = std::fs::File::from(report_read);
    while got < errno.len() {
        match nix::unistd::read(&report, &mut errno[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    if got > 0 {
        // It exited: reap it.
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        let code = if got == errno.len() {
            i32::from_ne_bytes(errno)
        } else {
            libc::EIO
        };
        return Err(io::Error::from_raw_os_error(code));
    }
    Ok(Child {
        pid,
        pidfd: pidfd_open(pid),
        stdout: Some(pipe::Receiver::from_owned_fd(out_read)?),
        stderr: Some(pipe::Receiver::from_owned_fd(err_read)?),
    })
}

impl Child {
    /// The pid of the command, which is also the id of its process group.
    pub fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Waits until the command has ended and reaps it.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            may_have_ended(self.pidfd.as_ref()).await;
        }
    }

    /// Reaps the command if it has ended.
    fn try_wait(&self) -> io::Result<Option<ExitStatus>> {
        let mut status: libc::c_int = 0;
        loop {
            // SAFETY: waits for our own child, writing into a local integer.
            let reaped = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            match reaped {
                0 => return Ok(None),
                pid if pid == self.pid => return Ok(Some(ExitStatus::from_raw(status))),
                _ => {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
            }
        }
    }
}

/// Where `program` may be, in the order `execvp` tries: itself when it names a path,
/// else each directory of the environment's `PATH` (or `/bin:/usr/bin`).
fn candidates(program: &str, env: &[(String, String)]) -> Vec<String> {
    if program.contains('/') {
        return vec![program.to_string()];
    }
    let path = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map_or("/bin:/usr/bin", |(_, value)| value.as_str());
    path.split(':')
        .map(|dir| {
            let dir = if dir.is_empty() { "." } else { dir };
            format!("{}/{program}", dir.trim_end_matches('/'))
        })
        .collect()
}

/// The signals whose disposition the child must set back to the default: those the
/// runner handles (its runtime's SIGTERM) or ignores (the standard library ignores
/// SIGPIPE). Looked up once, at the first command: the runner sets them up before.
pub(crate) fn handled_signals() -> &'static [libc::c_int] {
    static HANDLED: std::sync::OnceLock<Vec<libc::c_int>> = std::sync::OnceLock::new();
    HANDLED.get_or_init(look_up_handled_signals)
}

fn look_up_handled_signals() -> Vec<libc::c_int> {
    (1..=libc::SIGRTMAX())
        .filter(|&signal| signal != libc::SIGKILL && signal != libc::SIGSTOP)
        .filter(|&signal| {
            // SAFETY: a zeroed sigaction is a valid value to be overwritten.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: queries the disposition into a local struct; changes nothing.
            let queried = unsafe { libc::sigaction(signal, std::ptr::null(), &mut action) };
            queried == 0 && action.sa_sigaction != libc::SIG_DFL
        })
        .collect()
}

/// Returns when the process of `pidfd` may have ended (its pidfd became readable), or
/// after [`POLL`] without one: the wait of a loop that then looks with `waitpid`.
pub(crate) async fn may_have_ended(pidfd: Option<&AsyncFd<OwnedFd>>) {
    match pidfd.map(AsyncFd::readable) {
        Some(readable) => match readable.await {
            Ok(mut ready) => ready.clear_ready(),
            Err(_) => tokio::time::sleep(POLL).await,
        },
        None => tokio::time::sleep(POLL).await,
    }
}

/// A pidfd for `pid`, readable once it has ended; `None` where the kernel has none.
pub(crate) fn pidfd_open(pid: i32) -> Option<AsyncFd<OwnedFd>> {
    // SAFETY: integer arguments only.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an `OwnedFd` keeps its one descriptor open, unchanged, until dropped with
    // the `AsyncFd`.
    unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
}

/// The child's stack: [`CHILD_STACK`] bytes above a page that faults, so that an
/// overflow ends the child instead of writing into the runner's memory.
pub(crate) struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    pub(crate) fn new() -> io::Result<Stack> {
        // SAFETY: sysconf has no memory arguments.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = CHILD_STACK + page;
        // SAFETY: a new private anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len };
        // SAFETY: the lowest page of the mapping just made.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The (16-byte aligned) top, where the child starts: the stack grows down.
    pub(crate) fn top(&self) -> *mut libc::c_void {
        ((self.base as usize + self.len) & !15) as *mut libc::c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, used by no child any more (CLONE_VFORK).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Clones the child on `stack`, with all signals blocked around it, and returns its
/// pid once it has executed the program or exited.
fn clone_child(prepared: &Prepared<'_>, stack: &Stack) -> io::Result<i32> {
    with_signals_blocked(|| {
        // SAFETY: the child runs `child_main` on `stack`, which outlives it: with
        // CLONE_VFORK this thread is suspended until the child has executed a program
        // or exited, and only then can `stack` and `prepared` go. `child_main` only
        // reads `prepared` and makes system calls.
        unsafe {
            libc::clone(
                child_main,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                prepared as *const Prepared<'_> as *mut libc::c_void,
            )
        }
    })
}

/// Runs `clone` (which returns a pid, or -1 and sets `errno`) with every signal of this
/// thread blocked, so that none is handled in the child with the runner's handlers, and
/// the mask restored afterwards.
pub(crate) fn with_signals_blocked(clone: impl FnOnce() -> libc::c_int) -> io::Result<i32> {
    let mut all: libc::sigset_t = unsafe_zeroed_sigset();
    let mut old: libc::sigset_t = unsafe_zeroed_sigset();
    // SAFETY: fills a local signal set.
    unsafe { libc::sigfillset(&mut all) };
    // SAFETY: sets this thread's mask from local sets.
    let masked = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) };
    if masked != 0 {
        return Err(io::Error::from_raw_os_error(masked));
    }
    let pid = clone();
    // Read before the mask is restored, which may change errno.
    let cloned = if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    };
    // SAFETY: restores this thread's mask from a local set.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    cloned
}

pub(crate) fn unsafe_zeroed_sigset() -> libc::sigset_t {
    // SAFETY: a sigset_t of zeroes is a valid (empty) set.
    unsafe { std::mem::zeroed() }
}

/// The child, from the clone to the program. It reads what the runner prepared and
/// makes system calls only; it never returns into the runner's code.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` that `clone_child`'s caller keeps alive until
    // this child has executed or exited (CLONE_VFORK).
    let prepared = unsafe { &*(arg as *const Prepared<'_>) };
    let errno = match child_setup(prepared) {
        Ok(()) => exec(prepared),
        Err(err) => err.raw_os_error().unwrap_or(libc::EINVAL),
    };
    let bytes = errno.to_ne_bytes();
    // SAFETY: writes a local buffer to the report pipe, then ends the child without
    // running anything of the runner's (no atexit handlers, no destructors).
    unsafe {
        libc::write(prepared.error, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127)
    }
}

/// The child's set-up before the program: signals, standard streams, process group,
/// working directory, then the caller's `pre_exec`.
fn child_setup(prepared: &Prepared<'_>) -> io::Result<()> {
    let check = |result: libc::c_int| {
        if result < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: system calls on the child's own signal dispositions and mask, its
    // descriptor table and process group, with local or prepared arguments.
    unsafe {
        for &signal in prepared.handled {
            libc::signal(signal, libc::SIG_DFL);
        }
        let mut empty = unsafe_zeroed_sigset();
        libc::sigemptyset(&mut empty);
        check(libc::sigprocmask(
            libc::SIG_SETMASK,
            &empty,
            std::ptr::null_mut(),
        ))?;
        check(libc::dup2(prepared.stdin, 0))?;
        check(libc::dup2(prepared.stdout, 1))?;
        check(libc::dup2(prepared.stderr, 2))?;
        close_on_exec_from(3)?;
        check(libc::setpgid(0, 0))?;
        check(libc::chdir(prepared.dir.as_ptr()))?;
    }
    (prepared.pre_exec)()
}

/// Highest descriptor the fallback of [`close_on_exec_from`] marks, whatever the limit
/// says: a loop of one system call per descriptor must stay short.
const FALLBACK_FD_CEILING: libc::rlim_t = 1 << 20;

/// Marks every descriptor from `first` up close-on-exec, so that the program gets its
/// standard streams and nothing else: not what the controller inherited from whoever
/// started it without `O_CLOEXEC` (which would hand a job a file or socket of the
/// service), nor anything of the runner's. Marked rather than closed, so that the error
/// report pipe stays open until the program is executed. `close_range` (Linux 5.11 for
/// the flag) does it in one call; an older kernel gets one `fcntl` per possible
/// descriptor. Makes system calls only, as the child must.
fn close_on_exec_from(first: libc::c_uint) -> io::Result<()> {
    // SAFETY: a system call on the child's own descriptor table, with plain arguments.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if done == 0 {
        return Ok(());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: fills a local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let end = limit.rlim_cur.min(FALLBACK_FD_CEILING) as libc::c_int;
    for fd in first as libc::c_int..end {
        // SAFETY: flags of a descriptor of the child's own; an unused number fails with
        // EBADF, which is what nothing to mark means.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// Executes the first candidate path that is there; returns the error to report: the
/// last one, except that a candidate that could not be executed (`EACCES`) wins over
/// ones that were not there, as with `execvp`.
fn exec(prepared: &Prepared<'_>) -> libc::c_int {
    let mut error = libc::ENOENT;
    for path in &prepared.paths {
        // SAFETY: NUL-terminated strings and NULL-terminated arrays prepared by the
        // runner, alive until this child has executed or exited.
        unsafe {
            libc::execve(
                path.as_ptr(),
                prepared.argv.as_ptr(),
                prepared.envp.as_ptr(),
            )
        };
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOENT);
        match errno {
            libc::ENOENT | libc::ENOTDIR => {}
            libc::EACCES => error = libc::EACCES,
            other => return other,
        }
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: &str) -> Vec<(String, String)> {
        vec![("PATH".to_string(), path.to_string())]
    }

    #[test]
    fn a_name_is_looked_up_in_the_path_of_the_environment() {
        assert_eq!(
            candidates("true", &env("/usr/local/bin:/bin/")),
            ["/usr/local/bin/true", "/bin/true"]
        );
        assert_eq!(candidates("./x", &env("/bin")), ["./x"]);
        assert_eq!(candidates("x", &env(":/bin")), ["./x", "/bin/x"]);
        assert_eq!(candidates("x", &[]), ["/bin/x", "/usr/bin/x"]);
    }

    fn run(argv: &[&str], dir: &str) -> io::Result<(ExitStatus, String, String)> {
        run_from(argv, dir, None)
    }

    fn run_from(
        argv: &[&str],
        dir: &str,
        birthplace: Option<&crate::birthplace::Birthplace>,
    ) -> io::Result<(ExitStatus, String, String)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let env = env("/usr/bin:/bin");
            let spec = Spec {
                argv,
                env: &env,
                dir,
            };
            let mut child = spawn(&spec, &|| Ok(()), birthplace)?;
            let mut out = String::new();
            let mut err = String::new();
            use tokio::io::AsyncReadExt as _;
            if let Some(stdout) = child.stdout.as_mut() {
                stdout.read_to_string(&mut out).await?;
            }
            if let Some(stderr) = child.stderr.as_mut() {
                stderr.read_to_string(&mut err).await?;
            }
            Ok((child.wait().await?, out, err))
        })
    }

    #[test]
    fn a_command_forked_by_the_birthplace_thread_is_waited_for_by_the_runner() {
        let place = crate::birthplace::Birthplace::start(Vec::new()).expect("thread");
        let dir = tempfile::tempdir().expect("tempdir");
        let dir_text = dir.path().to_str().expect("utf8");
        let (status, out, _) =
            run_from(&["sh", "-c", "echo born; exit 4"], dir_text, Some(&place)).expect("spawn");
        assert_eq!(status.code(), Some(4));
        assert_eq!(out, "born\n");
        place.end();
    }

    #[test]
    fn a_command_runs_in_its_directory_and_group_with_its_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dir_text = dir.path().to_str().expect("utf8");
        let (status, out, err) = run(
            &[
                "sh",
                "-c",
                "pwd; echo $PATH; read -r pid comm state ppid group rest < /proc/$$/stat; \
                 [ \"$group\" -eq $$ ] && echo own-group; \
                 read x || echo stdin-empty; echo to-stderr >&2; exit 3",
            ],
            dir_text,
        )
        .expect("spawn");
        assert_eq!(status.code(), Some(3));
        let real = std::fs::canonicalize(dir.path()).expect("canonical");
        assert_eq!(
            out,
            format!(
                "{}\n/usr/bin:/bin\nown-group\nstdin-empty\n",
                real.display()
            )
        );
        assert_eq!(err, "to-stderr\n");
    }

    #[test]
    fn descriptors_the_runner_inherited_do_not_reach_the_command() {
        // A descriptor without O_CLOEXEC, as a parent of the controller may leave one.
        let file = tempfile::tempfile().expect("tempfile");
        // SAFETY: duplicates a descriptor this test owns; the copy is closed below.
        let inherited = unsafe { libc::dup(file.as_raw_fd()) };
        assert!(inherited > 2, "dup: {}", io::Error::last_os_error());
        let script = format!(
            "if [ -e /proc/$$/fd/{inherited} ]; then echo leaked; else echo closed; fi; \
             ls /proc/$$/fd"
        );
        let result = run(&["sh", "-c", &script], "/");
        // SAFETY: closes the copy made above.
        unsafe { libc::close(inherited) };
        let (status, out, _) = result.expect("spawn");
        assert!(status.success());
        assert!(out.starts_with("closed\n"), "{out}");
    }

    #[test]
    fn what_cannot_be_started_is_reported_with_the_childs_error() {
        let missing = run(&["no-such-program-here"], "/").expect_err("missing");
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let dir = tempfile::tempdir().expect("tempdir");
        let not_executable = dir.path().join("plain");
        std::fs::write(&not_executable, "echo\n").expect("write");
        let denied = run(&[not_executable.to_str().expect("utf8")], "/").expect_err("denied");
        assert_eq!(denied.kind(), io::ErrorKind::PermissionDenied);
        let no_dir = run(&["true"], "/no/such/directory").expect_err("no dir");
        assert_eq!(no_dir.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_pre_exec_hook_runs_in_the_child_and_its_error_is_reported() {
        let refused = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async {
                let env = env("/bin");
                let spec = Spec {
                    argv: &["true"],
                    env: &env,
                    dir: "/",
                };
                spawn(
                    &spec,
                    &|| Err(io::Error::from_raw_os_error(libc::EPERM)),
                    None,
                )
            })
            .expect_err("refused");
        assert_eq!(refused.raw_os_error(), Some(libc::EPERM));
    }
}
