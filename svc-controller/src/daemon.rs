//! The daemon's life: command line, `--check`, start-up, signals, reload and shutdown.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use rand::distr::{Alphanumeric, SampleString};
use tokio::signal::unix::{SignalKind, signal};

use crate::config::{self, Config, ConfigError};
use crate::engine::Engine;
use crate::exec::RunnerHub;
use crate::http::{self, AppState};

/// Exit status for an invalid configuration (EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;
/// Time the shutdown gives running executions to end (their grace included).
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(8);

/// Command line of `svc-controller`.
#[derive(Debug, Parser)]
#[command(
    name = "svc-controller",
    version,
    about = "svc: job scheduler and webhook runner"
)]
pub struct Cli {
    /// Main configuration file.
    #[arg(long, value_name = "FILE", default_value = "/etc/svc/svc.conf")]
    pub config: PathBuf,
    /// Validate the whole configuration (main file, job.d, job_http.d) and exit:
    /// 0 when valid, 78 with every problem listed otherwise.
    #[arg(long)]
    pub check: bool,
}

/// Runs the program; the return value is the process exit status.
pub fn main_with_args(cli: Cli) -> ExitCode {
    let config = match config::load(&cli.config) {
        Ok(config) => config,
        Err(err) => {
            report_config_error(&err);
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    for warning in &config.warnings {
        eprintln!("warning: {warning}");
    }
    if cli.check {
        println!(
            "{}: configuration is valid ({} jobs, {} http jobs)",
            cli.config.display(),
            config.jobs.len(),
            config.http_jobs.len()
        );
        return ExitCode::SUCCESS;
    }
    init_tracing(config.main.log_level.as_deref());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.config, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
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
        builder.try_init()
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

/// Starts everything and serves until SIGTERM or SIGINT.
pub async fn run(config_path: PathBuf, config: Config) -> anyhow::Result<()> {
    let main = config.main.clone();
    crate::metrics::init();
    let secret: Arc<str> = match &main.secret {
        Some(secret) => Arc::from(secret.as_str()),
        None => {
            let secret = Alphanumeric.sample_string(&mut rand::rng(), 32);
            println!("svc: no secret configured; generated secret for this run: {secret}");
            Arc::from(secret.as_str())
        }
    };
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
    let runner = runner_path(main.runner_path.as_deref())?;
    if !runner.is_file() {
        tracing::warn!(runner = %runner.display(), "the runner binary is missing: every run will fail");
    }
    let hub = RunnerHub::start(&main.dir_runtime(), runner)?;
    let engine = Engine::new(&config, hub);
    let replay = Arc::new(crate::replay::ReplayStores::open(
        &main.dir_lib().join("replay"),
    )?);

    let listener = tokio::net::TcpListener::bind(&main.listen_address)
        .await
        .with_context(|| format!("cannot listen on {}", main.listen_address))?;
    let address = listener
        .local_addr()
        .context("cannot read the listening address")?;
    engine.start_timers();
    let app = http::router(AppState {
        engine: engine.clone(),
        secret,
        replay,
        login: Arc::new(crate::login::Login::new(&config.users)),
    });
    println!(
        "svc: {} listening on http://{address}; UI at http://{address}/svc",
        main.name
    );
    tracing::info!(%address, jobs = config.jobs.len(), http_jobs = config.http_jobs.len(), "started");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::server::serve(
        listener,
        app,
        async move {
            let _ = stop_rx.await;
        },
        Duration::from_secs(1),
    ));

    wait_for_stop(&engine, &config_path).await?;
    tracing::info!("stopping");
    let _ = stop_tx.send(());
    engine.shutdown(SHUTDOWN_LIMIT).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
    tracing::info!("stopped");
    Ok(())
}

/// Handles SIGHUP (reload) until SIGTERM or SIGINT arrives.
async fn wait_for_stop(engine: &Engine, config_path: &Path) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
    loop {
        tokio::select! {
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
            _ = hangup.recv() => reload(engine, config_path).await,
        }
    }
}

async fn reload(engine: &Engine, config_path: &Path) {
    let path = config_path.to_path_buf();
    let loaded = tokio::task::spawn_blocking(move || config::load(&path)).await;
    match loaded {
        Ok(Ok(config)) => {
            engine.reload(&config);
            tracing::info!(
                jobs = config.jobs.len(),
                http_jobs = config.http_jobs.len(),
                "configuration reloaded"
            );
        }
        Ok(Err(err)) => {
            for issue in &err.issues {
                tracing::error!("reload refused: {issue}");
            }
            tracing::error!("configuration not reloaded: the running jobs are unchanged");
        }
        Err(err) => tracing::error!(error = %err, "reload failed"),
    }
}
