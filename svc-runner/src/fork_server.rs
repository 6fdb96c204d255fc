//! The runner fork server (`svc-runner --fork-server`): one pre-initialised runner that
//! forks a runner for each execution of a command, so that a run does not pay for an
//! exec, the dynamic loader and the start of the standard library (see `proto::fork`).
//!
//! The server is single-threaded and has no async runtime, so that `fork` is sound: a
//! child starts with no lock held by a thread that does not exist in it. It waits on
//! two descriptors: its control socket (the controller's requests, each `Fork` with the
//! forked runner's connection attached) and a `signalfd` for `SIGCHLD`, on which it reaps
//! its children and reports their exits. Reaping waits for a pause in the forks and in
//! the runners' ends (at most [`REAP_AT_MOST`]): the kernel's release of a reaped
//! process's `/proc` entries is cheap on a quiet machine and many times dearer while
//! runs start and end around it (timers due together: up to a whole CPU for 100 ms of
//! the burst, which the runs still starting wait for). It never listens, never runs a
//! command itself and keeps its privileges only to hand them to its children, which
//! drop them as every runner does before it runs a command.
//!
//! A forked runner shares the address-space layout of the server and its siblings (the
//! commands it starts are executed afresh and get their own). That is why the controller
//! forks only runners of commands: a runner that makes a JobHttp's call, and so reads
//! what a remote server sends, is executed afresh.

use std::collections::{HashSet, VecDeque};
use std::io::{self, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, getpid};
use proto::fork::{ForkEvent, ForkRequest, ForkServerCodec};
use proto::sandbox::Walk;
use tokio_util::codec::{Decoder as _, Encoder as _};

use crate::credentials;

/// How [`serve`] returns.
#[derive(Debug)]
pub enum Served {
    /// In a forked child: do one execution on this controller connection, as a runner
    /// whose parent is `parent` (the server), with the server's walk of the sandbox's
    /// protected paths when it had one.
    Forked {
        connection: OwnedFd,
        parent: Pid,
        walk: Option<Walk>,
    },
    /// The controller closed the control socket and every forked runner has ended.
    Ended,
}

/// Why the server could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ForkServerError {
    #[error("the controller is gone")]
    ControllerGone,
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("invalid request from the controller: {0}")]
    Protocol(#[from] proto::ProtoError),
}

fn io_error(what: &'static str) -> impl FnOnce(Errno) -> ForkServerError {
    move |errno| ForkServerError::Io {
        what,
        source: errno.into(),
    }
}

/// Largest read from the control socket at once; requests are a few dozen bytes.
const READ_CHUNK: usize = 4096;

/// Runners that ended are reaped once no fork was asked for and no runner ended for
/// this long...
const REAP_QUIET: Duration = Duration::from_millis(50);

/// ...or once the first of them has waited this long, whichever comes first (far
/// below the time the controller gives a runner to exit after its run).
const REAP_AT_MOST: Duration = Duration::from_millis(250);

/// Serves the controller, whose pid is `parent`, on standard input (a Unix socket)
/// until it closes it; returns in each forked child with its connection. The server
/// walks for the sandbox of `protected_paths` (none when empty) and keeps the walk
/// current before each fork, so that its runners do not each walk.
pub fn serve(parent: Pid, protected_paths: Vec<String>) -> Result<Served, ForkServerError> {
    // The server ends with the controller; its children, tied to it in turn, then end
    // as every runner does when the controller dies.
    match credentials::tie_to_parent(parent) {
        Ok(true) => {}
        Ok(false) => return Err(ForkServerError::ControllerGone),
        Err(err) => return Err(io_error("cannot set the parent death signal")(err)),
    }
    // Told apart from its runners in `ps` and `top` (`comm`; the command line is the
    // same), which take back the runner's name.
    let _ = nix::sys::prctl::set_name(c"svc-forkserver");
    let control = take_control_socket()?;
    let mut blocked = SigSet::empty();
    blocked.add(Signal::SIGCHLD);
    let mut original_mask = SigSet::empty();
    sigprocmask(
        SigmaskHow::SIG_BLOCK,
        Some(&blocked),
        Some(&mut original_mask),
    )
    .map_err(io_error("cannot block SIGCHLD"))?;
    let children = SignalFd::with_flags(&blocked, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(io_error("cannot create a signalfd for SIGCHLD"))?;

    let mut server = Server {
        control,
        codec: ForkServerCodec::new(),
        input: BytesMut::new(),
        fds: VecDeque::new(),
        live: HashSet::new(),
        closing: false,
        walk: Walk::ahead(&protected_paths),
        protected_paths,
        reaping: ReapTimer::default(),
    };
    server.send(ForkEvent::Ready {
        version: proto::PROTOCOL_VERSION,
    })?;
    loop {
        if server.closing && server.live.is_empty() {
            return Ok(Served::Ended);
        }
        let (control_ready, children_ready) =
            wait_readable(&server, &children, server.reap_wait(Instant::now()))?;
        if children_ready {
            while let Ok(Some(_)) = children.read_signal() {}
            server.reaping.ended(Instant::now());
        }
        if server.reap_wait(Instant::now()) == Some(Duration::ZERO) {
            server.reap()?;
        }
        if control_ready && let Some(forked) = server.read_requests()? {
            // In the child: nothing of the server's stays open, and the signal mask
            // is the one the runner was started with.
            let Server { control, fds, .. } = server;
            drop((control, fds, children));
            let _ = nix::sys::prctl::set_name(c"svc-runner");
            if let Err(err) = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&original_mask), None) {
                eprintln!("svc-runner: warning: cannot restore the signal mask: {err}");
            }
            return Ok(forked);
        }
    }
}

