//! Starting `svc-runner` processes and driving one execution over the runner socket.
//!
//! The controller owns one Unix socket (mode 0600 in a 0700 directory). For each
//! execution it spawns a runner, hands it a one-time token on standard input, and waits
//! for the runner to connect and present that token. The connection is accepted only if
//! the peer's pid is the runner just spawned. A runner for commands is forked by the
//! runner fork server instead ([`crate::runner::forkserver`]), with its connection made before it
//! exists; a runner for a JobHttp's call is always started afresh. Every failure of the runner (did not start,
//! died, sent garbage, never finished) becomes a failed [`Outcome`] with a reason; nothing
//! here can take the controller down.

mod conversation;
mod outcome;
mod socket_accept;

use crate::util::lock::MutexExt as _;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proto::ControllerCodec;
use rand::distr::{Alphanumeric, SampleString};
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Child;
use tokio::sync::oneshot;
use tokio::time::sleep;
use tokio_util::codec::Framed;

use crate::runner::cgroups::RunCgroups;
use crate::runner::forkserver::{ForkServer, ForkedRunner};
use crate::runner::sandboxes::Sandboxes;
use crate::runner::spawner::{Spawner, runner_command};
use crate::util::fsutil;

pub use self::outcome::{EndDetail, Outcome, RunEvent};
use self::socket_accept::{accept_loop, handshake_forked};

/// How long a spawned runner has to connect and say hello.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Extra time past the run's own limit and grace before the controller kills a runner
/// that failed to end the work itself.
const BACKSTOP_MARGIN: Duration = Duration::from_secs(15);
/// How long to wait for a runner to exit after it reported the end of the run.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Errors setting up the runner socket.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("cannot create the runner socket directory {dir}: {source}")]
    Dir {
        dir: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the thread that starts runners: {source}")]
    Spawner {
        #[source]
        source: io::Error,
    },
    #[error("cannot listen on the runner socket {path}: {source}")]
    Listen {
        path: String,
        #[source]
        source: io::Error,
    },
}

struct Accepted {
    framed: Framed<UnixStream, ControllerCodec>,
    version: u32,
    peer_pid: Option<u32>,
    /// The cgroup of the runner's run, made at its welcome for its thread that starts
    /// commands to join while it waits (v1; see [`RunCgroups::create_ahead`]).
    ahead: Option<crate::runner::cgroups::RunCgroup>,
}

struct HubInner {
    socket_path: PathBuf,
    runner_path: PathBuf,
    /// What the sandbox of every run protects, sent with `Welcome` so that a runner
    /// builds that part of its sandbox while it waits for work.
    protected_paths: Vec<String>,
    /// The rulesets kept for busy jobs: while one is in use, a runner is not asked to
    /// build the service's part of a sandbox ahead, since it will most likely be sent a
    /// whole one.
    sandboxes: Sandboxes,
    /// Runners spawned and not yet connected, by one-time token.
    pending: Mutex<HashMap<String, Pending>>,
    /// Starts the runners started afresh.
    spawner: Arc<Spawner>,
    /// The runner fork server, started at the first run of commands.
    forks: tokio::sync::Mutex<ForkSlot>,
    /// The runs' cgroups, once the service has set them up ([`RunnerHub::contain_runs_in`]).
    cgroups: std::sync::OnceLock<Arc<RunCgroups>>,
    /// Whether runners of commands are forked by the fork server (tests turn it off to
    /// test the other way).
    fork_enabled: std::sync::atomic::AtomicBool,
}

/// The fork server, once started; after a failed start, when to try again.
#[derive(Default)]
struct ForkSlot {
    server: Option<ForkServer>,
    retry_at: Option<std::time::Instant>,
}

/// How long runners are started afresh after the fork server could not be started.
const FORK_SERVER_RETRY: Duration = Duration::from_secs(30);

/// What a runner is started for. A runner that makes a JobHttp's call reads what a
/// remote server sends, so it is always started afresh with an address-space layout of
/// its own; a runner of commands is forked by the fork server when there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerWork {
    Commands,
    HttpCall,
}

