//! Read-only looks at the registry, in domain types: what the HTTP layer's views are
//! built from; and a job's logs and run history, read. The engine itself never builds
//! JSON.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{Def, Engine, EngineError, Entry, Kind, Registry};
use crate::config::{JobConfig, MainConfig};
use crate::store::history::{HistoryFile, RunRecord};
use crate::store::logstore::{LogDir, LogMeta, LogStatus};
use crate::store::state::RunResult;

/// One log, open for reading (see [`Engine::open_log`]).
#[derive(Debug)]
pub struct OpenLog {
    /// Its file name, `<id>.<counter>.<status>`.
    pub name: String,
    pub status: LogStatus,
    /// Read it to the length it has when the answer starts: a running log grows.
    pub file: std::fs::File,
}

/// What a job is doing, as its views show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Paused: its timer ticks are skipped and triggers refused.
    Paused,
    /// A run goes on (or, for a JobHttp, it was resumed and has not run since).
    Started,
    /// Idle; its last run ended so.
    Finished(RunResult),
    /// Idle, and it never ran.
    Never,
}

/// One job as the engine holds it, read-only, while the registry is locked (see
/// [`super::Engine::with_job`]).
#[derive(Clone, Copy)]
pub struct JobRef<'a> {
    kind: Kind,
    id: &'a str,
    entry: &'a Entry,
}

impl std::fmt::Debug for JobRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRef")
            .field("kind", &self.kind)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<'a> JobRef<'a> {
    pub(super) fn new(kind: Kind, id: &'a str, entry: &'a Entry) -> JobRef<'a> {
        JobRef { kind, id, entry }
    }

    pub fn id(&self) -> &'a str {
        self.id
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its definition, from the configuration.
    pub fn def(&self) -> &'a Def {
        &self.entry.def
    }

    pub fn status(&self) -> JobStatus {
        let entry = self.entry;
        let running = entry
            .slot
            .run
            .as_ref()
            .is_some_and(|run| run.counter.is_some())
            || entry.cluster.remote_run.is_some();
        if entry.state.paused {
            JobStatus::Paused
        } else if running || (self.kind == Kind::Http && entry.resumed) {
            JobStatus::Started
        } else {
            entry
                .state
                .last_result
                .map_or(JobStatus::Never, JobStatus::Finished)
        }
    }

    /// When its last run started.
    pub fn last_run(&self) -> Option<DateTime<Utc>> {
        self.entry.state.last_run
    }

    /// When its timer fires next.
    pub fn next_run(&self) -> Option<DateTime<Utc>> {
        self.entry.slot.next_run
    }

    /// Its logs, oldest first; a run going on is listed last, as `started` (in cluster
    /// mode, also one on another node). Their file names are
    /// [`crate::store::logstore::LogName`]s of the job's ID.
    pub fn logs(&self) -> impl Iterator<Item = LogMeta> + 'a {
        let entry = self.entry;
        let running = entry
            .slot
            .run
            .as_ref()
            .and_then(|run| run.counter)
            .or(entry.cluster.remote_run)
            .map(|counter| LogMeta {
                counter,
                status: LogStatus::Started,
            });
        entry.logs.iter().cloned().chain(running)
    }
}

/// Every job, read-only, while the registry is locked (see [`super::Engine::with_all`]).
#[derive(Clone, Copy)]
pub struct RegistryRef<'a> {
    main: &'a MainConfig,
    registry: &'a Registry,
}

impl std::fmt::Debug for RegistryRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryRef").finish_non_exhaustive()
    }
}

impl<'a> RegistryRef<'a> {
    pub(super) fn new(main: &'a MainConfig, registry: &'a Registry) -> RegistryRef<'a> {
        RegistryRef { main, registry }
    }

    /// The main section of the configuration.
    pub fn main(&self) -> &'a MainConfig {
        self.main
    }

    /// The jobs of `kind` (not those removed by a reload and still running), by ID.
    pub fn jobs(&self, kind: Kind) -> impl Iterator<Item = JobRef<'a>> + 'a {
        let map = match kind {
            Kind::Job => &self.registry.jobs,
            Kind::Http => &self.registry.http,
        };
        map.iter()
            .filter(|(_, entry)| !entry.retired)
            .map(move |(id, entry)| JobRef::new(kind, id, entry))
    }
}

