//! The replay checks as the service makes them: in this node's stores, or in cluster
//! mode in the cluster's table.

use super::{
    DELIVERY_TTL_SECS, NONCE_TTL_SECS, ReplayStore, ReplayStores, SIGNATURE_TTL_SECS, Seen,
};

/// Which record of accepted requests a check goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ledger {
    /// Code host delivery IDs.
    Deliveries,
    /// What patchhost signatures cover (body and nonce).
    Nonces,
    /// The signatures of control requests.
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

    /// Whether `value` is recorded under any of `scopes`. Locally a look in memory on
    /// the caller's thread, unless a write (which fsyncs) holds the store.
    pub async fn is_recorded_in_any(
        &self,
        ledger: Ledger,
        scopes: &[&'static str],
        value: &[u8],
    ) -> Result<bool, ReplayFault> {
        if let Some(cluster) = &self.cluster {
            let (store, ttl) = ledger.shared();
            for scope in scopes {
                if cluster
                    .is_seen(store, &shared_key(scope, value), ttl)
                    .await
                    .map_err(fault)?
                {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let at_once = scopes.iter().try_fold(false, |seen, scope| {
            Some(seen || ledger.local(&self.local).try_is_recorded(scope, value)?)
        });
        if let Some(seen) = at_once {
            return Ok(seen);
        }
        let (local, scopes, value) = (self.local.clone(), scopes.to_vec(), value.to_vec());
        tokio::task::spawn_blocking(move || {
            scopes
                .iter()
                .any(|scope| ledger.local(&local).is_recorded(scope, &value))
        })
        .await
        .map_err(|err| ReplayFault::Failed(err.to_string()))
    }
}
