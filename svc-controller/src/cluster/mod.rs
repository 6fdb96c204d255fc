//! Cluster mode's foundation: the schema and the store that several controllers share on
//! PostgreSQL, so that each timer slot runs once, each accepted trigger runs once, and a
//! job has one run at a time across all of them.
//!
//! Wired: `--check` reads the schema's state, the start-up joins the cluster
//! (`daemon/cluster.rs`), and the engine's node part (`engine/cluster_node.rs`) queues,
//! claims, finishes, offers timer slots and keeps house through it. The design, each
//! guarantee and what it rests on are in `docs/cluster.md`; what is left in
//! `docs/cluster-wiring-status.md`.
//!
//! - `schema/`: the SQL migrations, embedded in the binary (`migrations.rs`) and applied
//!   under the migrator's advisory lock;
//! - `model.rs`: the domain types the store takes and answers;
//! - `error.rs`: [`ClusterError`], which tells an unreachable database (a 503 for the
//!   HTTP layer) from conflicts and bad data;
//! - `store.rs`: [`ClusterStore`], one SQL transaction per operation;
//! - `defhash.rs`: a job's definition hash, to tell nodes whose definitions differ;
//! - `shared.rs`: what every node shows whoever did the work: runs, their logs (copied
//!   in fixed chunks), the audit log;
//! - `drift.rs`: read-only views of how the nodes' definitions stand (`--check`, the
//!   API's cluster overview);
//! - `failover.rs`: the host of a multi-host URL the pool uses, and the move to another
//!   when it fails or cannot write;
//! - `heartbeat.rs`: [`Heartbeat`], the task that keeps the node's leases;
//! - `ownership.rs`: which live node offers each timer slot on time, and when the others
//!   take over;
//! - `store_slots.rs`: slots offered in batches, the live nodes, each node's wake-up
//!   channel.

mod defhash;
mod drift;
mod error;
mod failover;
mod heartbeat;
mod migrations;
mod model;
mod ownership;
mod replay_table;
mod shared;
mod store;
mod store_cancels;
mod store_nodes;
mod store_rows;
mod store_slots;

pub use defhash::{http_job_hash, job_hash};
pub use error::ClusterError;
pub use failover::HostState;
pub use heartbeat::{HEARTBEAT_EVERY, Heartbeat};
pub use model::{
    ClaimedRun, ClusterOverview, DefComparison, DefDrift, DefHolders, DifferingJob, EnqueueOutcome,
    Finish, JobDef, JobKey, JobKind, NewTrigger, NodeInfo, PauseChanges, ReapedRun, ReplayStore,
    RunOutcome, SchemaStatus, Signal, SignalOp, SlotClaim,
};
pub use ownership::{LiveNode, NodeView, SUSPECT_AFTER, Takeover, owner, score};
pub use shared::{LOG_CHUNK, SharedAudit, SharedLog, SharedRun, SharedRunState};
pub use store::{ClusterStore, DEFAULT_LEASE, SIGNAL_CHANNEL, StoreOptions};
pub use store_slots::{SlotOffer, wake_channel};