/// A runner process: started afresh (a child of the controller, which keeps the thread
/// that started it while it lives), or forked by the fork server (its child, which
/// reports its exit).
enum RunnerProcess {
    Executed {
        child: Child,
        _started_by: Arc<Spawner>,
    },
    Forked(ForkedRunner),
}

impl RunnerProcess {
    fn id(&self) -> Option<u32> {
        match self {
            RunnerProcess::Executed { child, .. } => child.id(),
            RunnerProcess::Forked(runner) => Some(runner.id()),
        }
    }

    /// Waits for the exit; how it ended (`exit status: 0`, `signal: 9`).
    async fn wait(&mut self) -> String {
        match self {
            RunnerProcess::Executed { child, .. } => child
                .wait()
                .await
                .map_or_else(|err| err.to_string(), |status| status.to_string()),
            RunnerProcess::Forked(runner) => runner.wait().await,
        }
    }

    fn start_kill(&mut self) {
        match self {
            RunnerProcess::Executed { child, .. } => {
                let _ = child.start_kill();
            }
            RunnerProcess::Forked(runner) => runner.start_kill(),
        }
    }
}

/// A runner spawned and not yet connected.
struct Pending {
    /// Where its connection goes once it has said hello.
    accepted: oneshot::Sender<Accepted>,
    /// Its pid, once spawned: only a connection from that process is welcomed.
    pid: Option<u32>,
}

/// Cheap-to-clone handle on the runner socket.
#[derive(Clone)]
pub struct RunnerHub {
    inner: Arc<HubInner>,
    spare: Arc<Spare>,
}

/// The runner started for the next run while runs come in a burst ([`RunnerHub::take`]).
/// Kept apart from [`HubInner`], which a launched runner refers to.
#[derive(Default)]
struct Spare {
    runner: Mutex<Option<LaunchedRunner>>,
    /// A spare is being launched.
    refilling: std::sync::atomic::AtomicBool,
    /// When a runner was last taken for work, and the private directories of the run
    /// it was taken for (`None` when they were not known).
    last_take: Mutex<Option<(std::time::Instant, Option<Vec<proto::PrivateDir>>)>>,
}

/// Runs closer together than this are a burst: each takes a spare and starts the next.
const BURST_GAP: Duration = Duration::from_secs(1);
/// A spare not taken within this time is ended, so an idle service keeps no runner.
const SPARE_KEPT_FOR: Duration = Duration::from_secs(2);

impl std::fmt::Debug for RunnerHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunnerHub")
            .field("socket_path", &self.inner.socket_path)
            .field("runner_path", &self.inner.runner_path)
            .finish()
    }
}

/// Removes a pending token when the execution that registered it ends, however it ends.
struct PendingGuard {
    hub: Arc<HubInner>,
    token: String,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if let Ok(mut pending) = self.hub.pending.lock() {
            pending.remove(&self.token);
        }
    }
}

/// A runner started ahead of its work: spawned and its token registered, so it starts
/// and connects while the controller gets the run ready (state and log on disk), or
/// before a timer is due. Dropping it kills the runner, which has done nothing yet.
pub struct LaunchedRunner {
    /// The token of a runner started afresh, registered until it connects.
    _guard: Option<PendingGuard>,
    runner_path: PathBuf,
    spawned: io::Result<RunnerProcess>,
    accepted_rx: oneshot::Receiver<Accepted>,
    launched_at: std::time::Instant,
    work: RunnerWork,
    cgroups: Option<Arc<RunCgroups>>,
    /// The spare to start for the run after this one, once this run's first command
    /// has started ([`RunnerHub::take`]).
    spare_after_start: Option<SpareOrder>,
}

/// When a burst's spare runner for the run after this one is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpareStart {
    /// Now: this run follows the one before at once (its job has a queue), and the
    /// next one will follow it as soon as it ends.
    Now,
    /// Once this run's first command has started: a run begun by its trigger starts
    /// before the spare takes any of the CPU.
    AfterCommandStart,
}

