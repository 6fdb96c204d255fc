//! `Action::Commands`: runs each command (with `/bin/sh -c`, or directly when it is plain
//! words: [`crate::argv`]) in its own process group,
//! streams its output, enforces the time limit and `Cancel`, then ends and sweeps whatever
//! the command left behind.

use std::collections::BTreeSet;
use std::time::Duration;

use nix::sys::signal::Signal;
use proto::{ExitReport, MAX_OUTPUT_CHUNK, OutputStream, RunnerMessage};
use tokio::io::AsyncReadExt as _;
use tokio::time::{Instant, sleep_until};

use crate::connection::{Stop, wait_stop};
use crate::process_tree::{self, POLL_INTERVAL};
use crate::{Finish, Work};

/// How long the pipes are still read after the direct child exited, for output written by
/// processes it left behind.
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// How long to wait for a process group to vanish after SIGKILL before giving up on it.
const AFTER_KILL_WAIT: Duration = Duration::from_secs(2);

/// Why the runner ended a command before it exited by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ended {
    TimedOut,
    Stopped(Stop),
}

/// Runs `commands` in order, stopping at the first one that does not succeed.
pub async fn run_commands(
    work: &mut Work<'_>,
    commands: &[String],
    env: &[(String, String)],
    dir_work: &str,
) -> Finish {
    for (index, command) in commands.iter().enumerate() {
        if let Some(finish) = ended_before_start(work) {
            return finish;
        }
        let (report, ended) = match run_one(work, index, command, env, dir_work).await {
            Ok(done) => done,
            Err(err) => {
                let summary = not_started_summary(index, &err);
                work.reporter.log(summary.clone()).await;
                return Finish::fail(summary);
            }
        };
        // Queued: the next command's start or the end of the work follows at once.
        work.reporter
            .queue(RunnerMessage::CommandExited {
                index,
                exit: report,
            })
            .await;
        match ended {
            Some(Ended::TimedOut) => return Finish::timed_out(timed_out_summary(work.timeout_ms)),
            Some(Ended::Stopped(stop)) => return Finish::fail(cancelled_summary(&stop.reason())),
            None => {}
        }
        if !report.success() {
            return Finish::fail(failed_summary(index, &report));
        }
    }
    Finish {
        success: true,
        summary: success_summary(commands.len()),
        timed_out: false,
    }
}

/// A stop requested or a time limit passed between two commands.
fn ended_before_start(work: &Work<'_>) -> Option<Finish> {
    if let Some(stop) = work.stop.borrow().clone() {
        return Some(Finish::fail(cancelled_summary(&stop.reason())));
    }
    if work
        .deadline
        .is_some_and(|deadline| Instant::now() >= deadline)
    {
        return Some(Finish::timed_out(timed_out_summary(work.timeout_ms)));
    }
    None
}

