//! svc-runner: performs one execution for the controller, then exits.
//!
//! The controller starts `svc-runner --socket PATH`, writes a one-time token on its
//! standard input, and waits for it on the Unix socket at PATH. The runner connects, says
//! `Hello`, receives the work (`Execute`), switches to the job's user, does the work while
//! streaming what happens, and ends with `Finished` (or `Error` when the work could not be
//! done at all). See the `proto` crate for the conversation.
//!
//! For runs of commands the controller also keeps one `svc-runner --fork-server`
//! ([`fork_server`]), which forks a runner per execution with its connection already
//! made; from its `Hello` on, a forked runner is like any other.

pub mod argv;
pub mod birthplace;
pub mod capabilities;
pub mod commands;
pub mod connection;
pub mod credentials;
pub mod fork_server;
pub mod http_call;
pub mod made_ahead;
pub mod namespaces;
pub mod process_tree;
pub mod spawn;
pub mod usage;

/// The sandbox of the commands: built here or by the controller, applied by
/// [`commands`] (shared with the controller, which builds it for busy jobs).
pub use proto::sandbox;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use nix::unistd::Pid;
use proto::{Action, RunnerMessage};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::connection::{Reporter, Stop, StopHandle, wait_stop};
use crate::made_ahead::MadeAhead;
use crate::namespaces::EnterError;

/// Command line of `svc-runner`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "svc-runner",
    version,
    about = "Runs one execution of an svc job for svc-controller (not meant to be started by hand)",
    long_about = "Runs one execution of an svc job for svc-controller; not meant to be started \
        by hand. svc-controller starts one runner per execution and hands it a one-time token \
        on standard input. The runner connects back to the controller on the Unix socket \
        PATH, receives the work, makes the run's PID, mount and IPC namespaces (where it \
        can; the run's log says how the run is contained), switches to the job's user and \
        group, runs the job's \
        commands (or makes the HTTP call of a JobHttp) in their own process group, each \
        with no_new_privs, its resource limits and the run's Landlock file-system sandbox \
        (what it enforces is logged once per run), streams their output to the \
        controller, enforces the time limit, ends whatever the commands left behind, and \
        exits. For runs of commands, svc-controller keeps one runner started with \
        --fork-server instead, which forks a runner per execution with its connection \
        already made (named svc-forkserver in the process list). It never listens on \
        any socket, and never writes state or logs: the controller does."
)]
pub struct Cli {
    /// Unix socket of the controller to connect to. A fork server does not connect to
    /// it (its runners are given their connections); there it names the controller the
    /// server belongs to, for whoever reads the process list.
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present = "probe_containment"
    )]
    pub socket: Option<PathBuf>,
    /// Make a run's namespaces as for a run of commands (as user nobody when started as
    /// root without CAP_SYS_ADMIN), end them, print one line saying how runs are
    /// contained here and why, and exit: svc-controller's start-up and --check.
    #[arg(long)]
    pub probe_containment: bool,
    /// Serve the controller as its runner fork server: read its requests on standard
    /// input (a Unix socket) and fork one runner per request, whose connection comes
    /// with the request.
    #[arg(long)]
    pub fork_server: bool,
    /// With `--fork-server`: a path every run's sandbox keeps the commands from reading
    /// (repeated for each). The server walks from `/` to them once for all its runners,
    /// which otherwise each walk when the controller's `Welcome` names them.
    #[arg(long, value_name = "PATH", requires = "fork_server")]
    pub protect: Vec<String>,
    /// The open-file limit to set before anything else, as `SOFT:HARD`: the controller
    /// raises its own soft limit for its connections, and the commands get the one the
    /// service was started with. Set here rather than between the controller's fork and
    /// exec, so that the controller can start runners with `posix_spawn` instead of
    /// copying its address space with `fork`.
    #[arg(long, value_name = "SOFT:HARD", value_parser = parse_nofile)]
    pub nofile: Option<(u64, u64)>,
}

/// Parses `SOFT:HARD` of `--nofile`.
fn parse_nofile(text: &str) -> Result<(u64, u64), String> {
    let (soft, hard) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not SOFT:HARD"))?;
    let number = |part: &str| {
        part.parse::<u64>()
            .map_err(|err| format!("{part:?} in {text:?}: {err}"))
    };
    Ok((number(soft)?, number(hard)?))
}

