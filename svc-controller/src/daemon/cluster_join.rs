//! A node's start-up in cluster mode: connect to the cluster's database, bring its schema
//! up to date, register the node, record its job definitions (naming in the log those
//! another live node defines differently), and start the heartbeat. All of it before the
//! engine exists, so that a node that cannot reach the shared truth never serves.
//! Also the recording of the definitions again at a reload, and the words `--check`
//! says the same drift in.

use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::{
    ClusterError, ClusterStore, DefComparison, DefDrift, HEARTBEAT_EVERY, Heartbeat, JobDef,
    JobKey, JobKind, StoreOptions, http_job_hash, job_hash,
};
use crate::config::{ClusterConfig, Config};

use super::EXIT_CONFIG;
use super::check::some_names;

/// How long the start-up tries to reach the database before giving up: long enough for
/// a database that starts with the machine, short enough that the service manager sees
/// the failure (and restarts the node) within a minute.
const START_LIMIT: Duration = Duration::from_secs(30);
/// The pause between two attempts while the database is unreachable.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// This node in the cluster: its store and its heartbeat, until [`ClusterNode::leave`].
pub(super) struct ClusterNode {
    store: ClusterStore,
    heartbeat: Heartbeat,
    name: String,
}

impl ClusterNode {
    /// What the engine needs of this node: the store and its name.
    pub fn link(&self) -> crate::engine::cluster_link::ClusterLink {
        crate::engine::cluster_link::ClusterLink::new(self.store.clone(), self.name.clone())
    }

    /// Stops the heartbeat and closes the connections. Nothing else is written: the
    /// heartbeat stops, and a restart's registration cleans up what is left.
    pub async fn leave(self) {
        self.heartbeat.stop().await;
        self.store.close().await;
    }
}