/// A spare runner to start later: what [`RunnerHub::take`] leaves to the run it hands a
/// runner to, so that the spare's start (a fork, a runtime, a handshake, the next
/// run's namespaces) does not take the CPU from this run's own start. The spare starts
/// (in the background) when the order is dropped: at the run's first `CommandStarted`,
/// or whenever the run, or its runner unused, ends first.
pub(crate) struct SpareOrder {
    hub: RunnerHub,
    work: RunnerWork,
    private_dirs: Option<Vec<proto::PrivateDir>>,
}

impl Drop for SpareOrder {
    fn drop(&mut self) {
        // The spare's launch is a task: not where no runtime runs (the service's end).
        if tokio::runtime::Handle::try_current().is_ok() {
            self.hub.refill(self.work, self.private_dirs.take());
        }
    }
}

impl std::fmt::Debug for LaunchedRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchedRunner")
            .field(
                "pid",
                &self.spawned.as_ref().ok().and_then(RunnerProcess::id),
            )
            .field("launched_at", &self.launched_at)
            .field("work", &self.work)
            .finish()
    }
}

impl LaunchedRunner {
    /// The runner's pid, once started.
    pub fn pid(&self) -> Option<u32> {
        self.spawned.as_ref().ok().and_then(RunnerProcess::id)
    }

    /// Whether the runner can still be handed work: a runner waits for it for a limited
    /// time after connecting, so one launched too long ago is not used.
    pub fn is_fresh(&self) -> bool {
        self.launched_at.elapsed() < LAUNCHED_FRESH_FOR
    }
}

/// How long a launched runner is used for work; well under the runner's own wait for the
/// controller's answer after its hello.
const LAUNCHED_FRESH_FOR: Duration = Duration::from_secs(10);