/// Sets the open-file limit given with `--nofile`; a failure is reported, not fatal
/// (the commands then run with the controller's limit).
pub fn apply_nofile(limit: Option<(u64, u64)>) {
    let Some((soft, hard)) = limit else { return };
    if let Err(err) =
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, soft, hard)
    {
        eprintln!("svc-runner: warning: cannot set the open-file limit to {soft}:{hard}: {err}");
    }
}

/// How the runner ends; the process exit code is [`RunnerExit::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerExit {
    /// The work was done and its result reported (whether it succeeded or not).
    Reported,
    /// The work could not be done (reported with `Error` when possible).
    NotDone,
    /// The handshake failed or the controller connection was lost.
    ConnectionFailed,
}

impl RunnerExit {
    /// The process exit code: 0, 1 or 2.
    pub fn code(self) -> u8 {
        match self {
            RunnerExit::Reported => 0,
            RunnerExit::NotDone => 1,
            RunnerExit::ConnectionFailed => 2,
        }
    }
}

/// The end of the work, sent as [`RunnerMessage::Finished`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// True when the work succeeded.
    pub success: bool,
    /// One line for the log and the UI.
    pub summary: String,
    /// True when the work ended because its time limit ran out.
    pub timed_out: bool,
}

impl Finish {
    /// A failed end with this summary.
    pub fn fail(summary: impl Into<String>) -> Self {
        Self {
            success: false,
            summary: summary.into(),
            timed_out: false,
        }
    }

    /// The end of work whose time limit ran out.
    pub fn timed_out(summary: impl Into<String>) -> Self {
        Self {
            timed_out: true,
            ..Self::fail(summary)
        }
    }
}

/// What the work needs while it runs.
#[derive(Debug)]
pub struct Work<'a> {
    /// Where messages go.
    pub reporter: &'a mut Reporter,
    /// Tells when the work must stop early (`Cancel`, lost connection, SIGTERM).
    pub stop: watch::Receiver<Option<Stop>>,
    /// End of the time limit of the whole execution.
    pub deadline: Option<Instant>,
    /// The time limit as requested, for messages.
    pub timeout_ms: Option<u64>,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Resource limits set in each command process before it executes.
    pub limits: proto::ResourceLimits,
    /// For commands that run as root: the only capabilities they keep.
    pub keep_capabilities: Option<u64>,
    /// The Landlock ruleset applied to each command ([`sandbox::restrict`]).
    pub sandbox: Option<std::os::fd::RawFd>,
    /// The run's namespaces, when it has them ([`namespaces`]): the commands are born in
    /// them, and what a command leaves is swept by the namespace's init.
    pub contained: Option<&'a namespaces::Contained>,
    /// The run's cgroup (`cgroup.procs` of each hierarchy), opened while the runner
    /// was still privileged: each command joins it before it executes.
    pub cgroup: &'a [std::os::fd::OwnedFd],
    /// The thread already in the run's cgroup that forks the commands, born there
    /// ([`birthplace`]); `cgroup` is then empty.
    pub birthplace: Option<&'a birthplace::Birthplace>,
}

/// Runs the whole life of a runner started by the controller: reads its token, connects
/// to `socket` and does the one execution. `parent` is the parent pid read at startup.
pub async fn run(socket: &std::path::Path, parent: Pid) -> RunnerExit {
    let stop = prepare();
    let token = match connection::read_token(std::io::stdin().lock()) {
        Ok(token) => token,
        Err(err) => {
            eprintln!("svc-runner: {err}");
            return RunnerExit::ConnectionFailed;
        }
    };
    let (reader, writer) = match connection::connect(socket).await {
        Ok(halves) => halves,
        Err(err) => {
            eprintln!("svc-runner: {err}");
            return RunnerExit::ConnectionFailed;
        }
    };
    serve(reader, writer, token, stop, parent, None).await
}

/// Runs the whole life of a runner forked by the fork server, on the connection that
/// came with its request; `parent` is the server, `walk` the server's walk for the
/// sandbox (see [`sandbox::Walk`]).
pub async fn run_forked(
    connection: std::os::fd::OwnedFd,
    parent: Pid,
    walk: Option<sandbox::Walk>,
) -> RunnerExit {
    let stop = prepare();
    let (reader, writer) = match connection::from_fd(connection) {
        Ok(halves) => halves,
        Err(err) => {
            eprintln!("svc-runner: {err}");
            return RunnerExit::ConnectionFailed;
        }
    };
    // No token: the connection was made for this runner before it was forked.
    serve(reader, writer, String::new(), stop, parent, walk).await
}

