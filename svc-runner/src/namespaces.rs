//! The namespaces a run of commands lives in: a PID namespace of its own, so that every
//! process of the run ends with it however it forked; a mount namespace with that PID
//! namespace's `/proc` (the commands see their run's processes only) and the service's
//! per-run directories covered but for the job's own entry; and an IPC namespace.
//!
//! The runner stays outside, as the parent of each command: a command sees its parent as
//! pid 0 and can name neither the runner nor any process of another run, so it can
//! neither signal nor trace them. The namespace's pid 1 is an init of the runner's own
//! ([`init`]) that runs no job code: it sets the namespace up, reaps orphans, kills every
//! process of the namespace when the runner asks (after each command) and ends when the
//! runner closes its pipe or dies, which makes the kernel kill whatever is left.
//!
//! Two ways in ([`enter`]): a runner with `CAP_SYS_ADMIN` (started by a root controller)
//! makes the namespaces before it switches to the job's user; one without makes them
//! after the switch, with a user namespace that maps the job's user and group to
//! themselves (the commands have no capability in it once they execute). Either way
//! the init is cloned into the new namespaces and sets them up before the runner joins
//! them all at once (`setns` on the init's pidfd), so that a refusal at any step leaves
//! the runner as it was, and the run goes on as before, its log saying why.

mod init;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use nix::fcntl::OFlag;
use proto::PrivateDir;
use tokio::net::unix::pipe;

/// Why a run is not contained in namespaces of its own.
#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    /// Nothing was changed: the run goes on with process groups and the subreaper.
    #[error("{0}")]
    Refused(String),
    /// The runner could not go on (its state is unknown): the run fails.
    #[error("{0}")]
    Failed(String),
}

/// The namespaces of a run, held by the runner: the init's pid (as the runner sees it)
/// and the two pipes to it. Dropping it ends the init and so the namespace.
#[derive(Debug)]
pub struct Contained {
    init: nix::unistd::Pid,
    requests: pipe::Sender,
    answers: pipe::Receiver,
    /// True when a user namespace was made (the runner had no `CAP_SYS_ADMIN`).
    pub in_user_namespace: bool,
}

/// True when this process may make PID and mount namespaces without a user namespace
/// (`CAP_SYS_ADMIN` in its effective set).
pub fn privileged() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    crate::capabilities::effective().is_ok_and(|effective| effective & (1 << CAP_SYS_ADMIN) != 0)
}

/// Makes the run's namespaces and moves the runner into them (its later children are
/// born in the PID namespace). `user`: the uid and gid to map to themselves in a new user
/// namespace, for a runner without `CAP_SYS_ADMIN`, which must have switched to them.
pub fn enter(
    private: &[PrivateDir],
    user: Option<(u32, u32)>,
    via: Option<&crate::birthplace::Birthplace>,
) -> Result<Contained, EnterError> {
    let failed = |what: &str, err: &dyn std::fmt::Display| {
        EnterError::Refused(format!("cannot {what}: {err}"))
    };
    let covers = covers(private).map_err(|err| failed("look at a covered directory", &err))?;
    let (control_read, control_write) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|err| failed("make a pipe", &err))?;
    let (reply_read, reply_write) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|err| failed("make a pipe", &err))?;
    let plan = init::Plan {
        user_maps: user.map(|(uid, gid)| init::UserMaps {
            uid_map: CString::new(format!("{uid} {uid} 1")).unwrap_or_default(),
            gid_map: CString::new(format!("{gid} {gid} 1")).unwrap_or_default(),
        }),
        covers,
        control: control_read.as_raw_fd(),
        reply: reply_write.as_raw_fd(),
        handled: crate::spawn::handled_signals(),
    };
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if user.is_some() {
        flags |= libc::CLONE_NEWUSER;
    }
    let pid = clone_init(&plan, flags).map_err(|err| failed("make namespaces", &err))?;
    let init = nix::unistd::Pid::from_raw(pid);
    drop((control_read, reply_write, plan));
    let give_up = |message: String| {
        let _ = nix::sys::signal::kill(init, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(init, None);
        EnterError::Refused(message)
    };
    let reply_read = std::fs::File::from(reply_read);
    let mut status = [0u8; 8];
    if let Err(err) = io::Read::read_exact(&mut &reply_read, &mut status) {
        return Err(give_up(format!(
            "the namespace's init ended during its set-up: {err}"
        )));
    }
    let stage = u32::from_ne_bytes([status[0], status[1], status[2], status[3]]);
    let errno = i32::from_ne_bytes([status[4], status[5], status[6], status[7]]);
    if stage != init::Stage::Ready as u32 {
        let err = io::Error::from_raw_os_error(errno);
        return Err(give_up(format!(
            "cannot {}: {err}",
            init::Stage::describe(stage)
        )));
    }
    let mut join = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if user.is_some() {
        join |= libc::CLONE_NEWUSER;
    }
    // The thread that starts the commands joins, when it is not this one: commands are
    // born in the namespaces of the thread that forks them.
    let joined = match via {
        Some(place) => place
            .run(&|| join_init(pid, join))
            .and_then(|joined| joined),
        None => join_init(pid, join),
    };
    if let Err(err) = joined {
        return Err(give_up(format!("cannot join the namespaces: {err}")));
    }
    // Joined: the namespaces cannot be left any more; from here on the run cannot go on
    // without its init, which is told so and answers once it is not dumpable any more.
    let lost =
        |err: io::Error| EnterError::Failed(format!("cannot talk to the namespace's init: {err}"));
    let mut control = std::fs::File::from(control_write);
    io::Write::write_all(&mut control, b"j").map_err(lost)?;
    let mut acknowledged = [0u8; 4];
    io::Read::read_exact(&mut &reply_read, &mut acknowledged).map_err(lost)?;
    let control_write = OwnedFd::from(control);
    let pipes = (|| -> io::Result<(pipe::Sender, pipe::Receiver)> {
        Ok((
            pipe::Sender::from_owned_fd(control_write)?,
            pipe::Receiver::from_owned_fd(OwnedFd::from(reply_read))?,
        ))
    })();
    let (requests, answers) = pipes.map_err(lost)?;
    Ok(Contained {
        init,
        requests,
        answers,
        in_user_namespace: user.is_some(),
    })
}

