//! The engine's link to the cluster in cluster mode: the shared store and this node's
//! name. Absent in single-node mode, where every path of the engine stays as it is.

use crate::cluster::ClusterStore;

/// What the engine needs of the cluster: the store every trigger, claim and run's end
/// goes through, and the name this node registered under (the `node` of its claims and
/// leases).
#[derive(Debug, Clone)]
pub struct ClusterLink {
    pub store: ClusterStore,
    pub node: String,
}