/// What every runner sets up first: it becomes its commands' subreaper, and SIGTERM
/// stops its work.
fn prepare() -> Arc<StopHandle> {
    if let Err(err) = credentials::set_child_subreaper() {
        eprintln!("svc-runner: warning: cannot become a child subreaper: {err}");
    }
    let stop = StopHandle::new();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut sigterm) => {
            let stop = stop.clone();
            tokio::spawn(async move {
                if sigterm.recv().await.is_some() {
                    stop.stop(Stop::Terminated);
                }
            });
        }
        Err(err) => eprintln!("svc-runner: warning: cannot handle SIGTERM: {err}"),
    }
    stop
}

/// The runner's conversation on its connection, from `Hello` to the end of the work.
async fn serve(
    mut reader: connection::Reader,
    writer: connection::Writer,
    token: String,
    stop: Arc<StopHandle>,
    parent: Pid,
    walk: Option<sandbox::Walk>,
) -> RunnerExit {
    let mut writer = writer;
    let mut stop_rx = stop.subscribe();
    let Some((welcomed, request, sent_fd)) =
        await_work(&mut reader, &mut writer, token, walk, &mut stop_rx).await
    else {
        return RunnerExit::ConnectionFailed;
    };
    let mut made_ahead = welcomed;
    let deadline = request
        .timeout_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    tokio::spawn(connection::listen(reader, stop.clone()));
    let mut reporter = Reporter::new(writer, stop.clone());

    let sandbox = match prepare_sandbox(&request, sent_fd, made_ahead.base.take()) {
        Ok(sandbox) => sandbox,
        Err(why) => return report_error(&mut reporter, why).await,
    };
    // Opened before the switch to the job's user: the kernel judges a move into a
    // cgroup by who opened its `cgroup.procs`, so the commands can join the run's
    // cgroup but the job's user cannot move anything anywhere.
    let (birthplace, contained_ahead) = made_ahead
        .birthplace_for(&request.cgroup_procs, &request.private_dirs)
        .await;
    let procs: &[String] = match birthplace {
        Some(_) => &[],
        None => &request.cgroup_procs,
    };
    let cgroup = match open_cgroup(procs) {
        Ok(cgroup) => cgroup,
        Err(why) => return report_error(&mut reporter, why).await,
    };
    let switched = switch_and_contain(
        &mut reporter,
        &request,
        sandbox.as_ref(),
        birthplace.as_ref(),
        contained_ahead,
    );
    let contained = match switched.await {
        Ok(contained) => contained,
        Err(why) => return report_error(&mut reporter, why).await,
    };
    match credentials::tie_to_parent(parent) {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("svc-runner: the controller is gone, not starting the work");
            return RunnerExit::ConnectionFailed;
        }
        Err(err) => eprintln!("svc-runner: warning: cannot set the parent death signal: {err}"),
    }
    if let Some(prepared) = &sandbox {
        reporter
            .queue(RunnerMessage::Log {
                line: prepared.summary.clone(),
            })
            .await;
    }

    let mut work = Work {
        reporter: &mut reporter,
        stop: stop.subscribe(),
        deadline,
        timeout_ms: request.timeout_ms,
        kill_grace: Duration::from_millis(request.kill_grace_ms),
        limits: request.limits,
        keep_capabilities: request.keep_capabilities,
        sandbox: sandbox.as_ref().and_then(sandbox::Prepared::ruleset_fd),
        contained: contained.as_ref(),
        cgroup: &cgroup,
        birthplace: birthplace.as_ref(),
    };
    let finish = match &request.action {
        Action::Commands {
            commands,
            env,
            dir_work,
        } => commands::run_commands(&mut work, commands, env, dir_work).await,
        Action::Http(call) => match http_call::run_http(&mut work, call).await {
            Ok(finish) => finish,
            Err(err) => return report_error(&mut reporter, err.to_string()).await,
        },
    };

    // Nothing of the run outlives its report: whatever a command left is swept already,
    // and the end of the init ends anything started since. The init is waited for, so
    // that what the orphans it reaped used counts in the run's usage.
    if let Some(contained) = contained {
        contained.finish(request.end_yields).await;
    }
    // Out of the run's cgroup before the end is reported: the controller then finds in
    // it only what the run left.
    if let Some(birthplace) = birthplace {
        birthplace.end();
    }
    let usage = matches!(request.action, Action::Commands { .. })
        .then(usage::of_reaped_children)
        .flatten();
    report_finish(reporter, &stop, finish, usage).await
}