/// The covers of `private`. A directory that is not there is not covered.
fn covers(private: &[PrivateDir]) -> io::Result<Vec<init::Cover>> {
    let cstring =
        |text: String| CString::new(text).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
    let mut covers = Vec::new();
    for dir in private {
        match std::fs::symlink_metadata(&dir.cover) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => continue,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        }
        let keep = dir
            .keep
            .as_deref()
            .filter(|name| !name.is_empty() && !name.contains('/') && *name != "." && *name != "..")
            .map(|name| cstring(format!("{}/{name}", dir.cover)))
            .transpose()?;
        covers.push(init::Cover {
            dir: cstring(dir.cover.clone())?,
            keep,
        });
    }
    Ok(covers)
}

/// Clones the init into new namespaces (`flags`), with every signal blocked around the
/// clone so that none is handled in it with the runner's handlers; returns its pid.
fn clone_init(plan: &init::Plan, flags: libc::c_int) -> io::Result<libc::c_int> {
    let stack = crate::spawn::Stack::new()?;
    crate::spawn::with_signals_blocked(|| {
        // SAFETY: without CLONE_VM the init runs `init::main` on its own copy of `stack`
        // and of `plan` (both alive at the clone), and only makes system calls on them;
        // the runner's memory is never shared with it.
        unsafe {
            libc::clone(
                init::main,
                stack.top(),
                flags | libc::SIGCHLD,
                plan as *const init::Plan as *mut libc::c_void,
            )
        }
    })
}