/// Moves the control socket off standard input to a close-on-exec descriptor, and puts
/// `/dev/null` in its place, so that no command ever inherits it.
fn take_control_socket() -> Result<UnixStream, ForkServerError> {
    let stdin = std::io::stdin();
    let duplicate = stdin
        .as_fd()
        .try_clone_to_owned()
        .map_err(|source| ForkServerError::Io {
            what: "cannot take the control socket from standard input",
            source,
        })?;
    let null = std::fs::File::open("/dev/null").map_err(|source| ForkServerError::Io {
        what: "cannot open /dev/null",
        source,
    })?;
    nix::unistd::dup2_stdin(null.as_fd())
        .map_err(io_error("cannot put /dev/null on standard input"))?;
    Ok(UnixStream::from(duplicate))
}

/// Waits until the control socket (while the controller has not closed it) or the
/// signalfd can be read, or `limit` has passed (none: no limit).
fn wait_readable(
    server: &Server,
    children: &SignalFd,
    limit: Option<Duration>,
) -> Result<(bool, bool), ForkServerError> {
    let mut fds = vec![PollFd::new(children.as_fd(), PollFlags::POLLIN)];
    if !server.closing {
        fds.push(PollFd::new(server.control.as_fd(), PollFlags::POLLIN));
    }
    // Rounded up, so that the wait does not end just before the limit.
    let timeout = limit.map_or(PollTimeout::NONE, |limit| {
        let millis = limit.as_micros().div_ceil(1000);
        PollTimeout::from(u16::try_from(millis).unwrap_or(u16::MAX))
    });
    loop {
        match poll(&mut fds, timeout) {
            Ok(_) => break,
            Err(Errno::EINTR) => continue,
            Err(err) => return Err(io_error("cannot wait for requests")(err)),
        }
    }
    let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|events| !events.is_empty());
    let children_ready = ready(&fds[0]);
    let control_ready = fds.get(1).is_some_and(ready);
    Ok((control_ready, children_ready))
}

struct Server {
    control: UnixStream,
    codec: ForkServerCodec,
    /// Bytes read and not decoded yet.
    input: BytesMut,
    /// Descriptors received and not taken by a request yet, in order.
    fds: VecDeque<OwnedFd>,
    /// Forked runners not reaped yet: the pids [`ForkRequest::Kill`] may signal.
    live: HashSet<Pid>,
    /// The controller closed the control socket: the server ends once `live` is empty.
    closing: bool,
    /// The service's protected paths, which every run's sandbox keeps from reading.
    protected_paths: Vec<String>,
    /// The walk for them ([`Walk`]), made again before a fork once it is not current.
    walk: Option<Walk>,
    /// When the runners that ended are due to be reaped.
    reaping: ReapTimer,
}