/// The handshake, then the wait for the work; meanwhile, started ahead of its work, the
/// runner joins the run's cgroup and builds the part of the sandbox that depends on the
/// service alone. `None`: stopped or the connection failed (said on standard error).
async fn await_work(
    reader: &mut connection::Reader,
    writer: &mut connection::Writer,
    token: String,
    walk: Option<sandbox::Walk>,
    stop_rx: &mut watch::Receiver<Option<Stop>>,
) -> Option<(
    MadeAhead,
    Box<proto::ExecRequest>,
    Option<std::os::fd::OwnedFd>,
)> {
    let welcome = tokio::select! {
        result = connection::handshake(reader, writer, token) => result,
        stop = wait_stop(stop_rx) => {
            eprintln!("svc-runner: stopped during the handshake: {}", stop.reason());
            return None;
        }
    };
    let welcomed = welcome
        .inspect_err(|err| eprintln!("svc-runner: {err}"))
        .ok()?;
    let made_ahead = MadeAhead::make(welcomed, walk).await;
    let work = tokio::select! {
        result = connection::receive_work(reader) => result,
        stop = wait_stop(stop_rx) => {
            eprintln!("svc-runner: stopped while waiting for the work: {}", stop.reason());
            return None;
        }
    };
    let (request, sent_fd) = work
        .inspect_err(|err| eprintln!("svc-runner: {err}"))
        .ok()?;
    Some((made_ahead, request, sent_fd))
}

/// Opens the `cgroup.procs` files of the run's cgroup for writing. `Err`: the run
/// cannot have the limits it was promised, and says why.
fn open_cgroup(files: &[String]) -> Result<Vec<std::os::fd::OwnedFd>, String> {
    files
        .iter()
        .map(|file| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(file)
                .map(std::os::fd::OwnedFd::from)
                .map_err(|err| format!("cannot join the run's cgroup {file}: {err}"))
        })
        .collect()
}

/// Makes the run's namespaces (for a run of commands) and switches to the job's user, in
/// the order the runner's privileges allow; logs both. `Err`: the run cannot go on.
async fn switch_and_contain(
    reporter: &mut Reporter,
    request: &proto::ExecRequest,
    sandbox: Option<&sandbox::Prepared>,
    birthplace: Option<&birthplace::Birthplace>,
    contained_ahead: Option<Result<namespaces::Contained, EnterError>>,
) -> Result<Option<namespaces::Contained>, String> {
    let commands = matches!(request.action, Action::Commands { .. });
    let made_ahead = commands && contained_ahead.is_some() && namespaces::privileged();
    // Made before the switch to the job's user while the runner may (CAP_SYS_ADMIN),
    // so that the namespace's init stays root, out of the job's reach; made while the
    // runner waited when the run's job was known (the birthplace thread joined them).
    let mut contained = (commands && namespaces::privileged()).then(|| {
        contained_ahead
            .unwrap_or_else(|| namespaces::enter(&request.private_dirs, None, birthplace))
    });

    if let Some(wanted) = &request.credentials {
        credentials::apply(wanted).map_err(|err| err.to_string())?;
        // Queued: the start of the first command (or the call) comes right after.
        reporter
            .queue(RunnerMessage::Log {
                line: format!(
                    "running as user {} (uid {}, gid {})",
                    wanted.user_name, wanted.uid, wanted.gid
                ),
            })
            .await;
    }
    if commands && contained.is_none() {
        contained = Some(enter_as_user(&request.private_dirs));
    }
    let contained = match contained.map(|entered| contained_note(entered, made_ahead)) {
        None => None,
        Some(Ok((contained, note))) => {
            reporter.queue(RunnerMessage::Log { line: note }).await;
            contained
        }
        Some(Err(why)) => return Err(why),
    };
    if contained.is_some()
        && let Some(ruleset) = sandbox.and_then(sandbox::Prepared::ruleset_fd)
        && let Err(err) = match birthplace {
            // The run's /proc is in the mount namespace of the thread that joined it.
            Some(place) => place
                .run(&|| allow_reading_proc(ruleset))
                .and_then(|read| read),
            None => allow_reading_proc(ruleset),
        }
    {
        return Err(format!(
            "cannot let the sandbox read the run's /proc: {err}"
        ));
    }
    Ok(contained)
}

