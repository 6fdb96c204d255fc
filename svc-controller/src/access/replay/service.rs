//! The replay checks as the service makes them: in this node's stores, or in cluster
//! mode in the cluster's table.

use super::{
    Claim, DELIVERY_TTL_SECS, NONCE_TTL_SECS, ReplayStore, ReplayStores, RouteClass,
    SIGNATURE_TTL_SECS, Seen,
};

/// Which record of accepted requests a check goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ledger {
    /// Code host delivery IDs.
    Deliveries,
    /// What patchhost signatures cover (body and nonce).
    Nonces,
    /// The spend store: every accepted signature, whatever its route.
    Signatures,
}

impl Ledger {
    fn local(self, stores: &ReplayStores) -> &ReplayStore {
        match self {
            Ledger::Deliveries => stores.deliveries(),
            Ledger::Nonces => stores.nonces(),
            Ledger::Signatures => stores.signatures(),
        }
    }

    fn shared(self) -> (crate::cluster::ReplayStore, std::time::Duration) {
        let (store, secs) = match self {
            Ledger::Deliveries => (crate::cluster::ReplayStore::Deliveries, DELIVERY_TTL_SECS),
            Ledger::Nonces => (crate::cluster::ReplayStore::Nonces, NONCE_TTL_SECS),
            Ledger::Signatures => (crate::cluster::ReplayStore::Signatures, SIGNATURE_TTL_SECS),
        };
        (store, std::time::Duration::from_secs(secs.unsigned_abs()))
    }
}

/// Why a replay check could not be made. Nothing was recorded.
#[derive(Debug, thiserror::Error)]
pub enum ReplayFault {
    /// Cluster mode: the cluster's database cannot be reached (passing: try later).
    #[error("the cluster database is unreachable")]
    Unavailable,
    #[error("{0}")]
    Failed(String),
}

/// The replay checks as the service makes them: in this node's stores, or in cluster
/// mode in the cluster's table, so that a delivery, nonce or signature accepted by any
/// node is refused by every other. The one place that decides between the two.
#[derive(Debug, Clone)]
pub struct Replay {
    local: std::sync::Arc<ReplayStores>,
    cluster: Option<crate::cluster::ClusterStore>,
}

/// The key of `scope`'s `value` in the cluster's table: the scope (a job ID or a
/// signed action), a zero byte (scopes hold none), the value.
fn shared_key(scope: &str, value: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(scope.len() + 1 + value.len());
    key.extend_from_slice(scope.as_bytes());
    key.push(0);
    key.extend_from_slice(value);
    key
}

fn fault(err: crate::cluster::ClusterError) -> ReplayFault {
    if err.is_unavailable() {
        ReplayFault::Unavailable
    } else {
        ReplayFault::Failed(err.to_string())
    }
}

impl Replay {
    pub fn new(
        local: std::sync::Arc<ReplayStores>,
        cluster: Option<crate::cluster::ClusterStore>,
    ) -> Replay {
        Replay { local, cluster }
    }

    /// Records `value` under `scope` unless it was seen within the ledger's time to
    /// live. Off the async workers where the local store fsyncs.
    pub async fn check_and_record(
        &self,
        ledger: Ledger,
        scope: &str,
        value: &[u8],
    ) -> Result<Seen, ReplayFault> {
        if let Some(cluster) = &self.cluster {
            let (store, ttl) = ledger.shared();
            return match cluster
                .seen_once(store, &shared_key(scope, value), ttl)
                .await
            {
                Ok(true) => Ok(Seen::New),
                Ok(false) => Ok(Seen::Replay),
                Err(err) => Err(fault(err)),
            };
        }
        let (local, scope, value) = (self.local.clone(), scope.to_string(), value.to_vec());
        tokio::task::spawn_blocking(move || ledger.local(&local).check_and_record(&scope, &value))
            .await
            .map_err(|err| ReplayFault::Failed(err.to_string()))?
            .map_err(|err| ReplayFault::Failed(err.to_string()))
    }