/// Why a node could not join its cluster. Never shows the database URL itself, only
/// [`ClusterConfig::shown_url`].
#[derive(Debug, thiserror::Error)]
pub(super) enum JoinError {
    #[error("database_url ({shown}): the cluster database is not reachable (tried for {} s)", START_LIMIT.as_secs())]
    Unreachable {
        shown: String,
        #[source]
        source: ClusterError,
    },
    #[error("database_url ({shown}): the cluster schema cannot be brought up to date")]
    Schema {
        shown: String,
        #[source]
        source: ClusterError,
    },
    #[error("[cluster] {0}")]
    NameInUse(#[source] ClusterError),
    #[error("database_url ({shown}): {step} failed")]
    Store {
        shown: String,
        step: &'static str,
        #[source]
        source: ClusterError,
    },
}

impl JoinError {
    /// The process's exit status: a configuration error when restarting cannot help
    /// (the service manager does not restart on it), a failure when it may (the
    /// database may come back).
    pub fn exit_code(&self) -> u8 {
        match self {
            // Exit 1: the other node may stop, and a restart then joins.
            JoinError::Unreachable { .. } | JoinError::Store { .. } | JoinError::NameInUse(_) => 1,
            JoinError::Schema { .. } => EXIT_CONFIG,
        }
    }
}

/// Each configured job with its definition hash.
pub(super) fn job_defs(config: &Config) -> Vec<JobDef> {
    let jobs = config.jobs.iter().map(|job| JobDef {
        job: JobKey::new(JobKind::Job, job.id.clone()),
        hash: job_hash(job),
    });
    let http_jobs = config.http_jobs.iter().map(|job| JobDef {
        job: JobKey::new(JobKind::Http, job.id.clone()),
        hash: http_job_hash(job),
    });
    jobs.chain(http_jobs).collect()
}

/// Joins the cluster (see the module's documentation); the heartbeat task runs on the
/// runtime `beat_on` (the engine's, beside the runs whose leases it keeps).
pub(super) async fn join(
    cluster: &ClusterConfig,
    config: &Config,
    beat_on: &tokio::runtime::Handle,
) -> Result<ClusterNode, JoinError> {
    let shown = cluster.shown_url();
    let node = cluster.node_name.as_str();
    let options = StoreOptions {
        max_connections: cluster.max_connections,
        instance: instance(config).await,
        ..StoreOptions::default()
    };
    let store = ClusterStore::new(cluster.database_url.expose(), &options).map_err(|source| {
        JoinError::Store {
            shown: shown.clone(),
            step: "reading the URL",
            source,
        }
    })?;
    let defs = job_defs(config);
    let deadline = Instant::now() + START_LIMIT;
    let mut announced = false;
    // Each step is idempotent (the migrator's lock, an upsert each), so an outage half-way
    // is met by starting over.
    let drift = loop {
        match join_once(&store, node, config.main.max_job_running, &defs).await {
            Ok(drift) => break drift,
            Err((_, err)) if err.is_unavailable() && Instant::now() + RETRY_EVERY < deadline => {
                if !announced {
                    tracing::warn!(database_url = %shown, error = %err, "the cluster database is not reachable yet; trying again");
                    announced = true;
                }
                tokio::time::sleep(RETRY_EVERY).await;
            }
            Err((_, source)) if source.is_unavailable() => {
                store.close().await;
                return Err(JoinError::Unreachable { shown, source });
            }
            Err((_, source @ ClusterError::NodeNameInUse { .. })) => {
                store.close().await;
                return Err(JoinError::NameInUse(source));
            }
            Err((Step::Migrate, source)) => {
                store.close().await;
                return Err(JoinError::Schema { shown, source });
            }
            Err((step, source)) => {
                store.close().await;
                return Err(JoinError::Store {
                    shown,
                    step: step.text(),
                    source,
                });
            }
        }
    };
    tracing::info!(node, database_url = %shown, jobs = defs.len(), "joined the cluster");
    warn_of_drift(&drift);
    let heartbeat = {
        let _inside = beat_on.enter();
        Heartbeat::start(store.clone(), node.to_string(), HEARTBEAT_EVERY)
    };
    Ok(ClusterNode {
        store,
        heartbeat,
        name: node.to_string(),
    })
}

/// Who this process is, as the cluster tells a node's restart from a namesake: the
/// machine (its systemd machine ID, or the host name without one) and the state
/// directory, which one process at a time holds.
async fn instance(config: &Config) -> String {
    let machine = match tokio::fs::read_to_string("/etc/machine-id").await {
        Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
        _ => nix::unistd::gethostname()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    format!("{machine}:{}", config.main.dir_state.display())
}

/// The steps of a join, to say which one failed.
#[derive(Debug, Clone, Copy)]
enum Step {
    Migrate,
    Register,
    Record,
}

impl Step {
    fn text(self) -> &'static str {
        match self {
            Step::Migrate => "bringing the schema up to date",
            Step::Register => "registering the node",
            Step::Record => "recording the job definitions",
        }
    }
}

async fn join_once(
    store: &ClusterStore,
    node: &str,
    max_job_running: usize,
    defs: &[JobDef],
) -> Result<DefDrift, (Step, ClusterError)> {
    store.migrate().await.map_err(|err| (Step::Migrate, err))?;
    let max_job_running = u32::try_from(max_job_running).unwrap_or(u32::MAX);
    let interrupted = store
        .register_node(node, max_job_running)
        .await
        .map_err(|err| (Step::Register, err))?;
    for run in &interrupted {
        tracing::warn!(
            kind = run.job.kind.as_str(),
            job = %run.job.id,
            counter = run.counter,
            "a run left running by this node's last life is recorded as interrupted"
        );
    }
    store
        .sync_job_defs(node, defs)
        .await
        .map_err(|err| (Step::Record, err))
}

/// Names in the log the jobs whose definitions differ from another live node's, and
/// those another live node defines and this one does not.
fn warn_of_drift(drift: &DefDrift) {
    if !drift.differ.is_empty() {
        let named: Vec<String> = drift
            .differ
            .iter()
            .map(|(job, nodes)| format!("{job} (on {})", nodes.join(", ")))
            .collect();
        let named: Vec<&str> = named.iter().map(String::as_str).collect();
        tracing::warn!(
            count = drift.differ.len(),
            "job definitions differ from other live nodes of the cluster: {}; a run of \
             these jobs does what the node that claims it defines",
            some_names(&named)
        );
    }
    if !drift.missing_here.is_empty() {
        let named: Vec<String> = drift.missing_here.iter().map(JobKey::to_string).collect();
        let named: Vec<&str> = named.iter().map(String::as_str).collect();
        tracing::warn!(
            count = drift.missing_here.len(),
            "jobs other live nodes of the cluster define and this node does not: {}",
            some_names(&named)
        );
    }
}

/// How long a reload waits for its definitions to be recorded: the main loop, which
/// also pings the watchdog and handles SIGTERM, waits meanwhile.
const RECORD_LIMIT: Duration = Duration::from_secs(10);

/// Records the definitions of a reloaded configuration (`defs`), so that this node
/// claims runs of its new jobs and no longer of the removed ones, and names in the log
/// the drift as the start does. One attempt, bounded by [`RECORD_LIMIT`]: a database
/// that is away is a warning (the reload itself is done; the next reload or start
/// records them). No retry later: it could overwrite the rows of a newer reload.
pub(super) async fn record_reloaded_defs(
    link: &crate::engine::cluster_link::ClusterLink,
    defs: &[JobDef],
) {
    let recorded =
        tokio::time::timeout(RECORD_LIMIT, link.store.sync_job_defs(&link.node, defs)).await;
    let err = match recorded {
        Ok(Ok(drift)) => {
            tracing::info!(
                jobs = defs.len(),
                "reloaded job definitions recorded in the cluster"
            );
            warn_of_drift(&drift);
            return;
        }
        Ok(Err(err)) => err.to_string(),
        Err(_elapsed) => format!("no answer within {} s", RECORD_LIMIT.as_secs()),
    };
    tracing::warn!(
        error = %err,
        "the reloaded job definitions could not be recorded in the cluster: until the \
         next reload or start, this node claims runs of the jobs it recorded before"
    );
}

/// What `--check` says of a [`DefComparison`]: lines to print, and warnings.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct DriftReport {
    pub lines: Vec<String>,
    pub warnings: Vec<String>,
}

