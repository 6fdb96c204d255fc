//! Reload: a new configuration's job definitions applied to the running engine.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Def, Engine, Entry, Kind, events};
use crate::config::Config;

impl Engine {
    /// Applies a new configuration's job definitions. Unchanged jobs keep everything;
    /// changed ones keep their state and get the new definition and timer; removed ones
    /// go (after their current run, if any).
    pub fn reload(&self, config: &Config) {
        if config.main != self.inner.main {
            tracing::warn!("changes to the [svc] section take effect only after a restart");
        }
        let mut wanted: Vec<(Kind, String, Def)> = Vec::new();
        for job in &config.jobs {
            wanted.push((Kind::Job, job.id.clone(), Def::Job(Arc::new(job.clone()))));
        }
        for job in &config.http_jobs {
            wanted.push((Kind::Http, job.id.clone(), Def::Http(Arc::new(job.clone()))));
        }
        // New entries are read from disk (logs listed, interrupted runs repaired, state
        // written) before the registry is locked, so no sync to disk happens under it.
        let added: Vec<(Kind, String, Def)> = {
            let mut registry = self.lock();
            wanted
                .iter()
                .filter(|(kind, id, _)| !registry.map(*kind).contains_key(id))
                .cloned()
                .collect()
        };
        let mut loaded: HashMap<(Kind, String), Entry> = added
            .into_iter()
            .map(|(kind, id, def)| {
                let entry = self.load_entry(kind, def, &id);
                ((kind, id), entry)
            })
            .collect();
        let mut registry = self.lock();
        for kind in [Kind::Job, Kind::Http] {
            let removed: Vec<String> = registry
                .map(kind)
                .keys()
                .filter(|id| !wanted.iter().any(|(k, i, _)| *k == kind && i == *id))
                .cloned()
                .collect();
            for id in removed {
                let map = registry.map(kind);
                let Some(entry) = map.get_mut(&id) else {
                    continue;
                };
                if let Some(handle) = entry.slot.timer.take() {
                    handle.abort();
                }
                if entry.take_queued().is_some() {
                    tracing::warn!(job = %id, "queued trigger dropped: its job was removed from the configuration");
                    crate::metrics::trigger_dropped("job_removed");
                }
                if entry.slot.run.is_some() {
                    // Its series go when its run ends (see `run.rs`).
                    entry.retired = true;
                } else {
                    map.remove(&id);
                    crate::metrics::job_removed(kind.as_str(), &id);
                }
                tracing::info!(job = %id, "job removed from the configuration");
            }
        }
        for (kind, id, def) in wanted {
            let existing = registry.map(kind).get_mut(&id);
            match existing {
                Some(entry) if entry.def == def && !entry.retired => {}
                Some(entry) => {
                    let timer_changed = entry.def.timer() != def.timer() || entry.retired;
                    entry.def = def;
                    entry.retired = false;
                    if timer_changed {
                        self.restart_timer(kind, &id, entry);
                    }
                    tracing::info!(job = %id, "job definition changed");
                }
                None => {
                    let mut entry = match loaded.remove(&(kind, id.clone())) {
                        Some(entry) => entry,
                        // Reloads run one at a time, so only a job dropped while its
                        // last run ended comes here; reading it again is rare and short.
                        None => self.load_entry(kind, def, &id),
                    };
                    self.restart_timer(kind, &id, &mut entry);
                    registry.map(kind).insert(id.clone(), entry);
                    tracing::info!(job = %id, "job added");
                }
            }
        }
        registry.rebuild_indexes();
        // Jobs came or went, and queued triggers with them.
        registry.publish_queue_length();
        drop(registry);
        self.changed();
        self.publish(|| events::EngineEvent::Reloaded);
    }
}