/// Reads from an optional pipe into the spare room of `buf` (never zeroed: most commands
/// write a few lines, and zeroing two 64 KiB buffers per command cost a fault for each
/// of their pages); never completes when the pipe is closed already.
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut bytes::BytesMut,
) -> std::io::Result<usize> {
    match pipe {
        // At most one chunk of the protocol, whatever room `buf` has (it is emptied
        // after each read, see `forward`).
        Some(pipe) => pipe.take(MAX_OUTPUT_CHUNK as u64).read_buf(buf).await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`, or forever when there is no such instant.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends a chunk read from a pipe, or closes the pipe on EOF or error.
async fn forward<R>(
    work: &mut Work<'_>,
    read: std::io::Result<usize>,
    pipe: &mut Option<R>,
    stream: OutputStream,
    buf: &mut bytes::BytesMut,
) {
    match read {
        Ok(0) => *pipe = None,
        Ok(n) => {
            let data = buf[..n].to_vec();
            // Emptied, its room kept for the next read.
            buf.clear();
            work.reporter
                .send(RunnerMessage::Output { stream, data })
                .await;
        }
        Err(err) => {
            eprintln!("svc-runner: reading command {stream:?}: {err}");
            *pipe = None;
        }
    }
}

/// Sets each configured limit, soft and hard, in the current (child) process. A limit is
/// only ever lowered: one above the inherited hard limit is clamped to it, since raising
/// it would need a privilege the service does not keep.
fn apply_limits(limits: &proto::ResourceLimits) -> std::io::Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    for (resource, value) in [
        (Resource::RLIMIT_NPROC, limits.nproc),
        (Resource::RLIMIT_NOFILE, limits.nofile),
        (Resource::RLIMIT_AS, limits.address_space),
        (Resource::RLIMIT_DATA, limits.data),
    ] {
        if let Some(value) = value {
            let (_, hard) = getrlimit(resource).map_err(std::io::Error::from)?;
            let value = value.min(hard);
            setrlimit(resource, value, value).map_err(std::io::Error::from)?;
        }
    }
    Ok(())
}

/// Moves the current (child) process into the run's cgroup, in each hierarchy: `0`
/// written to `cgroup.procs` is the writer. Async-signal-safe.
fn join_cgroup(procs: &[std::os::fd::RawFd]) -> std::io::Result<()> {
    for fd in procs {
        // SAFETY: writes one byte from a static buffer to a descriptor the runner keeps
        // open until the command has started.
        if unsafe { libc::write(*fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sets `no_new_privs` in the current (child) process: from here on, no exec grants
/// privileges (setuid and setgid bits, file capabilities are ignored), whoever the command
/// runs as. Async-signal-safe.
fn set_no_new_privs() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Starts `argv` in its own process group, with the job's environment, working
/// directory, resource limits, capabilities and sandbox applied in the child
/// ([`crate::spawn`]).
fn spawn(
    work: &Work<'_>,
    argv: &[&str],
    env: &[(String, String)],
    dir_work: &str,
) -> std::io::Result<crate::spawn::Child> {
    let limits = work.limits;
    let keep_capabilities = work.keep_capabilities;
    let sandbox = work.sandbox;
    let cgroup: Vec<std::os::fd::RawFd> = work
        .cgroup
        .iter()
        .map(std::os::fd::AsRawFd::as_raw_fd)
        .collect();
    // In the run's PID namespace the runner, outside it, is pid 0 to the command.
    let runner_pid = if work.contained.is_some() {
        nix::unistd::Pid::from_raw(0)
    } else {
        nix::unistd::getpid()
    };
    // Runs in the child between the clone and the program: system calls only
    // (open, write, close, getrlimit, setrlimit, capget, capset, prctl, getppid,
    // landlock_restrict_self), no allocation.
    let birthplace = work.birthplace;
    let pre_exec = move || {
        end_with_runner(runner_pid)?;
        join_cgroup(&cgroup)?;
        if let Some(place) = birthplace {
            place.restore_oom_score()?;
        }
        apply_limits(&limits)?;
        if let Some(keep) = keep_capabilities {
            crate::capabilities::keep_only(keep)?;
        }
        set_no_new_privs()?;
        if let Some(ruleset) = sandbox {
            crate::sandbox::restrict(ruleset)?;
        }
        Ok(())
    };
    let spec = crate::spawn::Spec {
        argv,
        env,
        dir: dir_work,
    };
    crate::spawn::spawn(&spec, &pre_exec, work.birthplace)
}

/// In the command's process, before it executes: if the runner dies (killed, say) before
/// it has told the controller the command's process group, nobody could end the command;
/// so it gets SIGKILL when the runner dies. Checked against the runner's pid afterwards
/// (0 in the run's PID namespace, where an orphan's parent would be the init, 1), in
/// case the runner died before the call. Async-signal-safe.
fn end_with_runner(runner_pid: nix::unistd::Pid) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
    if nix::unistd::getppid() != runner_pid {
        // The runner is gone (no allocation here: see `spawn`).
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Runs command `index` to its end: started, its output forwarded, ended at its time
/// limit or when stopped, its process group and leftovers ended; how it exited.
async fn run_one(
    work: &mut Work<'_>,
    index: usize,
    command: &str,
    env: &[(String, String)],
    dir_work: &str,
) -> Result<(ExitReport, Option<Ended>), String> {
    let started = Instant::now();
    let (mut child, pgid) = start_command(work, index, command, env, dir_work).await?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut out_buf = bytes::BytesMut::with_capacity(MAX_OUTPUT_CHUNK);
    let mut err_buf = bytes::BytesMut::with_capacity(MAX_OUTPUT_CHUNK);
    let mut watch = Watch::default();
    let grace = work.kill_grace;
    loop {
        if watch.exit.is_some() && stdout.is_none() && stderr.is_none() {
            break;
        }
        let running = watch.exit.is_none();
        let deadline = work.deadline;
        let escalate_at = watch
            .term_sent
            .filter(|_| !watch.kill_sent)
            .map(|at| at + grace);
        tokio::select! {
            read = read_some(&mut stdout, &mut out_buf) => {
                forward(work, read, &mut stdout, OutputStream::Stdout, &mut out_buf).await;
            }
            read = read_some(&mut stderr, &mut err_buf) => {
                forward(work, read, &mut stderr, OutputStream::Stderr, &mut err_buf).await;
            }
            waited = child.wait(), if running => watch.exited(waited, started, index),
            () = sleep_until_opt(watch.drain_until) => break,
            () = sleep_until_opt(deadline), if running && watch.ended.is_none() => {
                let note = format!(
                    "time limit of {} reached: sending SIGTERM to process group {pgid}",
                    format_secs(work.timeout_ms.unwrap_or(0))
                );
                watch.terminate(work, pgid, Ended::TimedOut, note).await;
            }
            stop = wait_stop(&mut work.stop), if running && watch.ended.is_none() => {
                let note = format!("{}: sending SIGTERM to process group {pgid}", stop_note(&stop));
                watch.terminate(work, pgid, Ended::Stopped(stop), note).await;
            }
            () = sleep_until_opt(escalate_at) => watch.escalate(work, pgid).await,
        }
    }
    drop(stdout);
    drop(stderr);
    end_group(work, pgid, watch.term_sent, watch.kill_sent).await;
    sweep(work).await;
    Ok(watch.report())
}

/// Starts `command`: plain words directly; a program that cannot be started that way
/// through the shell after all, for the shell's own message and exit code; so is a file
/// that is no program (a script without `#!`), which the shell runs as a shell script
/// (as `execvp` would). Tells the controller its process group; the child and the group.
async fn start_command(
    work: &mut Work<'_>,
    index: usize,
    command: &str,
    env: &[(String, String)],
    dir_work: &str,
) -> Result<(crate::spawn::Child, i32), String> {
    let direct = crate::argv::plain_words(command)
        .map(|words| {
            // What the shell would add: it exports PWD, the working directory.
            let mut env = env.to_vec();
            env.retain(|(name, _)| name != "PWD");
            env.push(("PWD".to_string(), dir_work.to_string()));
            spawn(work, &words, &env, dir_work)
        })
        .and_then(|spawned| match spawned {
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) || err.raw_os_error() == Some(libc::ENOEXEC) =>
            {
                None
            }
            other => Some(other),
        });
    let child = match direct {
        Some(spawned) => spawned,
        None => spawn(work, &["/bin/sh", "-c", command], env, dir_work),
    }
    .map_err(|err| err.to_string())?;
    let pid = child.id();
    let pgid = i32::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    work.reporter
        .send(RunnerMessage::CommandStarted {
            index,
            command: command.to_string(),
            pid,
        })
        .await;
    Ok((child, pgid))
}

/// What [`run_one`] has seen of its command so far.
#[derive(Default)]
struct Watch {
    /// (code, signal) once the direct child exited.
    exit: Option<(Option<i32>, Option<i32>)>,
    duration: Duration,
    /// After the exit, how long output is still read.
    drain_until: Option<Instant>,
    /// Why it was ended, when it was.
    ended: Option<Ended>,
    term_sent: Option<Instant>,
    kill_sent: bool,
}

impl Watch {
    /// The direct child exited.
    fn exited(
        &mut self,
        waited: std::io::Result<std::process::ExitStatus>,
        started: Instant,
        index: usize,
    ) {
        self.duration = started.elapsed();
        self.exit = Some(match waited {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt as _;
                (status.code(), status.signal())
            }
            Err(err) => {
                eprintln!("svc-runner: waiting for command {index}: {err}");
                (None, None)
            }
        });
        self.drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
    }

    /// Ends the command for `why`: `note` in the log, SIGTERM to its group.
    async fn terminate(&mut self, work: &mut Work<'_>, pgid: i32, why: Ended, note: String) {
        work.reporter.log(note).await;
        self.ended = Some(why);
        process_tree::signal_group(pgid, Signal::SIGTERM);
        self.term_sent = Some(Instant::now());
    }

    /// The grace after SIGTERM is over: SIGKILL to what is left of the group.
    async fn escalate(&mut self, work: &mut Work<'_>, pgid: i32) {
        self.kill_sent = true;
        let owned: BTreeSet<i32> = if self.exit.is_none() {
            BTreeSet::from([pgid])
        } else {
            BTreeSet::new()
        };
        process_tree::reap_zombies(&owned);
        if process_tree::group_alive(pgid) {
            work.reporter.log(kill_note(pgid, work.kill_grace)).await;
            process_tree::signal_group(pgid, Signal::SIGKILL);
        }
    }

    fn report(self) -> (ExitReport, Option<Ended>) {
        let (code, signal) = self.exit.unwrap_or((None, None));
        let report = ExitReport {
            code,
            signal,
            timed_out: self.ended == Some(Ended::TimedOut),
            cancelled: matches!(self.ended, Some(Ended::Stopped(_))),
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
        };
        (report, self.ended)
    }
}

