//! The registry: every job's entry, by kind and ID, with the lookups of a job by its
//! trigger path and by its ID in any case.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;

use super::{Def, Entry, Kind};

#[derive(Debug, Default)]
pub(super) struct Registry {
    pub(super) jobs: BTreeMap<String, Entry>,
    pub(super) http: BTreeMap<String, Entry>,
    /// Trigger path → job ID.
    pub(super) paths: HashMap<String, String>,
    /// Lower-cased ID → ID, per kind: lookups by ID ignore case, as upstream's clients
    /// send IDs lower-cased (two IDs that differ only by case are a configuration error).
    pub(super) folded_ids: HashMap<(Kind, String), String>,
    pub(super) run_tasks: usize,
    /// False when the number of waiting runs may have changed since the metrics last
    /// counted it (see `queue_gauge.rs`).
    pub(super) queue_counted: AtomicBool,
}

impl Registry {
    pub(super) fn map(&mut self, kind: Kind) -> &mut BTreeMap<String, Entry> {
        match kind {
            Kind::Job => &mut self.jobs,
            Kind::Http => &mut self.http,
        }
    }
    pub(super) fn get(&mut self, kind: Kind, id: &str) -> Option<&mut Entry> {
        self.map(kind).get_mut(id).filter(|e| !e.retired)
    }
    /// The ID of the job of `kind` that `id` names, in any case.
    pub(super) fn resolve(&self, kind: Kind, id: &str) -> Option<String> {
        let map = match kind {
            Kind::Job => &self.jobs,
            Kind::Http => &self.http,
        };
        if map.get(id).is_some_and(|entry| !entry.retired) {
            return Some(id.to_string());
        }
        self.folded_ids
            .get(&(kind, id.to_ascii_lowercase()))
            .cloned()
    }

    /// Rebuilds the lookups of jobs by trigger path and by ID in any case.
    pub(super) fn rebuild_indexes(&mut self) {
        let mut folded = HashMap::new();
        for (kind, map) in [(Kind::Job, &self.jobs), (Kind::Http, &self.http)] {
            for (id, entry) in map {
                if !entry.retired {
                    folded.insert((kind, id.to_ascii_lowercase()), id.clone());
                }
            }
        }
        self.folded_ids = folded;
        self.paths = self
            .jobs
            .iter()
            .filter(|(_, e)| !e.retired)
            .filter_map(|(id, e)| match &e.def {
                Def::Job(job) => job.path.clone().map(|p| (p, id.clone())),
                Def::Http(_) => None,
            })
            .collect();
    }
}