impl Engine {
    /// The Job whose trigger `path` is `path` (with a leading `/`), in one registry
    /// lookup; its ID is `id` of the configuration.
    pub fn job_for_path(&self, path: &str) -> Option<Arc<JobConfig>> {
        let mut registry = self.lock();
        let id = registry.paths.get(path)?.clone();
        match registry.get(Kind::Job, &id).map(|e| e.def.clone()) {
            Some(Def::Job(job)) => Some(job),
            _ => None,
        }
    }

    /// Looks at one job while the registry is locked; `None` when there is no such job.
    /// `look` must be quick: every other request waits for the lock meanwhile.
    pub fn with_job<T>(
        &self,
        kind: Kind,
        id: &str,
        look: impl FnOnce(JobRef<'_>) -> T,
    ) -> Option<T> {
        let mut registry = self.lock();
        let id = registry.resolve(kind, id)?;
        let (id, entry) = registry
            .map(kind)
            .get_key_value(&id)
            .filter(|(_, entry)| !entry.retired)?;
        Some(look(JobRef::new(kind, id, entry)))
    }

    /// The engine's clock: what its timers count from (a manual clock in tests).
    pub fn now(&self) -> DateTime<Utc> {
        self.inner.clock.now()
    }

    /// Looks at every job while the registry is locked (see [`Engine::with_job`]).
    pub fn with_all<T>(&self, look: impl FnOnce(RegistryRef<'_>) -> T) -> T {
        let registry = self.lock();
        look(RegistryRef::new(&self.inner.main, &registry))
    }

    /// Opens one log for reading. Blocking: call it off the async workers.
    pub fn open_log(
        &self,
        kind: Kind,
        id: &str,
        counter: u64,
    ) -> Result<Option<OpenLog>, EngineError> {
        let log_dir = self.log_dir(kind, id)?;
        match log_dir.open(counter) {
            Ok(Some((status, file))) => Ok(Some(OpenLog {
                name: log_dir.file_name(counter, status),
                status,
                file,
            })),
            Ok(None) => Ok(None),
            Err(err) => {
                tracing::error!(job = id, counter, error = %err, "cannot open a log");
                Ok(None)
            }
        }
    }

    /// The last `max` bytes of one log. Blocking: call it off the async workers.
    pub fn read_log_end(
        &self,
        kind: Kind,
        id: &str,
        counter: u64,
        max: u64,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let log_dir = self.log_dir(kind, id)?;
        log_dir.read_end(counter, max).or_else(|err| {
            tracing::error!(job = id, counter, error = %err, "cannot read a log");
            Ok(None)
        })
    }

    /// Where the history of job `id` (its configured ID) is kept.
    pub(super) fn history_file(&self, kind: Kind, id: &str) -> HistoryFile {
        HistoryFile::new(&self.inner.main.dir_history(kind.as_str()), id)
    }

    /// A page of a job's run history, newest first: at most `limit` runs, those before
    /// counter `before` when given ([`HistoryFile::page`]). Blocking.
    pub fn run_history(
        &self,
        kind: Kind,
        id: &str,
        limit: usize,
        before: Option<u64>,
    ) -> Result<Vec<RunRecord>, EngineError> {
        let id = self.lock().resolve(kind, id).ok_or(EngineError::NotFound)?;
        // A run whose end is recorded (its log renamed, its job's status set) had its
        // history line queued at the syncer before: written before the page is read.
        self.inner.syncer.flush();
        self.history_file(kind, &id)
            .page(limit, before)
            .map_err(|err| {
                tracing::error!(job = %id, error = %err, "cannot read the run history");
                EngineError::Unreadable
            })
    }

    fn log_dir(&self, kind: Kind, id: &str) -> Result<LogDir, EngineError> {
        let mut registry = self.lock();
        let id = registry.resolve(kind, id).ok_or(EngineError::NotFound)?;
        Ok(registry
            .get(kind, &id)
            .ok_or(EngineError::NotFound)?
            .log_dir
            .clone())
    }

    /// Counters of a job's logs, oldest first.
    pub fn log_counters(&self, kind: Kind, id: &str) -> Result<Vec<u64>, EngineError> {
        let mut registry = self.lock();
        let id = registry.resolve(kind, id).ok_or(EngineError::NotFound)?;
        let entry = registry.get(kind, &id).ok_or(EngineError::NotFound)?;
        Ok(entry.logs.iter().map(|l| l.counter).collect())
    }
}