/// Kills whatever the command left outside its process group: every other process of
/// the run's PID namespace (through its init), or without one, the orphans re-parented
/// to the runner.
async fn sweep(work: &mut Work<'_>) {
    let swept = match work.contained {
        Some(contained) => match contained.sweep().await {
            Ok(swept) => usize::try_from(swept).unwrap_or(usize::MAX),
            Err(err) => {
                work.reporter
                    .log(format!("cannot sweep the run's namespace: {err}"))
                    .await;
                0
            }
        },
        None => process_tree::sweep(&BTreeSet::new()).await,
    };
    if swept > 0 {
        work.reporter
            .log(format!(
                "killed {swept} leftover process{} of the command that had left its process group",
                if swept == 1 { "" } else { "es" }
            ))
            .await;
    }
}

/// Ends what is left of process group `pgid` after the direct child exited: SIGTERM (unless
/// already sent at `term_sent`), SIGKILL after the grace period, returning as soon as the
/// group is gone.
async fn end_group(work: &mut Work<'_>, pgid: i32, term_sent: Option<Instant>, kill_sent: bool) {
    let grace = work.kill_grace;
    let none = BTreeSet::new();
    process_tree::reap_zombies(&none);
    if !process_tree::group_alive(pgid) {
        return;
    }
    let term_at = match term_sent {
        Some(at) => at,
        None => {
            work.reporter
                .log(format!(
                    "the command left processes running: sending SIGTERM to process group {pgid}"
                ))
                .await;
            process_tree::signal_group(pgid, Signal::SIGTERM);
            Instant::now()
        }
    };
    if !kill_sent {
        if wait_group_gone(pgid, term_at + grace).await {
            return;
        }
        work.reporter.log(kill_note(pgid, grace)).await;
    }
    process_tree::signal_group(pgid, Signal::SIGKILL);
    if !wait_group_gone(pgid, Instant::now() + AFTER_KILL_WAIT).await {
        work.reporter
            .log(format!("process group {pgid} is still there after SIGKILL"))
            .await;
    }
}

