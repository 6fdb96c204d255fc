//! The daemon's life: command line, `--check`, start-up, signals, reload and shutdown.
//!
//! Under systemd (`Type=notify`) the service manager is told when the service is ready,
//! reloading and stopping, and the watchdog is pinged from the main loop (see
//! [`service_manager`]).

mod allocator;
mod cluster_join;
pub mod migrate;
pub mod preview;
mod replay_notes;
mod service_manager;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use proto::redact::Secret;
use tokio::signal::unix::{SignalKind, signal};

use crate::config::{self, Config, ConfigError, ConfigIssue, MainConfig};
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

/// Command line of `svc-controller`.
///
/// Without a subcommand it starts the service (or checks the configuration with
/// `--check`). Further tools become variants of [`Command`]; `--config` and `--check` stay
/// top-level options, so `svc-controller --config FILE --check` keeps working.
#[derive(Debug, Parser)]
#[command(
    name = "svc-controller",
    version,
    about = "svc: job scheduler and webhook runner",
    long_about = "svc: job scheduler and webhook runner.\n\n\
        Runs commands on timers and on signed webhooks, calls URLs on timers, keeps the log \
        of every run and serves it all over a JSON API and a web UI. Each execution runs in \
        its own svc-runner process, as the job's user."
)]
pub struct Cli {
    /// Main configuration file (for `migrate`, the one to write).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/svc/svc.conf",
        global = true
    )]
    pub config: PathBuf,
    /// Validate the whole configuration (main file, job.d, job_http.d) and exit:
    /// 0 when valid, 78 with every problem listed otherwise.
    #[arg(long)]
    pub check: bool,
    /// A tool instead of the service.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands: tools that run instead of the service.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read a password (one line) on standard input and print its argon2id hash, for
    /// `password = ...` in user.conf.
    #[command(name = "hash-password")]
    HashPassword,
    /// Take over an upstream installation: its configuration, logs (every status, any
    /// case of directory) and state, into the layout of the configuration named by
    /// --config (<base>/etc/svc/svc.conf). Reads DIR only; prints every file written or
    /// renamed and everything not taken; overwrites nothing, so it can run again.
    Migrate {
        /// The upstream installation's base directory (holding etc/karajo/karajo.conf or
        /// etc/svc/svc.conf).
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
    },
    /// Print the upcoming slots of the timers of the configuration named by --config, one
    /// per line: the time in the job's zone and in UTC (RFC 3339), marking
    /// daylight-saving changes. With --job, only that job's lines (under a header when a
    /// Job and a JobHttp share the ID); otherwise each job's slots follow a
    /// `# job ID: TIMER` line.
    #[command(name = "next-runs")]
    NextRuns {
        /// One Job or JobHttp, by ID (any case).
        #[arg(long, value_name = "ID")]
        job: Option<String>,
        /// How many slots per job.
        #[arg(long, value_name = "N", default_value_t = 10)]
        count: usize,
        /// Start from this instant (RFC 3339) instead of now.
        #[arg(long, value_name = "RFC3339")]
        from: Option<String>,
    },
}