/// When runners that ended are reaped: after a pause of [`REAP_QUIET`] in the forks and
/// in the ends (runners that end one after another are runs of a burst, and the runs
/// after them may still be starting), or [`REAP_AT_MOST`] after the first of them ended,
/// whichever comes first.
#[derive(Debug, Default)]
struct ReapTimer {
    /// When the last fork was asked for.
    last_fork: Option<Instant>,
    /// When `SIGCHLD` first came since the last reaping: runners wait to be reaped.
    unreaped_since: Option<Instant>,
    /// When `SIGCHLD` last came: a runner ended.
    last_end: Option<Instant>,
}

impl ReapTimer {
    fn forked(&mut self, now: Instant) {
        self.last_fork = Some(now);
    }

    fn ended(&mut self, now: Instant) {
        self.unreaped_since.get_or_insert(now);
        self.last_end = Some(now);
    }

    fn reaped(&mut self) {
        self.unreaped_since = None;
    }

    /// How long reaping may still wait at `now`: `None` when no runner waits for it,
    /// zero when it is due.
    fn wait(&self, now: Instant) -> Option<Duration> {
        let since = self.unreaped_since?;
        let at_most = (since + REAP_AT_MOST).saturating_duration_since(now);
        let last_busy = self.last_fork.max(self.last_end);
        let quiet = last_busy.map_or(Duration::ZERO, |at| {
            (at + REAP_QUIET).saturating_duration_since(now)
        });
        Some(at_most.min(quiet))
    }
}

impl Server {
    fn send(&mut self, event: ForkEvent) -> Result<(), ForkServerError> {
        let mut frame = BytesMut::new();
        self.codec.encode(event, &mut frame)?;
        self.control
            .write_all(&frame)
            .map_err(|source| ForkServerError::Io {
                what: "cannot write to the controller",
                source,
            })
    }

    /// How long reaping may still wait at `now` ([`ReapTimer::wait`]); once the
    /// controller has closed the control socket, no fork comes: reaping waits no more.
    fn reap_wait(&self, now: Instant) -> Option<Duration> {
        let wait = self.reaping.wait(now)?;
        Some(if self.closing { Duration::ZERO } else { wait })
    }