/// Polls until process group `pgid` is gone (true) or `until` passes (false), reaping the
/// runner's zombie orphans on the way (a zombie still counts as a group member).
async fn wait_group_gone(pgid: i32, until: Instant) -> bool {
    let none = BTreeSet::new();
    loop {
        process_tree::reap_zombies(&none);
        if !process_tree::group_alive(pgid) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL.min(until.saturating_duration_since(Instant::now())))
            .await;
    }
}

fn stop_note(stop: &Stop) -> String {
    match stop {
        Stop::Cancel(reason) => format!("cancelled ({reason})"),
        Stop::ControllerGone => "connection to the controller lost".into(),
        Stop::Terminated => "runner received SIGTERM".into(),
    }
}

fn kill_note(pgid: i32, grace: Duration) -> String {
    let ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    format!(
        "process group {pgid} still running {} after SIGTERM: sending SIGKILL",
        format_secs(ms)
    )
}

/// Milliseconds as seconds for humans: `1000` → `1s`, `1500` → `1.5s`, `250` → `0.25s`.
pub fn format_secs(ms: u64) -> String {
    let whole = ms / 1000;
    let frac = ms % 1000;
    if frac == 0 {
        format!("{whole}s")
    } else {
        let frac = format!("{frac:03}");
        format!("{whole}.{}s", frac.trim_end_matches('0'))
    }
}