/// Sends the end of the work, unless the controller is gone, and closes the connection.
async fn report_finish(
    mut reporter: Reporter,
    stop: &StopHandle,
    finish: Finish,
    usage: Option<proto::ResourceUsage>,
) -> RunnerExit {
    if stop.current() == Some(Stop::ControllerGone) || !reporter.is_connected() {
        eprintln!(
            "svc-runner: lost the controller connection; result not reported: {}",
            finish.summary
        );
        return RunnerExit::ConnectionFailed;
    }
    let sent = reporter
        .send(RunnerMessage::Finished {
            success: finish.success,
            summary: finish.summary,
            timed_out: finish.timed_out,
            usage,
        })
        .await;
    reporter.close().await;
    if sent {
        RunnerExit::Reported
    } else {
        RunnerExit::ConnectionFailed
    }
}

/// The sandbox of a run of commands, finished while the runner may still open every
/// path (before it drops to the job's user), once for all the commands; `Err` with why
/// the commands must not run.
fn prepare_sandbox(
    request: &proto::ExecRequest,
    sent_fd: Option<std::os::fd::OwnedFd>,
    base: Option<sandbox::Base>,
) -> Result<Option<sandbox::Prepared>, String> {
    let (Some(spec), Action::Commands { .. }) = (&request.sandbox, &request.action) else {
        return Ok(None);
    };
    match (&spec.attached, sent_fd) {
        (Some(summary), Some(ruleset)) => {
            Ok(Some(sandbox::Prepared::attached(ruleset, summary.clone())))
        }
        // Not run without the sandbox it was meant to have; the run's log says why.
        (Some(_), None) => Err(
            "the controller announced the sandbox's ruleset with the work \
                                and sent none: not running the commands"
                .to_string(),
        ),
        (None, _) => sandbox::prepare(spec, base).map(Some),
    }
}

/// The namespaces of a runner without CAP_SYS_ADMIN, made after the switch to the job's
/// user, in a user namespace that maps it to itself. Not for a run as root: its
/// capabilities would only count in that namespace.
fn enter_as_user(private: &[proto::PrivateDir]) -> Result<namespaces::Contained, EnterError> {
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return Err(EnterError::Refused(
            "a run as root needs CAP_SYS_ADMIN for them (in a user namespace of its own its \
             capabilities would not count)"
                .into(),
        ));
    }
    namespaces::enter(
        private,
        Some((uid.as_raw(), nix::unistd::getegid().as_raw())),
        None,
    )
}

/// Lets the commands read the run's own `/proc` (mounted after the sandbox was built).
fn allow_reading_proc(ruleset: std::os::fd::RawFd) -> std::io::Result<()> {
    use std::os::fd::AsFd as _;
    let proc = nix::fcntl::open(
        "/proc",
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    sandbox::allow_reading_below(ruleset, proc.as_fd())
}

/// The line of the run's log that says how the run is contained (`made_ahead`: its
/// namespaces were made while the runner waited: a timer's run, a busy job's next);
/// `Err` when the run cannot go on.
fn contained_note(
    entered: Result<namespaces::Contained, EnterError>,
    made_ahead: bool,
) -> Result<(Option<namespaces::Contained>, String), String> {
    match entered {
        Ok(contained) => {
            let how = if contained.in_user_namespace {
                " (in a user namespace)"
            } else if made_ahead {
                " (made while its runner waited for it)"
            } else {
                ""
            };
            let note = format!(
                "contained: PID, mount and IPC namespaces of the run's own{how}: its processes \
                 end with it, see no other run's, and reach no other run's files"
            );
            Ok((Some(contained), note))
        }
        Err(EnterError::Refused(why)) => Ok((
            None,
            format!(
                "not contained in namespaces ({why}): its processes are ended by process \
                 group and as orphans of the runner, which a process that kills the runner \
                 escapes"
            ),
        )),
        Err(EnterError::Failed(why)) => Err(why),
    }
}

/// Reports that the work could not be done and closes the connection.
async fn report_error(reporter: &mut Reporter, message: String) -> RunnerExit {
    eprintln!("svc-runner: {message}");
    reporter.send(RunnerMessage::Error { message }).await;
    reporter.close().await;
    RunnerExit::NotDone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofile_is_soft_colon_hard() {
        assert_eq!(parse_nofile("1024:524288"), Ok((1024, 524288)));
        for bad in ["", "1024", "a:1", "1:", ":1", "1:2:3", "-1:2"] {
            assert!(parse_nofile(bad).is_err(), "{bad:?} accepted");
        }
    }
}