/// Moves the runner into the init's namespaces (`flags`), all of them or none.
fn join_init(pid: libc::c_int, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: integer arguments only. The init is an unreaped child: its pid names it.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd)
        .ok()
        .filter(|fd| *fd >= 0)
        .ok_or_else(io::Error::last_os_error)?;
    // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: setns on a descriptor this function owns, with namespace flags.
    if unsafe { libc::setns(pidfd.as_raw_fd(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Contained {
    /// Kills every process of the namespace and waits until they are reaped; returns
    /// how many there were. Only the runner's own children (the commands) are not
    /// reaped by the init: call it once the command has been waited for.
    pub async fn sweep(&self) -> io::Result<u32> {
        self.ask(b's').await?;
        let mut answer = [0u8; 4];
        let mut got = 0;
        while got < answer.len() {
            self.answers.readable().await?;
            match self.answers.try_read(&mut answer[got..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(read) => got += read,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(err) => return Err(err),
            }
        }
        Ok(u32::from_ne_bytes(answer))
    }

    /// Asks the init to go to the lowest priority (nice 19) for what is left of its
    /// life, its end included, so that the end of the namespaces waits for a CPU behind
    /// the runs starting meanwhile ([`proto::ExecRequest::end_yields`]). Asked of the
    /// init, which may lower itself, whoever the runner has become by then; not waited
    /// for. Its sweeps, on the way of each command's end, ran at its priority before.
    pub async fn yield_cpu(&self) -> io::Result<()> {
        self.ask(b'y').await
    }

    /// Sends the init one request byte (see `init::serve`).
    async fn ask(&self, request: u8) -> io::Result<()> {
        loop {
            self.requests.writable().await?;
            match self.requests.try_write(&[request]) {
                Ok(_) => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(err) => return Err(err),
            }
        }
    }

    /// The pid of the namespace's init, as the runner sees it.
    pub fn init_pid(&self) -> u32 {
        self.init.as_raw().unsigned_abs()
    }

    /// Ends the namespace: the init ends on its closed pipe, and the kernel kills what
    /// is left. Not waited for: the kernel lets an init end only once every process of
    /// its namespace is reaped, and one of them may be a child of the runner's that it
    /// has not reaped yet (the runner reaps nothing else while it waits).
    pub fn end(self) {
        drop(self);
    }

    /// Ends the namespace as [`Contained::end`] does, once every command of the run has
    /// been waited for, and reaps the init (waiting at most [`INIT_EXIT_WAIT`]): what
    /// the orphans it reaped used then counts in the runner's children's usage. The wait
    /// is on the init's pidfd, so that the end is reported as soon as the init is gone:
    /// this wait is on the path from a run's command to the next run of its job.
    /// `yield_cpu`: the init ends at the lowest priority ([`Contained::yield_cpu`]).
    pub async fn finish(self, yield_cpu: bool) {
        if yield_cpu && let Err(err) = self.yield_cpu().await {
            eprintln!("svc-runner: cannot ask the run's init to yield: {err}");
        }
        let init = self.init;
        // Opened while the init is a child not reaped yet: the pid names it alone.
        let exited = crate::spawn::pidfd_open(init.as_raw());
        drop(self);
        let until = tokio::time::Instant::now() + INIT_EXIT_WAIT;
        loop {
            match nix::sys::wait::waitpid(init, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
                Ok(nix::sys::wait::WaitStatus::StillAlive) => {}
                // Reaped (or not the runner's to reap): either way, nothing to wait for.
                _ => return,
            }
            if tokio::time::Instant::now() >= until {
                return;
            }
            let next_look = crate::spawn::may_have_ended(exited.as_ref());
            if tokio::time::timeout_at(until, next_look).await.is_err() {
                return;
            }
        }
    }
}

/// How long the runner waits for its run's init to exit before it reports the end
/// without the usage of the orphans the init reaped: the init exits as soon as its pipe
/// closes, and the kernel then kills what is left of the namespace.
const INIT_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// What `svc-runner --probe-containment` prints: how this host contains runs, and why
/// not when it does not. Changes this process's user when it is root without
/// CAP_SYS_ADMIN (it is a throwaway process): runs as another user then get a user
/// namespace, and that is what is tried, as user nobody.
pub async fn probe() -> String {
    const NOBODY: u32 = 65534;
    let fallback = "fallback: processes are ended by process group and as orphans of the \
                    runner, which a job that kills its runner escapes";
    if privileged() {
        return match enter(&[], None, None) {
            Ok(contained) => {
                contained.end();
                "namespaces: each run of commands in PID, mount and IPC namespaces of its \
                 own (made with CAP_SYS_ADMIN)"
                    .into()
            }
            Err(why) => format!("{fallback} ({why})"),
        };
    }
    let root = nix::unistd::geteuid().is_root();
    if root {
        let nobody = nix::unistd::Gid::from_raw(NOBODY);
        let switched = nix::unistd::setgroups(&[])
            .and_then(|()| nix::unistd::setgid(nobody))
            .and_then(|()| nix::unistd::setuid(nix::unistd::Uid::from_raw(NOBODY)));
        if let Err(err) = switched {
            return format!("{fallback} (no CAP_SYS_ADMIN, and cannot try as another user: {err})");
        }
    }
    let ids = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    match enter(&[], Some(ids), None) {
        Ok(contained) => {
            contained.end();
            let mut line = "namespaces: each run of commands in PID, mount and IPC namespaces of \
                            its own, in a user namespace (no CAP_SYS_ADMIN)"
                .to_string();
            if root {
                line.push_str(
                    "; runs as root: fallback, their capabilities would not count in a user \
                     namespace",
                );
            }
            line
        }
        Err(why) => format!("{fallback} (no CAP_SYS_ADMIN, and no user namespace: {why})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nice value of process `pid`, or of the calling thread for 0.
    fn nice_of(pid: u32) -> i32 {
        nix::errno::Errno::clear();
        // SAFETY: getpriority with integer arguments.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid) };
        assert!(
            nice != -1 || nix::errno::Errno::last_raw() == 0,
            "getpriority({pid}): {}",
            io::Error::last_os_error()
        );
        nice
    }

    /// Asked to yield, the init goes to nice 19 and still serves (a sweep answers); it
    /// kept this process's priority until then. The namespaces are joined by a
    /// birthplace thread, as in a runner: the test's own threads stay where they are.
    #[tokio::test]
    async fn an_init_asked_to_yield_goes_to_the_lowest_priority_and_still_serves() {
        // Root makes them as they are; anyone else in a user namespace mapping itself.
        let user = (!privileged()).then(|| {
            (
                nix::unistd::geteuid().as_raw(),
                nix::unistd::getegid().as_raw(),
            )
        });
        let place = crate::birthplace::Birthplace::start(Vec::new()).expect("thread");
        let contained =
            enter(&[], user, Some(&place)).expect("a PID namespace (root, or user namespaces)");
        let init = contained.init_pid();
        let own = nice_of(0);
        assert_eq!(nice_of(init), own, "inherited");
        contained.yield_cpu().await.expect("asked");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while nice_of(init) != 19 {
            assert!(std::time::Instant::now() < until, "the init never yielded");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert_eq!(
            contained.sweep().await.expect("a sweep"),
            0,
            "nothing to reap"
        );
        contained.finish(false).await;
        place.end();
    }
}
