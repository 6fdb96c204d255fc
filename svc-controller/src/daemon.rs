//! The daemon's life: from the command line to the start-up, the serving and the stop;
//! `--check` ([`check`]), the tools ([`tools`]) and the main loop ([`main_loop`]) are its
//! parts.
//!
//! Under systemd (`Type=notify`) the service manager is told when the service is ready,
//! reloading and stopping, and the watchdog is pinged from the main loop (see
//! [`service_manager`]).

mod allocator;
mod check;
mod cli;
mod cluster_join;
mod main_loop;
pub mod migrate;
pub mod preview;
mod replay_notes;
mod runtimes;
mod service_manager;
mod tools;

pub use cli::{Cli, Command};

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use proto::redact::Secret;

use self::check::{implicit_root_warning, report_config_error, runner_issue};
use self::main_loop::{Reloader, StopSignals, wait_for_stop};
use crate::config::{self, Config, ConfigError, MainConfig};
use crate::engine::Engine;
use crate::http::{self, AppState};
use crate::runner::exec::RunnerHub;
use crate::store::statedir::{self, StateDirLock};

/// Exit status for an invalid configuration (EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;
/// Time the shutdown gives running executions to end (their grace included).
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(8);
/// Time the shutdown then gives notifications and health pings under way, while the HTTP
/// server ends its connections (at most 2 s): all within the 10 s of a stop.
const NOTIFY_GRACE: Duration = Duration::from_millis(1500);
/// How long the stop waits for the last audit entries to reach the cluster's table (the
/// node's own file has them whatever happens).
const AUDIT_COPY_GRACE: Duration = Duration::from_millis(500);

/// Runs the program; the return value is the process exit status.
pub fn main_with_args(cli: Cli) -> ExitCode {
    if cli.check && cli.command.is_some() {
        eprintln!("error: --check checks the service's configuration; it takes no subcommand");
        return ExitCode::from(2);
    }
    if cli.check || cli.command.is_some() {
        tools::end_quietly_when_stdout_closes();
    }
    match cli.command {
        Some(command) => tools::run_tool(command, &cli.config),
        None => serve_or_check(cli),
    }
}

