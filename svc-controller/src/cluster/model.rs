//! The domain types the cluster store takes and answers: jobs, triggers, claimed and
//! reaped runs, and what each operation decided. No SQL here.

use chrono::{DateTime, Utc};

use crate::store::state::RunStatus;

/// Which namespace a job lives in (the engine's `Kind`, kept apart so that this module
/// does not import the engine, which will import it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobKind {
    Job,
    Http,
}

impl JobKind {
    /// Its spelling in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Job => "job",
            JobKind::Http => "job_http",
        }
    }

    /// Back from the database's spelling.
    pub fn parse(text: &str) -> Option<JobKind> {
        match text {
            "job" => Some(JobKind::Job),
            "job_http" => Some(JobKind::Http),
            _ => None,
        }
    }
}

/// What a node tells the others over `LISTEN/NOTIFY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalOp {
    /// Runs were queued or freed: claim now rather than at the next poll.
    Wake,
    Pause,
    Resume,
    Cancel,
    /// A run of the job began on the sending node (with its counter).
    Began,
    /// A run of the job ended there and its end is recorded (with its counter).
    Ended,
}

/// A signal between nodes ([`ClusterStore::signal`](super::ClusterStore::signal)): the
/// one text format every node of the cluster writes and reads. A signal a node cannot
/// read (from a newer release) is ignored; the nodes poll and read pause states back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signal {
    pub op: SignalOp,
    /// The job it is about, as `svc_jobs` spells it (`None` for a wake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The node that sent it.
    pub node: String,
    /// The run it is about, for [`SignalOp::Began`] and [`SignalOp::Ended`]. A node of an
    /// earlier release ignores the field, and the ops it does not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<u64>,
}

impl Signal {
    pub fn wake(node: &str) -> Signal {
        Signal {
            op: SignalOp::Wake,
            kind: None,
            id: None,
            node: node.to_string(),
            counter: None,
        }
    }

    pub fn about(op: SignalOp, job: &JobKey, node: &str) -> Signal {
        Signal {
            op,
            kind: Some(job.kind.as_str().to_string()),
            id: Some(job.id.clone()),
            node: node.to_string(),
            counter: None,
        }
    }

    /// A signal about run `counter` of `job` ([`SignalOp::Began`], [`SignalOp::Ended`]).
    pub fn about_run(op: SignalOp, job: &JobKey, node: &str, counter: u64) -> Signal {
        Signal {
            counter: Some(counter),
            ..Signal::about(op, job, node)
        }
    }

    /// The job it is about, when it names one this release knows.
    pub fn job(&self) -> Option<JobKey> {
        let kind = JobKind::parse(self.kind.as_deref()?)?;
        Some(JobKey::new(kind, self.id.clone()?))
    }

    /// Its text on the channel.
    pub fn to_text(&self) -> String {
        // Enums and strings always serialise.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Read back from the channel; `None` for a text this release cannot read.
    pub fn parse(text: &str) -> Option<Signal> {
        serde_json::from_str(text).ok()
    }
}

/// Pause states read back from the store ([`ClusterStore::pause_changes`](super::ClusterStore::pause_changes)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseChanges {
    /// Each job whose pause state changed, with the state now, in the order of change.
    pub changed: Vec<(JobKey, bool)>,
    /// The highest change number read: the next read asks from it.
    pub mark: i64,
}

/// A job of the cluster: its kind and ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey {
    pub kind: JobKind,
    pub id: String,
}

/// `kind id` (`job build`, `job_http ping`): how messages, the log and `--check` name a
/// job of the cluster.
impl std::fmt::Display for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.id)
    }
}

impl JobKey {
    pub fn new(kind: JobKind, id: impl Into<String>) -> JobKey {
        JobKey {
            kind,
            id: id.into(),
        }
    }
}

/// A trigger a node accepted, to be queued.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTrigger {
    /// The node that accepted it.
    pub accepted_by: String,
    /// Which attempt of a failing job this is (1 unless a retry).
    pub attempt: i32,
    /// What the engine needs to start the run (source, delivery facts, body), kept as
    /// the engine gives it.
    pub payload: serde_json::Value,
}