/// Runs the program; the return value is the process exit status.
pub fn main_with_args(cli: Cli) -> ExitCode {
    if cli.check && cli.command.is_some() {
        eprintln!("error: --check checks the service's configuration; it takes no subcommand");
        return ExitCode::from(2);
    }
    if cli.check || cli.command.is_some() {
        end_quietly_when_stdout_closes();
    }
    match cli.command {
        Some(Command::HashPassword) => {
            match crate::security::password::hash_password_from_stdin() {
                Ok(hash) => {
                    println!("{hash}");
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("error: {err:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(Command::Migrate { from }) => {
            match crate::daemon::migrate::migrate(&from, &cli.config) {
                Ok(report) => {
                    for line in &report.lines {
                        println!("{line}");
                    }
                    println!(
                        "migrated into {}; {} thing(s) not taken (listed above). Check with: \
                     svc-controller --config {} --check",
                        cli.config.display(),
                        report.skipped,
                        cli.config.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(crate::daemon::migrate::MigrateError::Config(err)) => {
                    eprintln!(
                        "error: the migrated configuration does not load; fix it and run again"
                    );
                    report_config_error(&err);
                    ExitCode::from(EXIT_CONFIG)
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(Command::NextRuns { job, count, from }) => {
            next_runs(&cli.config, job.as_deref(), count, from.as_deref())
        }
        None => serve_or_check(cli),
    }
}

/// `svc-controller next-runs`.
fn next_runs(config_file: &Path, job: Option<&str>, count: usize, from: Option<&str>) -> ExitCode {
    let from = match from.map(chrono::DateTime::parse_from_rfc3339) {
        None => chrono::Utc::now(),
        Some(Ok(t)) => t.with_timezone(&chrono::Utc),
        Some(Err(err)) => {
            eprintln!("error: --from: not an RFC 3339 time ({err}), such as 2026-03-29T00:00:00Z");
            return ExitCode::from(2);
        }
    };
    let config = match config::load(config_file) {
        Ok(config) => config,
        Err(err) => {
            report_config_error(&err);
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let timers = crate::daemon::preview::job_timers(&config);
    let selected: Vec<_> = match job {
        Some(id) => timers
            .iter()
            .filter(|t| t.id.eq_ignore_ascii_case(id))
            .collect(),
        None => timers.iter().collect(),
    };
    if let (Some(id), true) = (job, selected.is_empty()) {
        eprintln!(
            "error: no job or http job has the ID {id:?} in {}",
            config_file.display()
        );
        return ExitCode::FAILURE;
    }
    // One job asked for and found once: its slots alone. Otherwise (every job, or a Job
    // and a JobHttp sharing the ID) each job's slots under a line naming it.
    let headed = job.is_none() || selected.len() > 1;
    for entry in selected {
        let Some(timer) = entry.timer else {
            println!(
                "# {} {}: no timer (runs when started by hand or by a webhook)",
                entry.kind.as_str(),
                entry.id
            );
            continue;
        };
        if headed {
            println!(
                "# {} {}: {}",
                entry.kind.as_str(),
                entry.id,
                timer.describe()
            );
        }
        let slots = crate::daemon::preview::upcoming(timer, from, count);
        for line in crate::daemon::preview::slot_lines(&slots, entry.zone, from) {
            println!("{line}");
        }
    }
    ExitCode::SUCCESS
}

/// For the tools (`--check`, `next-runs`, ...), whose output goes to a person or a pipe:
/// a reader that stops early (`| head`, `| grep -q`) ends the process as it ends any
/// Unix tool, by SIGPIPE, instead of a panic of `println!` on the broken pipe. Rust
/// ignores SIGPIPE by default; the service keeps it ignored (its sockets report EPIPE).
fn end_quietly_when_stdout_closes() {
    // SAFETY: restoring a signal's default disposition touches no memory, and the tools
    // run it before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// How long an idle blocking thread is kept (tokio's default: 10 s). tokio queues
/// blocking work for an idle or busy thread when it cannot start a new one, but panics
/// when its pool has no thread at all; a host whose task table a job filled (without
/// cgroups, [`crate::runner::cgroups`]) must not find the pool empty, so threads, once started,
/// stay, at most [`BLOCKING_THREADS`] of them.
const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(24 * 3600);

/// The most blocking threads each runtime keeps (tokio's default: 512). Their work is
/// short file work (state, logs, the spend store), which queues when all are busy; the
/// bound keeps what a burst started, and kept for [`BLOCKING_KEEP_ALIVE`], small.
const BLOCKING_THREADS: usize = 64;

/// The engine's runtime: one thread (and its blocking threads) at the service's own
/// priority, above the HTTP threads (see [`HTTP_NICE`]). It runs the runs, the timers
/// and the runner connections, and starts the runners, which inherit its priority.
fn engine_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("svc-engine")
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
}

/// How much lower than the rest of the service the threads that answer HTTP run (a nice
/// increment; unprivileged, since it only lowers).
///
/// Runs come first. A job's run is a chain of short steps across threads and processes
/// (the engine's thread, its blocking threads, the runner, the command), each of which
/// waits for a CPU when it wakes. A flood of requests (a code host's retries, a script
/// triggering a busy job in a loop) keeps every thread that answers busy; at the same
/// priority each step of a run then waits its turn behind them, and the runs slow to a
/// trickle while the flood is answered at full speed. At 5, a step that wakes takes the
/// CPU first; the answers get what the runs leave, which on an idle machine is all of it.
const HTTP_NICE: libc::c_int = 5;

/// The nice value of the HTTP threads: [`HTTP_NICE`] above the calling thread's (the
/// service's own). Read once, before the HTTP runtime starts any thread.
fn http_thread_nice() -> libc::c_int {
    // SAFETY: getpriority(2) only reads the calling thread's priority; -1 is a valid
    // answer, told from an error by errno, which is cleared before and read right after
    // on the same thread.
    let own = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    // SAFETY: as above.
    if own == -1 && unsafe { *libc::__errno_location() } != 0 {
        return HTTP_NICE;
    }
    own.saturating_add(HTTP_NICE).min(19)
}

/// Sets the calling thread's nice value to `nice` (on Linux the nice value belongs to
/// the thread). An absolute value, not an increment: blocking threads are started by
/// threads that already run at it, and inherit it. Called as each thread of the HTTP
/// runtime starts.
fn set_thread_nice(nice: libc::c_int) {
    // SAFETY: setpriority(2) with PRIO_PROCESS and 0 only changes the calling thread's
    // scheduling priority.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            nice,
            "cannot lower the priority of an HTTP thread"
        );
    }
}

/// `--check`, or the service itself.
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
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
        println!(
            "{}: configuration is valid ({} jobs, {} http jobs)",
            cli.config.display(),
            config.jobs.len(),
            config.http_jobs.len()
        );
        // The next three slots of each schedule, to see that it means what was meant.
        let now = chrono::Utc::now();
        for entry in crate::daemon::preview::job_timers(&config) {
            let Some(timer @ crate::time::schedule::Timer::Schedule(..)) = entry.timer else {
                continue;
            };
            let next: Vec<String> = crate::daemon::preview::upcoming(timer, now, 3)
                .into_iter()
                .map(|t| crate::daemon::preview::local_text(t, entry.zone))
                .collect();
            println!(
                "  {} {}: {}: next {}",
                entry.kind.as_str(),
                entry.id,
                timer.describe(),
                next.join(", ")
            );
        }
        for note in replay_notes::replay_notes(&config) {
            println!("  {note}");
        }
        if let Ok(runner) = runner_path(config.main.runner_path.as_deref()) {
            println!(
                "  containment: {}",
                crate::runner::containment::probe(&runner).line
            );
        }
        if config.main.run_cgroups {
            println!(
                "  cgroups: {} (as found for this command; the service finds its own at start-up)",
                crate::runner::cgroups::RunCgroups::inspect()
            );
        } else {
            println!(
                "  cgroups: {}",
                crate::runner::cgroups::RunCgroups::none("run_cgroups = false").line()
            );
        }
        if let Some(cluster) = &config.main.cluster {
            return check_cluster(cluster, &config);
        }
        return ExitCode::SUCCESS;
    }
    init_tracing(config.main.log_level.as_deref());
    allocator::tune();
    let http_nice = http_thread_nice();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .max_blocking_threads(BLOCKING_THREADS)
        .on_thread_start(move || set_thread_nice(http_nice))
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let engine = match engine_runtime() {
        Ok(engine) => engine,
        Err(err) => {
            eprintln!("error: cannot start the engine's runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(run(cli.config, config, engine.handle().clone()));
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

/// How long `--check` waits for the cluster database's socket to accept a connection: a
/// server that is not there is reported within this.
const CLUSTER_REACH_LIMIT: Duration = Duration::from_secs(5);
/// How long `--check` then waits for the login and the schema's reads, all together.
/// Longer, because a server that accepted the connection is there and answers; only its
/// load decides how fast (a busy database, or one that has just started, may take
/// seconds to log a session in).
const CLUSTER_ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// `--check` with a `database_url`: reaches the server (within [`CLUSTER_REACH_LIMIT`]),
/// then logs in, says whether the schema is current and, when it is, compares this
/// configuration's job definitions with those the other live nodes recorded (all within
/// [`CLUSTER_ANSWER_LIMIT`]). Changes nothing in the database. Definitions that differ are
/// warnings: the exit status stays 0, since a rolling change of definitions passes
/// through them.
fn check_cluster(cluster: &crate::config::ClusterConfig, config: &Config) -> ExitCode {
    use crate::cluster::{ClusterStore, SchemaStatus, StoreOptions};
    let shown = cluster.shown_url();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let options = StoreOptions {
        max_connections: 1,
        acquire_timeout: CLUSTER_ANSWER_LIMIT,
        ..StoreOptions::default()
    };
    let node = &cluster.node_name;
    let defs = cluster_join::job_defs(config);
    let status = runtime.block_on(async {
        let store = ClusterStore::new(cluster.database_url.expose(), &options)?;
        // Not through the pool: it would retry a refused connection until its timeout,
        // the long one.
        if let Err(err) = store.reach(CLUSTER_REACH_LIMIT).await {
            store.close().await;
            return Err(err);
        }
        // The pool's timeout bounds the login; this one bounds the reads too.
        let reads = async {
            let status = store.schema_status().await?;
            // Only a current schema has the tables this release reads; a pending one is
            // applied at start, and a newer or broken one is an error below.
            let comparison = match status {
                SchemaStatus::Current => Some(store.compare_job_defs(node, &defs).await?),
                _ => None,
            };
            Ok::<_, crate::cluster::ClusterError>((status, comparison))
        };
        let status = tokio::time::timeout(CLUSTER_ANSWER_LIMIT, reads).await;
        store.close().await;
        Ok::<_, crate::cluster::ClusterError>(status)
    });
    match status {
        Ok(Ok(Ok((SchemaStatus::Current, comparison)))) => {
            println!("  cluster: node {node} on {shown}: reachable, schema current");
            if let Some(comparison) = comparison {
                let report = cluster_join::drift_report(&comparison);
                for line in &report.lines {
                    println!("  cluster: {line}");
                }
                for warning in &report.warnings {
                    eprintln!("warning: cluster: {warning}");
                }
            }
            ExitCode::SUCCESS
        }
        Ok(Ok(Ok((SchemaStatus::Pending(versions), _)))) => {
            println!(
                "  cluster: node {node} on {shown}: reachable, {} schema migration(s) to \
                 apply at start ({versions:?}); job definitions not compared",
                versions.len()
            );
            ExitCode::SUCCESS
        }
        Ok(Ok(Ok((SchemaStatus::Newer(versions), _)))) => {
            eprintln!(
                "error: database_url ({shown}): the schema is newer than this release (it has \
                 migrations {versions:?}); upgrade this node"
            );
            ExitCode::from(EXIT_CONFIG)
        }
        Ok(Ok(Ok((SchemaStatus::Broken { version, reason }, _)))) => {
            eprintln!(
                "error: database_url ({shown}): schema migration {version} is broken: {reason}"
            );
            ExitCode::from(EXIT_CONFIG)
        }
        Ok(Ok(Err(err))) | Err(err) => {
            eprintln!("error: database_url ({shown}): cannot check the cluster database: {err}");
            ExitCode::from(EXIT_CONFIG)
        }
        Ok(Err(_elapsed)) => {
            eprintln!(
                "error: database_url ({shown}): the cluster database accepted the connection \
                 but did not answer within {} s",
                CLUSTER_ANSWER_LIMIT.as_secs()
            );
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn report_config_error(err: &ConfigError) {
    for warning in &err.warnings {
        eprintln!("warning: {warning}");
    }
    eprintln!("error: {err}");
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
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
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
    } else {
        tracing::warn!(cgroups = %cgroups.line(), "runs get no cgroups");
    }
    let containment = crate::runner::containment::probe(&runner);
    if containment.namespaces() {
        tracing::info!(containment = %containment.line, "runs are contained in namespaces");
    } else {
        tracing::warn!(containment = %containment.line, "runs are not contained in namespaces");
    }
    let engine = {
        let _inside = engine_runtime.enter();
        let hub = RunnerHub::start(
            &main.dir_runtime(),
            runner,
            crate::engine::request::protected_paths(&main),
        )?;
        hub.contain_runs_in(cgroups.clone());
        // The node leaves the cluster only after `engine.shutdown`: its heartbeat keeps
        // the leases of the runs that end meanwhile.
        Engine::new(
            &config,
            Arc::new(hub),
            Arc::new(crate::engine::clock::SystemClock),
            node.as_ref().map(cluster_join::ClusterNode::link),
        )
    };
    // In cluster mode the checks go to the cluster's table; the local stores stay open
    // (cheap) so that a node taken out of the cluster finds its own records.
    let replay = crate::access::replay::Replay::new(
        Arc::new(crate::access::replay::ReplayStores::open(
            &main.dir_replay(),
        )?),
        engine.cluster().map(|link| link.store.clone()),
    );
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
    let audit = {
        let (dir, max_size) = (main.dir_logs(), main.audit_max_size);
        tokio::task::spawn_blocking(move || crate::access::audit::AuditLog::start(&dir, max_size))
            .await
            .context("starting the audit log failed")?
            .context("cannot open the audit log")?
    };
    // In cluster mode every node's audit view shows every node's entries.
    let audit_copy = engine
        .cluster()
        .map(|link| audit.copy_to_cluster(link.store.clone(), link.node.clone()));
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
    println!(
        "svc: {} listening on http://{address}; UI at http://{address}/svc",
        main.name
    );
    tracing::info!(
        %address,
        jobs,
        http_jobs,
        max_connections = connections.limit,
        open_files = fds.soft,
        "started"
    );
    service_manager::ready(&format!(
        "listening on {address}; {jobs} jobs, {http_jobs} http jobs"
    ));

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
    tracing::info!("stopped");
    Ok(())
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

/// Jobs that run as root only because no `user` is set anywhere and the controller is
/// root. decisions.md makes the controller's own user the default, so they are allowed
/// (unlike `user = root`, which needs `allow_root_jobs`), but they keep no capability
/// unless they list some, and the operator is told.
fn implicit_root_warning(config: &Config) -> Option<String> {
    if config.main.allow_root_jobs || !nix::unistd::geteuid().is_root() {
        return None;
    }
    let names: Vec<&str> = config
        .jobs
        .iter()
        .filter(|job| job.user.is_none())
        .map(|job| job.id.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    Some(format!(
        "{}: {} job{} run{} as root because no user is set in the job or in [svc] ({}); \
         they keep only the capabilities they list. Set `user` (the package uses svc), or \
         `allow_root_jobs = true` to say it is meant",
        config.main.file.display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        if names.len() == 1 { "s" } else { "" },
        some_names(&names)
    ))
}

/// Names listed in a warning before the rest is only counted: with thousands of jobs
/// the whole list made one line of tens of kilobytes.
const NAMES_SHOWN: usize = 10;

/// The first [`NAMES_SHOWN`] of `names`, and how many more there are.
fn some_names(names: &[&str]) -> String {
    match names.len().checked_sub(NAMES_SHOWN) {
        Some(more) if more > 0 => format!("{} and {more} more", names[..NAMES_SHOWN].join(", ")),
        _ => names.join(", "),
    }
}

/// The runner binary must exist and be executable; checked by `--check` and at start.
fn runner_issue(main: &MainConfig) -> Option<ConfigIssue> {
    use std::os::unix::fs::PermissionsExt as _;
    let (path, value) = match &main.runner_path {
        Some(path) => (path.clone(), path.display().to_string()),
        None => match runner_path(None) {
            Ok(path) => {
                let shown = format!("{} (default: beside svc-controller)", path.display());
                (path, shown)
            }
            Err(err) => {
                return Some(ConfigIssue {
                    file: main.file.clone(),
                    section: Some("svc".to_string()),
                    key: Some("runner_path".to_string()),
                    value: None,
                    message: format!("{err:#}"),
                });
            }
        },
    };
    let problem = match std::fs::metadata(&path) {
        Err(err) => format!("no runner binary there: {err}"),
        Ok(meta) if !meta.is_file() => "not a regular file".to_string(),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => "not executable".to_string(),
        Ok(_) => return None,
    };
    Some(ConfigIssue {
        file: main.file.clone(),
        section: Some("svc".to_string()),
        key: Some("runner_path".to_string()),
        value: Some(value),
        message: problem,
    })
}

/// The signals the daemon handles, caught from the start of [`run`].
struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> anyhow::Result<StopSignals> {
        Ok(StopSignals {
            terminate: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
            hangup: signal(SignalKind::hangup()).context("cannot handle SIGHUP")?,
        })
    }
}

/// What a reload changes, and where it is recorded.
struct Reloader<'a> {
    engine: &'a Engine,
    login: &'a crate::access::login::Login,
    notifier: &'a crate::notify::Notifier,
    audit: &'a crate::access::audit::AuditLog,
    config_path: &'a Path,
}

impl Reloader<'_> {
    /// One reload, told to systemd as RELOADING then READY.
    async fn reload(&self) -> Result<(), Vec<String>> {
        service_manager::reloading();
        let outcome = reload(self.engine, self.login, self.notifier, self.config_path).await;
        service_manager::ready(match outcome {
            Ok(()) => "configuration reloaded",
            Err(_) => "reload refused: invalid configuration, running jobs unchanged",
        });
        outcome
    }
}

/// The main loop: handles SIGHUP and reload requests of the API (both reload), and pings
/// the systemd watchdog until SIGTERM or SIGINT arrives.
async fn wait_for_stop(
    signals: StopSignals,
    mut reloads: tokio::sync::mpsc::Receiver<http::ReloadReply>,
    reloader: &Reloader<'_>,
) -> anyhow::Result<()> {
    let engine = reloader.engine;
    let StopSignals {
        mut terminate,
        mut interrupt,
        mut hangup,
    } = signals;
    let watchdog_every = service_manager::watchdog_interval();
    if let Some(every) = watchdog_every {
        tracing::debug!(?every, "pinging the systemd watchdog");
    }
    // Without a watchdog the interval exists but its branch is disabled.
    let mut watchdog = tokio::time::interval(watchdog_every.unwrap_or(Duration::from_secs(3600)));
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
            _ = hangup.recv() => {
                let outcome = reloader.reload().await;
                // The HTTP side records its own requests; a signal is recorded here.
                let (result, reason) = match outcome {
                    Ok(()) => (crate::access::audit::Outcome::Ok, None),
                    Err(problems) => (crate::access::audit::Outcome::Error, Some(problems.join("; "))),
                };
                reloader.audit.record(crate::access::audit::Entry {
                    actor: crate::access::audit::Actor::Signal,
                    action: crate::access::audit::Action::Reload,
                    job: None,
                    address: None,
                    result,
                    status: None,
                    reason,
                });
            }
            Some(reply) = reloads.recv() => {
                let outcome = reloader.reload().await;
                // The caller may have gone: the reload happened all the same.
                let _ = reply.send(outcome);
            }
            _ = watchdog.tick(), if watchdog_every.is_some() => {
                // Taking the registry lock proves the engine is not stuck; a deadlock
                // stops the pings and systemd restarts the service.
                if engine.is_responsive() {
                    service_manager::watchdog();
                }
            }
        }
    }
}

/// Reloads the job definitions, the notifications and the users; the problems of the
/// new configuration when it was refused (as logged: secrets are never in them).
async fn reload(
    engine: &Engine,
    login: &crate::access::login::Login,
    notifier: &crate::notify::Notifier,
    config_path: &Path,
) -> Result<(), Vec<String>> {
    let path = config_path.to_path_buf();
    let loaded = tokio::task::spawn_blocking(move || config::load(&path)).await;
    match loaded {
        Ok(Ok(config)) => {
            // Before the jobs that may name new ones.
            notifier.reload(&config.notifs);
            // New jobs' logs are listed and their state read or written: blocking work.
            // So is hashing every job's definition for the cluster (thousands of jobs).
            let (config, defs) = {
                let engine = engine.clone();
                let reloaded = tokio::task::spawn_blocking(move || {
                    engine.reload(&config);
                    let defs = engine.cluster().map(|_| cluster_join::job_defs(&config));
                    (config, defs)
                })
                .await;
                match reloaded {
                    Ok(reloaded) => reloaded,
                    Err(err) => {
                        tracing::error!(error = %err, "reload failed");
                        return Err(vec!["the reload failed; see the service log".into()]);
                    }
                }
            };
            // After the engine's reload: a run of a new job claimed in between finds the
            // job here, and one of a removed job claimed before goes back to the queue.
            if let (Some(link), Some(defs)) = (engine.cluster(), defs) {
                cluster_join::record_reloaded_defs(link, &defs).await;
            }
            login.set_users(&config.users);
            tracing::info!(
                jobs = config.jobs.len(),
                http_jobs = config.http_jobs.len(),
                "configuration reloaded"
            );
            Ok(())
        }
        Ok(Err(err)) => {
            for issue in &err.issues {
                tracing::error!("reload refused: {issue}");
            }
            tracing::error!("configuration not reloaded: the running jobs are unchanged");
            Err(err.issues.iter().map(ToString::to_string).collect())
        }
        Err(err) => {
            tracing::error!(error = %err, "reload failed");
            Err(vec!["the reload failed; see the service log".into()])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's nice value (errno is not checked: these threads are far from -1).
    fn own_nice() -> libc::c_int {
        // SAFETY: getpriority(2) only reads the calling thread's priority.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn http_threads_run_five_below_the_service_and_do_not_compound() {
        std::thread::spawn(|| {
            let base = own_nice();
            let target = http_thread_nice();
            assert_eq!(target, (base + HTTP_NICE).min(19));
            set_thread_nice(target);
            assert_eq!(own_nice(), target);
            // A thread started by an HTTP thread starts at its nice value and sets the
            // same one again (tokio's blocking threads): no further 5 below.
            std::thread::spawn(move || {
                set_thread_nice(target);
                assert_eq!(own_nice(), target);
            })
            .join()
            .expect("inner thread");
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn a_warning_lists_ten_names_and_counts_the_rest() {
        let few = ["a", "b", "c"];
        assert_eq!(some_names(&few), "a, b, c");
        let ten: Vec<String> = (0..10).map(|i| format!("j{i}")).collect();
        let ten: Vec<&str> = ten.iter().map(String::as_str).collect();
        assert_eq!(some_names(&ten), ten.join(", "));
        let many: Vec<String> = (0..10_000).map(|i| format!("j{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            some_names(&many),
            "j0, j1, j2, j3, j4, j5, j6, j7, j8, j9 and 9990 more"
        );
    }
}