    /// Reaps every child that ended and reports it.
    fn reap(&mut self) -> Result<(), ForkServerError> {
        self.reaping.reaped();
        loop {
            let (pid, code, signal) = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => (pid, Some(code), None),
                Ok(WaitStatus::Signaled(pid, signal, _)) => (pid, None, Some(signal as i32)),
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return Ok(()),
                Ok(_) => continue,
                Err(Errno::EINTR) => continue,
                Err(err) => return Err(io_error("cannot reap a runner")(err)),
            };
            self.live.remove(&pid);
            if !self.closing {
                let pid = u32::try_from(pid.as_raw()).unwrap_or_default();
                self.send(ForkEvent::Exited { pid, code, signal })?;
            }
        }
    }

    /// Reads what the control socket has and carries out each complete request;
    /// `Some` in a forked child.
    fn read_requests(&mut self) -> Result<Option<Served>, ForkServerError> {
        let mut chunk = [0u8; READ_CHUNK];
        let (read, fds) = match proto::fdpass::receive_with_fds(self.control.as_fd(), &mut chunk) {
            Ok(received) => received,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => return Ok(None),
            Err(source) => {
                return Err(ForkServerError::Io {
                    what: "cannot read from the controller",
                    source,
                });
            }
        };
        self.fds.extend(fds);
        if read == 0 {
            self.closing = true;
            self.fds.clear();
            return Ok(None);
        }
        self.input.extend_from_slice(&chunk[..read]);
        while let Some(request) = self.codec.decode(&mut self.input)? {
            match request {
                ForkRequest::Fork { id } => {
                    self.reaping.forked(Instant::now());
                    if let Some(forked) = self.fork_one(id)? {
                        return Ok(Some(forked));
                    }
                }
                ForkRequest::Kill { pid } => self.kill(pid),
            }
        }
        Ok(None)
    }

    /// Forks the runner asked for by `id`; `Some` in the child.
    fn fork_one(&mut self, id: u64) -> Result<Option<Served>, ForkServerError> {
        let Some(connection) = self.fds.pop_front() else {
            return self
                .send(ForkEvent::ForkFailed {
                    id,
                    message: "no connection came with the request".into(),
                })
                .map(|()| None);
        };
        if !self.walk.as_ref().is_some_and(Walk::is_current) {
            self.walk = Walk::ahead(&self.protected_paths);
        }
        let server_pid = getpid();
        // SAFETY: this process has one thread and no runtime (see the module's
        // documentation), so the child starts with no lock held and no other thread's
        // state half-changed; it returns from here straight into the runner's start.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => Ok(Some(Served::Forked {
                connection,
                parent: server_pid,
                walk: self.walk.take(),
            })),
            Ok(ForkResult::Parent { child }) => {
                drop(connection);
                self.live.insert(child);
                let pid = u32::try_from(child.as_raw()).unwrap_or_default();
                self.send(ForkEvent::Forked { id, pid }).map(|()| None)
            }
            Err(err) => {
                drop(connection);
                self.send(ForkEvent::ForkFailed {
                    id,
                    message: format!("fork failed: {err}"),
                })
                .map(|()| None)
            }
        }
    }

    /// Kills a forked runner that has not been reaped: its pid cannot name another
    /// process yet.
    fn kill(&self, pid: u32) {
        let Ok(raw) = i32::try_from(pid) else { return };
        let pid = Pid::from_raw(raw);
        if self.live.contains(&pid) {
            let _ = kill(pid, Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_to_reap_waits_for_nothing() {
        let mut timer = ReapTimer::default();
        timer.forked(Instant::now());
        assert_eq!(timer.wait(Instant::now()), None);
    }

    #[test]
    fn runners_that_ended_wait_for_a_pause_in_the_forks() {
        let start = Instant::now();
        let mut timer = ReapTimer::default();
        timer.forked(start);
        timer.ended(start + Duration::from_millis(10));
        // Forks keep coming: the pause has not come yet.
        timer.forked(start + Duration::from_millis(30));
        let at = start + Duration::from_millis(40);
        assert_eq!(timer.wait(at), Some(Duration::from_millis(40)));
        // The pause came.
        assert_eq!(
            timer.wait(start + Duration::from_millis(80)),
            Some(Duration::ZERO)
        );
    }

    /// Marks something every 10 ms from `start` (a fork or an end: `busy`), with a
    /// runner that ended at `start`: reaping waits, up to the bound and no longer.
    /// Returns when the bound came.
    fn busy_without_a_pause(
        timer: &mut ReapTimer,
        start: Instant,
        busy: fn(&mut ReapTimer, Instant),
    ) -> Instant {
        timer.ended(start);
        let mut now = start;
        while now < start + REAP_AT_MOST {
            busy(timer, now);
            assert!(timer.wait(now).is_some_and(|wait| wait > Duration::ZERO));
            now += Duration::from_millis(10);
        }
        busy(timer, now);
        assert_eq!(timer.wait(now), Some(Duration::ZERO));
        now
    }

    #[test]
    fn forks_without_a_pause_hold_no_runner_past_the_bound() {
        let start = Instant::now();
        let mut timer = ReapTimer::default();
        let now = busy_without_a_pause(&mut timer, start, ReapTimer::forked);
        // Reaped: the bound starts again with the next runner that ends.
        timer.reaped();
        assert_eq!(timer.wait(now), None);
        timer.ended(now);
        assert_eq!(timer.wait(now), Some(REAP_QUIET));
    }

    #[test]
    fn runners_ending_one_after_another_wait_for_a_pause_in_the_ends() {
        let start = Instant::now();
        let mut timer = ReapTimer::default();
        // No fork for long: the runs of a timer's burst were forked ahead of it.
        timer.forked(start);
        let burst = start + Duration::from_secs(1);
        for offset in [0, 20, 40] {
            timer.ended(burst + Duration::from_millis(offset));
        }
        let last = burst + Duration::from_millis(40);
        assert_eq!(timer.wait(last), Some(REAP_QUIET));
        assert_eq!(
            timer.wait(last + REAP_QUIET - Duration::from_millis(1)),
            Some(Duration::from_millis(1))
        );
        assert_eq!(timer.wait(last + REAP_QUIET), Some(Duration::ZERO));
    }

    #[test]
    fn ends_without_a_pause_hold_no_runner_past_the_bound() {
        let mut timer = ReapTimer::default();
        busy_without_a_pause(&mut timer, Instant::now(), ReapTimer::ended);
    }

    #[test]
    fn a_runner_that_ended_alone_is_reaped_after_the_pause() {
        let start = Instant::now();
        let mut timer = ReapTimer::default();
        timer.ended(start);
        assert_eq!(timer.wait(start), Some(REAP_QUIET));
        assert_eq!(timer.wait(start + REAP_QUIET), Some(Duration::ZERO));
    }
}