/// What became of a trigger offered to a job's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueOutcome {
    /// Queued as this run; some node will claim it.
    Enqueued { run_id: i64 },
    /// The job already has a queued run: the one-slot queue is full (429).
    QueueFull,
    /// The job is paused (412).
    Paused,
}

/// What became of a timer slot a node offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotClaim {
    /// Another node claimed the slot first: it is not this node's to run.
    Taken,
    /// This node claimed it and queued its run.
    Enqueued { run_id: i64 },
    /// This node claimed it, but the job was running or had a run queued: the tick is
    /// skipped, as in single-node mode.
    SkippedBusy,
    /// This node claimed it, but the job is paused: the tick is skipped.
    SkippedPaused,
}

impl SlotClaim {
    /// True when this node inserted the slot (whatever became of its run).
    pub fn is_ours(self) -> bool {
        !matches!(self, SlotClaim::Taken)
    }

    /// What the claiming node records of its slot (`svc_slots.outcome`): `queued`,
    /// `busy` or `paused`; `None` for a slot another node claimed.
    pub fn outcome(self) -> Option<&'static str> {
        match self {
            SlotClaim::Taken => None,
            SlotClaim::Enqueued { .. } => Some("queued"),
            SlotClaim::SkippedBusy => Some("busy"),
            SlotClaim::SkippedPaused => Some("paused"),
        }
    }
}

/// A queued run a node claimed: it is now running on that node, under a lease.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedRun {
    pub run_id: i64,
    pub job: JobKey,
    /// The job's run counter, given to this run alone.
    pub counter: i64,
    pub attempt: i32,
    pub payload: serde_json::Value,
    pub accepted_by: String,
    pub accepted_at: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
    /// Until when the run is this node's without a heartbeat.
    pub lease_until: DateTime<Utc>,
}

/// How a run ended, as its node reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub http_status: Option<u16>,
    pub summary: Option<String>,
    /// When its node began and ended it (the history's times, as on a single node);
    /// `None` for a run that never began.
    pub ran: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

impl RunOutcome {
    /// An outcome with only its status.
    pub fn new(status: RunStatus) -> RunOutcome {
        RunOutcome {
            status,
            exit_code: None,
            signal: None,
            http_status: None,
            summary: None,
            ran: None,
        }
    }
}

/// What became of a node's report of a run's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Recorded: the run is done.
    Recorded,
    /// The run was no longer this node's (its lease lapsed and it was reaped as
    /// interrupted, or it never was): nothing was written.
    LeaseLost,
}

/// A job as this node defines it: its key and its definition hash
/// ([`job_hash`](super::job_hash), [`http_job_hash`](super::http_job_hash)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDef {
    pub job: JobKey,
    pub hash: String,
}

/// How this node's job definitions stand against the other live nodes', as
/// [`ClusterStore::sync_job_defs`](super::ClusterStore::sync_job_defs) finds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefDrift {
    /// Jobs this node defines that some other live node defines differently, each with
    /// those nodes' names (sorted). Sorted by job.
    pub differ: Vec<(JobKey, Vec<String>)>,
    /// Jobs some other live node defines and this one does not (sorted): a trigger that
    /// node accepts for them must not be claimed here.
    pub missing_here: Vec<JobKey>,
}

impl DefDrift {
    /// True when every job agrees with every live node.
    pub fn is_empty(&self) -> bool {
        self.differ.is_empty() && self.missing_here.is_empty()
    }
}

/// How a configuration's job definitions stand against those the other live nodes
/// recorded, as [`ClusterStore::compare_job_defs`](super::ClusterStore::compare_job_defs)
/// reads them, writing nothing (for `--check`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefComparison {
    /// The other live nodes compared with (sorted).
    pub live_nodes: Vec<String>,
    /// Jobs the configuration defines that some other live node defines differently,
    /// each with those nodes' names (sorted). Sorted by job.
    pub differ: Vec<(JobKey, Vec<String>)>,
    /// Jobs some other live node defines and the configuration does not, each with
    /// those nodes' names (sorted). Sorted by job.
    pub missing_here: Vec<(JobKey, Vec<String>)>,
}

impl DefComparison {
    /// True when every job agrees with every other live node.
    pub fn is_empty(&self) -> bool {
        self.differ.is_empty() && self.missing_here.is_empty()
    }
}

