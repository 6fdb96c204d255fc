//! What the engine tells a job's health check (`ping_url`): the start of each run, and
//! how each outcome ended, as [`RunPing`]s handed to a bounded channel without waiting
//! (`try_send`; a full channel drops the ping and says so). Domain data only: the
//! sender (`notify::ping`) turns them into requests, off the run path.

use std::sync::OnceLock;

use tokio::sync::mpsc::{self, error::TrySendError};

use super::{Def, Engine, Kind};
use crate::config::PingUrl;
use crate::runner::exec::EndDetail;
use crate::store::logstore::LogDir;
use crate::store::state::RunStatus;

/// One thing to tell a job's health check.
#[derive(Debug, Clone)]
pub struct RunPing {
    pub kind: Kind,
    pub job_id: String,
    pub counter: u64,
    /// The job's `ping_url`, as the run began with it.
    pub url: PingUrl,
    pub event: PingEvent,
}

/// What happened to the run.
#[derive(Debug, Clone)]
pub enum PingEvent {
    /// It began (its log is there, its work is about to start).
    Start,
    /// It ended, and is the outcome: a failed attempt that a retry follows sends no end
    /// (the retry's start and end follow), as its notifications wait too.
    End {
        status: RunStatus,
        /// How its last command or its HTTP call ended.
        detail: EndDetail,
        /// Where its log is, for the body (the end of the log).
        log_dir: LogDir,
    },
}

/// Where the engine's pings go, once the daemon sets it.
pub(super) type PingSink = OnceLock<mpsc::Sender<RunPing>>;

/// The pings of one run, made as it begins when its job has a `ping_url` and someone
/// listens: other runs pay nothing for them.
pub(super) struct RunPinger {
    kind: Kind,
    job_id: String,
    counter: u64,
    url: PingUrl,
    log_dir: LogDir,
}

impl RunPinger {
    pub(super) fn new(
        engine: &Engine,
        kind: Kind,
        def: &Def,
        counter: u64,
        log_dir: &LogDir,
    ) -> Option<RunPinger> {
        engine.inner.pings.get()?;
        let (job_id, url) = match def {
            Def::Job(job) => (&job.id, job.ping_url.as_ref()?),
            Def::Http(job) => (&job.id, job.ping_url.as_ref()?),
        };
        Some(RunPinger {
            kind,
            job_id: job_id.clone(),
            counter,
            url: url.clone(),
            log_dir: log_dir.clone(),
        })
    }

    /// Tells of the run's start.
    pub(super) fn start(&self, engine: &Engine) {
        self.send(engine, PingEvent::Start);
    }

    /// Tells how the run ended.
    pub(super) fn end(self, engine: &Engine, status: RunStatus, detail: EndDetail) {
        let event = PingEvent::End {
            status,
            detail,
            log_dir: self.log_dir.clone(),
        };
        self.send(engine, event);
    }

    fn send(&self, engine: &Engine, event: PingEvent) {
        let Some(sink) = engine.inner.pings.get() else {
            return;
        };
        let ping = RunPing {
            kind: self.kind,
            job_id: self.job_id.clone(),
            counter: self.counter,
            url: self.url.clone(),
            event,
        };
        match sink.try_send(ping) {
            Ok(()) => {}
            Err(TrySendError::Full(ping)) => {
                crate::metrics::ping_sent("dropped");
                tracing::warn!(
                    job = ping.job_id,
                    counter = ping.counter,
                    "the run's health ping is dropped: too many are waiting to be sent"
                );
            }
            Err(TrySendError::Closed(ping)) => tracing::debug!(
                job = ping.job_id,
                counter = ping.counter,
                "the run's health ping is dropped: the sender has stopped"
            ),
        }
    }
}