    /// Forgets `value` under `scope` (the request it came with was refused after all),
    /// waiting for it so that a retry sent right after finds it forgotten. A failure is
    /// logged.
    pub async fn forget(&self, ledger: Ledger, scope: &str, value: &[u8]) {
        let forgotten = match &self.cluster {
            Some(cluster) => {
                let (store, _) = ledger.shared();
                cluster
                    .forget_seen(store, &shared_key(scope, value))
                    .await
                    .map_err(|err| err.to_string())
            }
            None => {
                let (local, scope, value) = (self.local.clone(), scope.to_string(), value.to_vec());
                tokio::task::spawn_blocking(move || ledger.local(&local).forget(&scope, &value))
                    .await
                    .map_err(|err| err.to_string())
            }
        };
        if let Err(err) = forgotten {
            tracing::error!(error = %err, "replay store: forgetting an entry failed");
        }
    }
}

/// The spend store: one record of every signature accepted, on any route.
impl Replay {
    /// Spends `keys` (the canonical spellings of one signature) for `route`, of
    /// `class`; see [`ReplayStore::claim`]. In cluster mode the same rules hold across
    /// nodes, with one gap: a control request and a webhook carrying the same signature
    /// at the same instant on two nodes may both pass.
    pub async fn claim_signature(
        &self,
        keys: Vec<Vec<u8>>,
        route: &str,
        class: RouteClass,
        repeatable: bool,
    ) -> Result<Claim, ReplayFault> {
        if let Some(cluster) = &self.cluster {
            return claim_shared(cluster, &keys, route, class, repeatable).await;
        }
        let (local, route) = (self.local.clone(), route.to_string());
        tokio::task::spawn_blocking(move || {
            local.signatures().claim(&keys, &route, class, repeatable)
        })
        .await
        .map_err(|err| ReplayFault::Failed(err.to_string()))?
        .map_err(|err| ReplayFault::Failed(err.to_string()))
    }

    /// Takes back a [`Replay::claim_signature`] that answered [`Claim::New`] (the
    /// request was refused after all), so that a retry on the same route can run. A
    /// failure is logged.
    pub async fn release_signature(&self, keys: Vec<Vec<u8>>, route: &str) {
        let released = match &self.cluster {
            Some(cluster) => {
                let (store, _) = Ledger::Signatures.shared();
                let mut result = Ok(());
                for key in &keys {
                    if let Err(err) = cluster.forget_seen(store, &shared_key(route, key)).await {
                        result = Err(err.to_string());
                    }
                }
                result
            }
            None => {
                let (local, route) = (self.local.clone(), route.to_string());
                tokio::task::spawn_blocking(move || local.signatures().release(&keys, &route))
                    .await
                    .map_err(|err| err.to_string())
            }
        };
        if let Err(err) = released {
            tracing::error!(error = %err, "spend store: releasing a signature failed");
        }
    }
}

/// [`Replay::claim_signature`] in the cluster's table, key by key: the other class's
/// marker refuses; the route's own entry is written first wins (a one-time route's
/// repeat is refused however the nodes race); a control route must also be the first
/// of its class; then the class marker is written.
async fn claim_shared(
    cluster: &crate::cluster::ClusterStore,
    keys: &[Vec<u8>],
    route: &str,
    class: RouteClass,
    repeatable: bool,
) -> Result<Claim, ReplayFault> {
    let (store, ttl) = Ledger::Signatures.shared();
    for key in keys {
        let other = shared_key(class.other().marker(), key);
        if cluster.is_seen(store, &other, ttl).await.map_err(fault)? {
            return Ok(Claim::Spent);
        }
    }
    let mut claimed = Vec::new();
    let mut verdict = Claim::New;
    for key in keys {
        if !cluster
            .seen_once(store, &shared_key(route, key), ttl)
            .await
            .map_err(fault)?
        {
            verdict = if repeatable {
                Claim::Repeat
            } else {
                Claim::Spent
            };
            break;
        }
        claimed.push(key);
        let first_of_class = cluster
            .seen_once(store, &shared_key(class.marker(), key), ttl)
            .await
            .map_err(fault)?;
        if !first_of_class && class == RouteClass::Control {
            verdict = Claim::Spent;
            break;
        }
    }
    if verdict != Claim::New {
        // Not ours after all: this route's entries go back.
        for key in claimed {
            if let Err(err) = cluster.forget_seen(store, &shared_key(route, key)).await {
                tracing::error!(error = %err, "spend store: releasing a signature failed");
            }
        }
    }
    Ok(verdict)
}