/// Summary of a run whose commands all succeeded.
pub fn success_summary(count: usize) -> String {
    match count {
        0 => "no commands to run".into(),
        1 => "the command succeeded".into(),
        n => format!("all {n} commands succeeded"),
    }
}

/// Summary of a run stopped by command `index` (0-based) not succeeding.
pub fn failed_summary(index: usize, report: &ExitReport) -> String {
    let number = index + 1;
    match (report.code, report.signal) {
        (Some(code), _) => format!("command {number} exited with code {code}"),
        (None, Some(signal)) => {
            let name = Signal::try_from(signal)
                .map(|s| format!(" ({})", s.as_str()))
                .unwrap_or_default();
            format!("command {number} was killed by signal {signal}{name}")
        }
        (None, None) => format!("command {number} ended in an unknown way"),
    }
}

/// Summary of a run that hit its time limit.
pub fn timed_out_summary(timeout_ms: Option<u64>) -> String {
    format!("timed out after {}", format_secs(timeout_ms.unwrap_or(0)))
}

/// Summary of a run ended by a cancel request.
pub fn cancelled_summary(reason: &str) -> String {
    format!("cancelled: {reason}")
}

/// Summary of a run whose command `index` (0-based) could not be spawned.
pub fn not_started_summary(index: usize, err: &str) -> String {
    format!("command {} could not be started: {err}", index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(code: Option<i32>, signal: Option<i32>) -> ExitReport {
        ExitReport {
            code,
            signal,
            timed_out: false,
            cancelled: false,
            duration_ms: 1,
        }
    }

    #[test]
    fn seconds_are_short() {
        assert_eq!(format_secs(1000), "1s");
        assert_eq!(format_secs(1500), "1.5s");
        assert_eq!(format_secs(250), "0.25s");
        assert_eq!(format_secs(3_600_000), "3600s");
        assert_eq!(format_secs(1), "0.001s");
        assert_eq!(format_secs(0), "0s");
    }

    #[test]
    fn summaries() {
        assert_eq!(success_summary(3), "all 3 commands succeeded");
        assert_eq!(success_summary(1), "the command succeeded");
        assert_eq!(
            failed_summary(1, &report(Some(1), None)),
            "command 2 exited with code 1"
        );
        assert_eq!(
            failed_summary(0, &report(None, Some(9))),
            "command 1 was killed by signal 9 (SIGKILL)"
        );
        assert_eq!(timed_out_summary(Some(1000)), "timed out after 1s");
        assert_eq!(cancelled_summary("shutdown"), "cancelled: shutdown");
        assert_eq!(
            not_started_summary(0, "No such file or directory (os error 2)"),
            "command 1 could not be started: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn notes() {
        assert_eq!(
            kill_note(42, Duration::from_millis(300)),
            "process group 42 still running 0.3s after SIGTERM: sending SIGKILL"
        );
        assert_eq!(stop_note(&Stop::Cancel("user".into())), "cancelled (user)");
    }
}