impl RunnerHub {
    /// Creates the socket in `runtime_dir` and starts accepting runners, which are told
    /// `protected_paths` (see [`proto::Sandbox`]) as soon as they connect, unless a
    /// ruleset kept for a busy job is in use ([`RunnerHub::sandboxes`]).
    pub fn start(
        runtime_dir: &Path,
        runner_path: PathBuf,
        protected_paths: Vec<String>,
    ) -> Result<RunnerHub, HubError> {
        fsutil::create_dir_with_mode(runtime_dir, 0o700).map_err(|source| HubError::Dir {
            dir: runtime_dir.display().to_string(),
            source,
        })?;
        let socket_path = runtime_dir.join("runner.sock");
        let listen_err = |source| HubError::Listen {
            path: socket_path.display().to_string(),
            source,
        };
        // A socket file left by a controller that died is stale: only one controller
        // runs per dir_base.
        match std::fs::remove_file(&socket_path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(listen_err(err)),
        }
        let listener = UnixListener::bind(&socket_path).map_err(listen_err)?;
        // Its directory (0700) already keeps everyone else out.
        std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o600))
            .map_err(listen_err)?;
        let inner = Arc::new(HubInner {
            socket_path: socket_path.clone(),
            runner_path,
            protected_paths,
            sandboxes: Sandboxes::default(),
            pending: Mutex::new(HashMap::new()),
            spawner: Spawner::start().map_err(|source| HubError::Spawner { source })?,
            forks: tokio::sync::Mutex::default(),
            cgroups: std::sync::OnceLock::new(),
            fork_enabled: std::sync::atomic::AtomicBool::new(true),
        });
        tokio::spawn(accept_loop(listener, Arc::downgrade(&inner)));
        Ok(RunnerHub {
            inner,
            spare: Arc::default(),
        })
    }

    /// A runner for a run that begins now, whose run has `private_dirs` (when known).
    /// While runs come in a burst (the previous one began less than [`BURST_GAP`] ago),
    /// the runner started for it meanwhile is handed out, and another is started for
    /// the run after: its start-up (exec, runtime, connection, handshake) then overlaps
    /// the run before instead of delaying its own. While the burst is of one job (this
    /// run and the one before have the same private directories), the next run is most
    /// likely that job's too, so the spare is told them and makes the run's namespaces
    /// while it waits, as a timer's runner does; a run of another job that takes it
    /// makes its own (the runner drops those it made). Each runner still does one
    /// execution; a spare not taken within [`SPARE_KEPT_FOR`] is ended. Call it from a
    /// runtime worker thread (see [`RunnerHub::launch`]).
    pub async fn take(
        &self,
        work: RunnerWork,
        private_dirs: Option<Vec<proto::PrivateDir>>,
        spare_start: SpareStart,
    ) -> LaunchedRunner {
        let now = std::time::Instant::now();
        let previous = self
            .spare
            .last_take
            .locked()
            .replace((now, private_dirs.clone()));
        let ready = self
            .spare
            .runner
            .locked()
            .take()
            .filter(|runner| runner.is_fresh() && runner.work == work);
        let mut spare = None;
        if let Some((then, dirs_then)) = previous
            && now.duration_since(then) < BURST_GAP
        {
            let same_job = private_dirs.filter(|dirs| dirs_then.as_ref() == Some(dirs));
            spare = Some(SpareOrder {
                hub: self.clone(),
                work,
                private_dirs: same_job,
            });
        }
        let mut runner = match ready {
            Some(runner) => runner,
            None => self.launch(work).await,
        };
        // A runner of commands may start the spare once its first command has started
        // (or its run ended without one); other work starts it now.
        match (work, spare_start, spare) {
            (RunnerWork::Commands, SpareStart::AfterCommandStart, Some(order)) => {
                runner.spare_after_start = Some(order);
            }
            // Dropped: the spare starts now.
            (_, _, order) => drop(order),
        }
        runner
    }

    /// Runs of commands from now on each get a cgroup of `cgroups` (when it gives any),
    /// with their limits. Set once; later calls change nothing.
    pub fn contain_runs_in(&self, cgroups: Arc<RunCgroups>) {
        let _ = self.inner.cgroups.set(cgroups);
    }

    /// Whether runners of commands are forked by the fork server (the default) or
    /// started afresh like the others.
    pub fn use_fork_server(&self, enabled: bool) {
        self.inner
            .fork_enabled
            .store(enabled, std::sync::atomic::Ordering::Release);
    }

    /// The rulesets kept for busy jobs, which the engine builds and this hub's runners
    /// are sent with their requests.
    pub fn sandboxes(&self) -> &Sandboxes {
        &self.inner.sandboxes
    }

    /// Starts a spare runner in the background, unless one is being started; told
    /// `private_dirs` when they are known (see [`RunnerHub::take`]).
    fn refill(&self, work: RunnerWork, private_dirs: Option<Vec<proto::PrivateDir>>) {
        use std::sync::atomic::Ordering;
        if self.spare.refilling.swap(true, Ordering::AcqRel) {
            return;
        }
        let hub = self.clone();
        tokio::spawn(async move {
            let runner = hub.launch_for(work, private_dirs).await;
            let launched_at = runner.launched_at;
            // A spare left over from before is replaced (and so ended).
            *hub.spare.runner.locked() = Some(runner);
            hub.spare.refilling.store(false, Ordering::Release);
            sleep(SPARE_KEPT_FOR).await;
            let mut spare = hub.spare.runner.locked();
            if spare.as_ref().is_some_and(|r| r.launched_at == launched_at) {
                *spare = None;
            }
        });
    }

    /// Starts a runner for work that [`LaunchedRunner::execute`] hands it later: forked
    /// by the fork server for commands, when it can be, else started afresh. Call it
    /// from a runtime worker thread, not a blocking one: the parent-death signal of a
    /// runner started afresh follows the thread that spawned it, and blocking threads
    /// exit when idle.
    pub async fn launch(&self, work: RunnerWork) -> LaunchedRunner {
        self.launch_for(work, None).await
    }

    /// [`launch`](Self::launch) for a run whose `private_dirs` are known now: a forked
    /// runner is told them with its `Welcome` and makes the run's namespaces while it
    /// waits.
    pub async fn launch_for(
        &self,
        work: RunnerWork,
        private_dirs: Option<Vec<proto::PrivateDir>>,
    ) -> LaunchedRunner {
        if work == RunnerWork::Commands
            && self
                .inner
                .fork_enabled
                .load(std::sync::atomic::Ordering::Acquire)
            && let Some(server) = self.fork_server().await
        {
            match server.fork().await {
                Ok((runner, connection)) => {
                    return self.forked(runner, connection, work, private_dirs);
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot fork a runner; starting one afresh");
                }
            }
        }
        self.launch_afresh(work).await
    }

    /// The fork server, started now if there is none (or it ended); `None` while a
    /// failed start is recent.
    async fn fork_server(&self) -> Option<ForkServer> {
        let mut slot = self.inner.forks.lock().await;
        if let Some(server) = slot.server.as_ref().filter(|server| server.is_alive()) {
            return Some(server.clone());
        }
        slot.server = None;
        let now = std::time::Instant::now();
        if slot.retry_at.is_some_and(|at| now < at) {
            return None;
        }
        match ForkServer::start(
            &self.inner.spawner,
            &self.inner.runner_path,
            &self.inner.socket_path,
            &self.inner.protected_paths,
        )
        .await
        {
            Ok(server) => {
                slot.retry_at = None;
                slot.server = Some(server.clone());
                Some(server)
            }
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "runners are started afresh for {}s",
                    FORK_SERVER_RETRY.as_secs()
                );
                slot.retry_at = Some(now + FORK_SERVER_RETRY);
                None
            }
        }
    }

    /// A runner forked by the fork server, its connection made: it says hello there.
    fn forked(
        &self,
        runner: ForkedRunner,
        connection: UnixStream,
        work: RunnerWork,
        private_dirs: Option<Vec<proto::PrivateDir>>,
    ) -> LaunchedRunner {
        let (accepted_tx, accepted_rx) = oneshot::channel();
        tokio::spawn(handshake_forked(
            connection,
            self.inner.clone(),
            runner.id(),
            private_dirs,
            accepted_tx,
        ));
        LaunchedRunner {
            _guard: None,
            runner_path: self.inner.runner_path.clone(),
            spawned: Ok(RunnerProcess::Forked(runner)),
            accepted_rx,
            launched_at: std::time::Instant::now(),
            work,
            cgroups: self.inner.cgroups.get().cloned(),
            spare_after_start: None,
        }
    }

    /// A runner started afresh, which connects to the runner socket with its token.
    async fn launch_afresh(&self, work: RunnerWork) -> LaunchedRunner {
        let token = Alphanumeric.sample_string(&mut rand::rng(), 32);
        let (accepted_tx, accepted_rx) = oneshot::channel();
        if let Ok(mut pending) = self.inner.pending.lock() {
            pending.insert(
                token.clone(),
                Pending {
                    accepted: accepted_tx,
                    pid: None,
                },
            );
        }
        // (A poisoned registry leaves the token unknown: the runner is then rejected and
        // the execution fails with the reason.)
        let guard = PendingGuard {
            hub: self.inner.clone(),
            token: token.clone(),
        };
        let spawned = self.spawn_runner(&token).await;
        LaunchedRunner {
            _guard: Some(guard),
            runner_path: self.inner.runner_path.clone(),
            spawned: spawned.map(|child| RunnerProcess::Executed {
                child,
                _started_by: self.inner.spawner.clone(),
            }),
            accepted_rx,
            launched_at: std::time::Instant::now(),
            work,
            cgroups: self.inner.cgroups.get().cloned(),
            spare_after_start: None,
        }
    }

    async fn spawn_runner(&self, token: &str) -> io::Result<Child> {
        let mut command = runner_command(&self.inner.runner_path, &self.inner.socket_path);
        command.stdin(Stdio::piped()).kill_on_drop(true);
        let mut child = self.inner.spawner.spawn(command).await?;
        // Before the token is written: the runner cannot say hello without it, so its
        // pid is known by then.
        if let Some(pending) = self.inner.pending.locked().get_mut(token) {
            pending.pid = child.id();
        }
        if let Some(mut stdin) = child.stdin.take() {
            // A runner that dies at once makes this fail; the connect wait reports it.
            let _ = stdin.write_all(format!("{token}\n").as_bytes()).await;
        }
        Ok(child)
    }
}
