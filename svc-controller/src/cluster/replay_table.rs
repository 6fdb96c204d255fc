//! The cluster's spend store (`svc_replay`): signatures and delivery IDs any node has
//! seen, so that a delivery replayed to another node is refused there too.

use std::time::Duration;

use super::error::ClusterError;
use super::model::ReplayStore;
use super::store::ClusterStore;

impl ClusterStore {
    /// Records `key` in replay store `store`: true the first time (or once an earlier
    /// record is older than `ttl`), false when it was already seen, whichever node saw it.
    pub async fn seen_once(
        &self,
        store: ReplayStore,
        key: &[u8],
        ttl: Duration,
    ) -> Result<bool, ClusterError> {
        let fresh = sqlx::query(
            "INSERT INTO svc_replay (store, key, seen_at) VALUES ($1, $2, now())
             ON CONFLICT (store, key) DO UPDATE SET seen_at = now()
             WHERE svc_replay.seen_at <= now() - make_interval(secs => $3)",
        )
        .bind(store.as_str())
        .bind(key)
        .bind(ttl.as_secs_f64())
        .execute(self.pool())
        .await?;
        Ok(fresh.rows_affected() == 1)
    }

    /// Whether `key` was recorded in `store` within `ttl`, whichever node recorded it.
    pub async fn is_seen(
        &self,
        store: ReplayStore,
        key: &[u8],
        ttl: Duration,
    ) -> Result<bool, ClusterError> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM svc_replay
                            WHERE store = $1 AND key = $2
                              AND seen_at > now() - make_interval(secs => $3))",
        )
        .bind(store.as_str())
        .bind(key)
        .bind(ttl.as_secs_f64())
        .fetch_one(self.pool())
        .await?)
    }

    /// Forgets `key` in `store` (the trigger it came with was refused after all).
    pub async fn forget_seen(&self, store: ReplayStore, key: &[u8]) -> Result<(), ClusterError> {
        sqlx::query("DELETE FROM svc_replay WHERE store = $1 AND key = $2")
            .bind(store.as_str())
            .bind(key)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