/// `--check`'s words for `comparison`: every job named (an operator fixing a rollout
/// wants the whole list, unlike a log line), with the nodes on the other side.
pub(super) fn drift_report(comparison: &DefComparison) -> DriftReport {
    let mut report = DriftReport::default();
    let others = comparison.live_nodes.len();
    if others == 0 {
        report
            .lines
            .push("no other live node to compare job definitions with".to_string());
        return report;
    }
    let names: Vec<&str> = comparison.live_nodes.iter().map(String::as_str).collect();
    if comparison.is_empty() {
        report.lines.push(format!(
            "job definitions agree with {others} other live node(s) ({})",
            some_names(&names)
        ));
        return report;
    }
    report.lines.push(format!(
        "job definitions compared with {others} other live node(s) ({}): {} differ, {} \
         defined only elsewhere",
        some_names(&names),
        comparison.differ.len(),
        comparison.missing_here.len()
    ));
    for (job, nodes) in &comparison.differ {
        report.warnings.push(format!(
            "{job}: defined differently on {}",
            nodes.join(", ")
        ));
    }
    for (job, nodes) in &comparison.missing_here {
        report.warnings.push(format!(
            "{job}: defined on {} but not in this configuration",
            nodes.join(", ")
        ));
    }
    report.warnings.push(
        "job definitions that differ between nodes are a warning, not an error (a rolling \
         change of definitions passes through it): the exit status stays 0"
            .to_string(),
    );
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str) -> JobKey {
        JobKey::new(JobKind::Job, id)
    }

    #[test]
    fn check_names_each_differing_job_with_its_nodes() {
        let comparison = DefComparison {
            live_nodes: vec!["b".into(), "c".into()],
            differ: vec![(job("shared"), vec!["b".into(), "c".into()])],
            missing_here: vec![(JobKey::new(JobKind::Http, "ping"), vec!["c".into()])],
        };
        let report = drift_report(&comparison);
        assert_eq!(
            report.lines,
            [
                "job definitions compared with 2 other live node(s) (b, c): 1 differ, 1 defined \
              only elsewhere"
            ]
        );
        assert_eq!(report.warnings.len(), 3, "{report:?}");
        assert_eq!(
            report.warnings[0],
            "job shared: defined differently on b, c"
        );
        assert_eq!(
            report.warnings[1],
            "job_http ping: defined on c but not in this configuration"
        );
        assert!(report.warnings[2].contains("the exit status stays 0"));
    }

    #[test]
    fn check_says_when_there_is_nothing_to_warn_of() {
        let alone = drift_report(&DefComparison::default());
        assert_eq!(
            alone.lines,
            ["no other live node to compare job definitions with"]
        );
        assert!(alone.warnings.is_empty());
        let agreeing = drift_report(&DefComparison {
            live_nodes: vec!["b".into()],
            ..DefComparison::default()
        });
        assert_eq!(
            agreeing.lines,
            ["job definitions agree with 1 other live node(s) (b)"]
        );
        assert!(agreeing.warnings.is_empty());
    }
}