/// `--check`, or the service itself.
fn serve_or_check(cli: Cli) -> ExitCode {
    let config = match config::load(&cli.config) {
        Ok(config) => config,
        Err(err) => {
            report_config_error(&err);
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if let Some(issue) = runner_issue(&config.main) {
        report_config_error(&ConfigError {
            issues: vec![issue],
            warnings: config.warnings,
        });
        return ExitCode::from(EXIT_CONFIG);
    }
    for warning in &config.warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(warning) = implicit_root_warning(&config) {
        eprintln!("warning: {warning}");
    }
    if cli.check {
        return check::check(&cli.config, &config);
    }
    serve(cli.config, config)
}

/// The service, until it is stopped; the exit status.
fn serve(config_path: PathBuf, config: Config) -> ExitCode {
    init_tracing(config.main.log_level.as_deref());
    allocator::tune();
    let runtime = match runtimes::http_runtime() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let engine = match runtimes::engine_runtime() {
        Ok(engine) => engine,
        Err(err) => {
            eprintln!("error: cannot start the engine's runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(run(config_path, config, engine.handle().clone()));
    // Its runs have ended; what is left (the runner socket's accept loop) stops.
    engine.shutdown_timeout(Duration::from_secs(1));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("error: {err:#}");
            match err.downcast_ref::<cluster_join::JoinError>() {
                Some(join) => ExitCode::from(join.exit_code()),
                None => ExitCode::FAILURE,
            }
        }
    }
}

/// Logs to standard error for journald: no timestamps of our own when the journal adds
/// them. `RUST_LOG` wins over the main section's `log_level`.
fn init_tracing(level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| level.and_then(|l| EnvFilter::try_new(l).ok()))
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let result = if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().with_ansi(false).try_init()
    } else {
        // Colour codes only for a person at a terminal, not for files or pipes.
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
    if let Err(err) = result {
        eprintln!("warning: logging already initialised: {err}");
    }
}

/// The runner binary: `runner_path`, else `svc-runner` next to this executable.
fn runner_path(configured: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = configured {
        return Ok(path.to_path_buf());
    }
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    let dir = exe
        .parent()
        .context("this program's path has no directory")?;
    Ok(dir.join("svc-runner"))
}

/// Starts everything and serves until SIGTERM or SIGINT. The engine's tasks run on
/// `engine_runtime` (see [`engine_runtime`]), the HTTP front on the current one.
pub async fn run(
    config_path: PathBuf,
    config: Config,
    engine_runtime: tokio::runtime::Handle,
) -> anyhow::Result<()> {
    // First of all: a signal that arrives before its handler exists takes its default
    // action, which for all three is to end the process at once, without a clean stop.
    let signals = StopSignals::install()?;
    let main = config.main.clone();
    crate::metrics::init();
    let (fds, connections) = connection_limit(&main);
    let prepared = {
        let main = main.clone();
        tokio::task::spawn_blocking(move || prepare_state(&main))
            .await
            .context("preparing the state directory failed")??
    };
    let PreparedState {
        lock: _state_lock,
        secret,
    } = prepared;
    // Cluster mode: the node joins before the engine exists, so that it never serves
    // without the shared truth.
    let node = match &main.cluster {
        Some(cluster_config) => {
            Some(cluster_join::join(cluster_config, &config, &engine_runtime).await?)
        }
        None => None,
    };
    let runner = runner_path(main.runner_path.as_deref())?;
    // Before any child process: on cgroup v2 this process moves into a leaf of its own.
    let cgroups = contain_runs(&main, &runner, cgroup_limits_set(&config)).await?;
    let engine = start_engine(&config, runner, &cgroups, node.as_ref(), &engine_runtime)?;
    let replay = open_replay(&main, &engine)?;
    // On this runtime, the HTTP front's: sending notifications waits behind runs.
    let (notifier, run_ends) = crate::notify::Notifier::start(&main.name, &config.notifs);
    engine.announce_run_ends_to(run_ends);
    let (pinger, pings) = crate::notify::ping::Pinger::start();
    engine.send_pings_to(pings);

    let listener = tokio::net::TcpListener::bind(&main.listen_address)
        .await
        .with_context(|| format!("cannot listen on {}", main.listen_address))?;
    let address = listener
        .local_addr()
        .context("cannot read the listening address")?;
    engine.start_timers();
    let login = Arc::new(crate::access::login::Login::new(&config.users));
    let (audit, audit_copy) = open_audit(&main, &engine).await?;
    // `POST /svc/api/reload` asks the main loop for the reload SIGHUP runs: one reload
    // at a time, whoever asks.
    let (reload_requests, reloads) = tokio::sync::mpsc::channel::<http::ReloadReply>(8);
    let (jobs, http_jobs) = (config.jobs.len(), config.http_jobs.len());
    // The engine and the login service keep copies of what they use: the loaded
    // configuration would be a second copy of every job (5 MB with 10,000 of them)
    // kept for nothing.
    drop(config);
    let app = http::router(
        AppState::new(
            engine.clone(),
            secret,
            replay,
            login.clone(),
            http::BodyBudget::new(main.max_body_in_flight, http::WEBHOOK_BODY_LIMIT as u64),
            audit.clone(),
            reload_requests,
        )
        .with_event_streams(http::events::stream_limit(connections.limit)),
    );
    announce_started(
        &main,
        address,
        (jobs, http_jobs),
        connections.limit,
        fds.soft,
    );

    let trimmer = tokio::spawn(allocator::hand_back_free_memory());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::server::serve(
        listener,
        app,
        connections.limit,
        async move {
            let _ = stop_rx.await;
        },
        Duration::from_secs(1),
    ));

    let reloader = Reloader {
        engine: &engine,
        login: &login,
        notifier: &notifier,
        audit: &audit,
        config_path: &config_path,
    };
    wait_for_stop(signals, reloads, &reloader).await?;
    let running = Running {
        engine,
        server,
        stop_http: stop_tx,
        trimmer,
        notifier,
        pinger,
        audit,
        audit_copy,
        cgroups,
        node,
    };
    running.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// Raises the open-file limit and derives the connection limit from it (said when it
/// cuts `max_connections`).
fn connection_limit(
    main: &MainConfig,
) -> (crate::util::fdlimit::FdLimit, http::server::ConnectionLimit) {
    let fds = crate::util::fdlimit::raise();
    let connections =
        http::server::connection_limit(fds.soft, main.max_job_running, main.max_connections);
    if connections.cut {
        tracing::warn!(
            configured = main.max_connections,
            limit = connections.limit,
            open_files = fds.soft,
            "max_connections is more than the open-file limit allows; using the limit"
        );
    }
    (fds, connections)
}

/// Tells the person starting the service, the log and systemd that it serves.
fn announce_started(
    main: &MainConfig,
    address: std::net::SocketAddr,
    (jobs, http_jobs): (usize, usize),
    max_connections: usize,
    open_files: u64,
) {
    println!(
        "svc: {} listening on http://{address}; UI at http://{address}/svc",
        main.name
    );
    tracing::info!(
        %address,
        jobs,
        http_jobs,
        max_connections,
        open_files,
        "started"
    );
    service_manager::ready(&format!(
        "listening on {address}; {jobs} jobs, {http_jobs} http jobs"
    ));
}

/// The spend store of signatures and delivery IDs. In cluster mode the checks go to the
/// cluster's table; the local stores stay open (cheap) so that a node taken out of the
/// cluster finds its own records.
fn open_replay(
    main: &MainConfig,
    engine: &Engine,
) -> anyhow::Result<crate::access::replay::Replay> {
    Ok(crate::access::replay::Replay::new(
        Arc::new(crate::access::replay::ReplayStores::open(
            &main.dir_replay(),
        )?),
        engine.cluster().map(|link| link.store.clone()),
    ))
}

/// The audit log, and in cluster mode its copier to the cluster's table (every node's
/// audit view shows every node's entries).
async fn open_audit(
    main: &MainConfig,
    engine: &Engine,
) -> anyhow::Result<(
    crate::access::audit::AuditLog,
    Option<tokio::task::JoinHandle<()>>,
)> {
    let (dir, max_size) = (main.dir_logs(), main.audit_max_size);
    let audit =
        tokio::task::spawn_blocking(move || crate::access::audit::AuditLog::start(&dir, max_size))
            .await
            .context("starting the audit log failed")?
            .context("cannot open the audit log")?;
    let copy = engine
        .cluster()
        .map(|link| audit.copy_to_cluster(link.store.clone(), link.node.clone()));
    Ok((audit, copy))
}

/// Whether the configuration sets a limit that cgroups enforce best (`limit_memory`,
/// `limit_pids`, `cpu_weight`): runs without cgroups are then worth a warning.
fn cgroup_limits_set(config: &crate::config::Config) -> bool {
    config.main.limit_pids.is_some()
        || config.jobs.iter().any(|job| {
            let limits = &job.limits;
            limits.memory.is_some() || limits.pids.is_some() || limits.cpu_weight.is_some()
        })
}

/// The runs' cgroups (found once, here) and their namespaces, as the start-up log says.
/// Runs without cgroups are a warning only where a limit needs them, or where they were
/// asked for and none could be had with no limit set (an unprivileged user's start, the
/// quick start's): an info line then.
async fn contain_runs(
    main: &MainConfig,
    runner: &Path,
    limits_set: bool,
) -> anyhow::Result<Arc<crate::runner::cgroups::RunCgroups>> {
    let cgroups = {
        let (dir_base, wanted) = (main.dir_base.clone(), main.run_cgroups);
        Arc::new(
            tokio::task::spawn_blocking(move || match wanted {
                true => crate::runner::cgroups::RunCgroups::set_up(&dir_base),
                false => crate::runner::cgroups::RunCgroups::none("run_cgroups = false"),
            })
            .await
            .context("setting up the runs' cgroups failed")?,
        )
    };
    if cgroups.active() {
        tracing::info!(cgroups = %cgroups.line(), "runs get cgroups of their own");
    } else if limits_set {
        tracing::warn!(cgroups = %cgroups.line(), "runs get no cgroups");
    } else {
        tracing::info!(cgroups = %cgroups.line(), "runs get no cgroups");
    }
    let containment = crate::runner::containment::probe(runner);
    if containment.namespaces() {
        tracing::info!(containment = %containment.line, "runs are contained in namespaces");
    } else {
        tracing::warn!(containment = %containment.line, "runs are not contained in namespaces");
    }
    Ok(cgroups)
}

/// The runner hub and the engine on `engine_runtime`.
fn start_engine(
    config: &Config,
    runner: PathBuf,
    cgroups: &Arc<crate::runner::cgroups::RunCgroups>,
    node: Option<&cluster_join::ClusterNode>,
    engine_runtime: &tokio::runtime::Handle,
) -> anyhow::Result<Engine> {
    let main = &config.main;
    let _inside = engine_runtime.enter();
    let hub = RunnerHub::start(
        &main.dir_runtime(),
        runner,
        crate::engine::request::protected_paths(main),
    )?;
    hub.contain_runs_in(cgroups.clone());
    // The node leaves the cluster only after `engine.shutdown`: its heartbeat keeps
    // the leases of the runs that end meanwhile.
    Ok(Engine::new(
        config,
        Arc::new(hub),
        Arc::new(crate::engine::clock::SystemClock),
        node.map(cluster_join::ClusterNode::link),
    ))
}

/// What runs while the service serves, to be stopped in order.
struct Running {
    engine: Engine,
    server: tokio::task::JoinHandle<()>,
    stop_http: tokio::sync::oneshot::Sender<()>,
    trimmer: tokio::task::JoinHandle<()>,
    notifier: crate::notify::Notifier,
    pinger: crate::notify::ping::Pinger,
    audit: crate::access::audit::AuditLog,
    audit_copy: Option<tokio::task::JoinHandle<()>>,
    cgroups: Arc<crate::runner::cgroups::RunCgroups>,
    node: Option<cluster_join::ClusterNode>,
}

impl Running {
    /// The stop: the HTTP front stops taking requests, the runs end (within
    /// [`SHUTDOWN_LIMIT`]), their notifications go out, the audit log is flushed, and
    /// the node leaves its cluster last.
    async fn stop(self) {
        let Running {
            engine,
            server,
            stop_http: stop_tx,
            trimmer,
            notifier,
            pinger,
            audit,
            audit_copy,
            cgroups,
            node,
        } = self;
        tracing::info!("stopping");
        service_manager::stopping();
        trimmer.abort();
        let _ = stop_tx.send(());
        engine.shutdown(SHUTDOWN_LIMIT).await;
        // The runs the stop ended are announced by now.
        let _ = tokio::join!(
            tokio::time::timeout(Duration::from_secs(2), server),
            notifier.shutdown(NOTIFY_GRACE),
            pinger.shutdown(NOTIFY_GRACE)
        );
        // After the server: the last answers' entries are in the queue.
        audit.shutdown().await;
        let _ = tokio::task::spawn_blocking(move || cgroups.tear_down()).await;
        if let Some(mut copy) = audit_copy
            && tokio::time::timeout(AUDIT_COPY_GRACE, &mut copy)
                .await
                .is_err()
        {
            tracing::warn!("audit log: the last entries were not copied to the cluster in time");
            copy.abort();
        }
        // Last: the heartbeat keeps the node's runs its own until they ended, and the audit
        // copier needs the connections.
        if let Some(node) = node {
            node.leave().await;
        }
    }
}

/// What [`prepare_state`] hands to the service.
struct PreparedState {
    /// Held until the process ends.
    lock: StateDirLock,
    secret: Secret,
}

/// Takes the state directory's lock before anything is written, takes over state from
/// the old place, creates the directories, and settles the main secret. Blocking.
fn prepare_state(main: &MainConfig) -> anyhow::Result<PreparedState> {
    let lock = StateDirLock::acquire(&main.dir_state())?;
    for dir in statedir::take_over_old_state(main)? {
        tracing::info!(from = %dir.display(), to = %main.dir_state().display(), "state taken over from its old place");
    }
    for dir in [
        main.dir_job_logs(),
        main.dir_job_http_logs(),
        main.dir_job_state(),
        main.dir_job_http_state(),
        main.dir_lib(),
    ] {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create directory {}", dir.display()))?;
    }
    for dir in [main.dir_job_state(), main.dir_job_http_state()] {
        crate::util::fsutil::remove_stale_temp_files(&dir);
    }
    crate::util::space_reserve::install(&main.dir_state()).with_context(|| {
        format!(
            "cannot allocate the space reserve in {}",
            main.dir_state().display()
        )
    })?;
    let secret = match &main.secret {
        Some(secret) => secret.clone(),
        None => {
            let stored = statedir::load_or_generate_secret(&main.dir_state())?;
            if stored.generated {
                // Shown once, to whoever installs the service; never logged again.
                println!(
                    "svc: no secret configured; generated secret (stored in {}): {}",
                    stored.path.display(),
                    stored.value
                );
            } else {
                tracing::info!(file = %stored.path.display(), "no secret configured: using the secret stored in the state directory");
            }
            Secret::new(stored.value)
        }
    };
    Ok(PreparedState { lock, secret })
}