/// A node as the cluster records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    /// A heartbeat within one lease (the database's clock): the rule reaping goes by.
    pub live: bool,
    pub max_job_running: u32,
}

/// One definition of a job and the nodes that hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefHolders {
    /// The definition hash ([`job_hash`](super::job_hash)): no secret goes into it.
    pub hash: String,
    /// The nodes whose definition it is (sorted).
    pub nodes: Vec<String>,
}

/// A job whose definitions differ between live nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DifferingJob {
    pub job: JobKey,
    /// Each definition and its nodes, sorted by hash; two or more.
    pub defs: Vec<DefHolders>,
}

impl DifferingJob {
    /// The hash node `node` holds, when it defines the job.
    pub fn hash_of(&self, node: &str) -> Option<&str> {
        self.defs
            .iter()
            .find(|def| def.nodes.iter().any(|n| n == node))
            .map(|def| def.hash.as_str())
    }
}

/// What a node reports of its cluster
/// ([`ClusterStore::overview`](super::ClusterStore::overview)): the nodes, and the jobs
/// whose definitions differ, read in one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterOverview {
    /// Every registered node, live or not (sorted by name).
    pub nodes: Vec<NodeInfo>,
    /// Jobs whose definitions differ between live nodes (this node counted even when its
    /// heartbeat lapsed), sorted by job; at most the limit asked for.
    pub differ: Vec<DifferingJob>,
    /// How many jobs differ in all.
    pub differ_total: u64,
    /// Jobs other live nodes define and this node does not, with those nodes (sorted);
    /// at most the limit asked for.
    pub missing_here: Vec<(JobKey, Vec<String>)>,
    /// How many such jobs there are in all.
    pub missing_here_total: u64,
}

/// A running run whose lease lapsed, recorded as interrupted.
#[derive(Debug, Clone, PartialEq)]
pub struct ReapedRun {
    pub run_id: i64,
    pub job: JobKey,
    pub counter: i64,
    /// The node that held it.
    pub node: String,
}

/// How the database's schema stands against the migrations this binary embeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaStatus {
    /// Every embedded migration is applied, and nothing else.
    Current,
    /// These migrations (versions) are not applied yet: the next start applies them.
    Pending(Vec<i64>),
    /// The database has migrations this binary does not know (a newer release applied
    /// them): this binary must not run against it.
    Newer(Vec<i64>),
    /// A migration failed half-way, or was applied with other content than this binary's:
    /// the schema needs a person's look.
    Broken { version: i64, reason: &'static str },
}

/// The replay stores: what is accepted only once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayStore {
    /// Webhook delivery IDs.
    Deliveries,
    /// What patchhost signatures cover (body and nonce).
    Nonces,
    /// The signatures of signed control requests.
    Signatures,
}

impl ReplayStore {
    /// Its spelling in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayStore::Deliveries => "delivery",
            ReplayStore::Nonces => "nonce",
            ReplayStore::Signatures => "signature",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_kinds_keep_the_engines_spelling() {
        for kind in [JobKind::Job, JobKind::Http] {
            assert_eq!(JobKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(JobKind::Job.as_str(), "job");
        assert_eq!(JobKind::Http.as_str(), "job_http");
        assert_eq!(JobKind::parse("hook"), None);
    }

    #[test]
    fn run_signals_carry_their_counter_and_older_signals_still_read() {
        let job = JobKey::new(JobKind::Job, "build");
        let ended = Signal::about_run(SignalOp::Ended, &job, "node-a", 42);
        let text = ended.to_text();
        assert_eq!(
            text,
            r#"{"op":"ended","kind":"job","id":"build","node":"node-a","counter":42}"#
        );
        assert_eq!(Signal::parse(&text), Some(ended));
        // A pause, as an earlier release wrote it: no counter.
        let pause =
            Signal::parse(r#"{"op":"pause","kind":"job","id":"build","node":"b"}"#).expect("read");
        assert_eq!(pause.counter, None);
        assert_eq!(pause.job(), Some(job));
        // An op a later release may add is not read (the nodes poll anyway).
        assert_eq!(Signal::parse(r#"{"op":"rebalance","node":"b"}"#), None);
    }
}
