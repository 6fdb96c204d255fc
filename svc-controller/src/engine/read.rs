//! Read-only looks at the registry, in domain types: what the HTTP layer's views are
//! built from. The engine itself never builds JSON.

use chrono::{DateTime, Utc};

use super::{Def, Entry, Kind, Registry};
use crate::config::MainConfig;
use crate::store::logstore::{LogMeta, LogStatus};
use crate::store::state::RunResult;

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
