//! The service's main loop: the stop signals, reloads (SIGHUP and the API's) and the
//! systemd watchdog.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

use super::{cluster_join, service_manager};
use crate::config;
use crate::engine::Engine;
use crate::http;

/// The signals the daemon handles, caught from the start of [`run`].
pub(super) struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub(super) fn install() -> anyhow::Result<StopSignals> {
        Ok(StopSignals {
            terminate: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
            hangup: signal(SignalKind::hangup()).context("cannot handle SIGHUP")?,
        })
    }
}

/// What a reload changes, and where it is recorded.
pub(super) struct Reloader<'a> {
    pub(super) engine: &'a Engine,
    pub(super) login: &'a crate::access::login::Login,
    pub(super) notifier: &'a crate::notify::Notifier,
    pub(super) audit: &'a crate::access::audit::AuditLog,
    pub(super) config_path: &'a Path,
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
pub(super) async fn wait_for_stop(
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
