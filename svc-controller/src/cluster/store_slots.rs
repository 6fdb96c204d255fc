//! [`ClusterStore`]'s part on timer slots and wake-ups: slots offered in batches (one
//! transaction for all the slots a node offers at one instant), the live nodes as they
//! beat (which the owner of each slot is chosen among, `ownership.rs`), and each node's
//! own wake-up channel, so that a trigger wakes one node rather than all.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::Row as _;

use super::error::ClusterError;
use super::model::{JobKey, NewTrigger, SlotClaim};
use super::ownership::{LiveNode, NodeView};
use super::store::ClusterStore;

/// The `LISTEN/NOTIFY` channel on which node `node` alone is woken to claim
/// ([`ClusterStore::enqueue_waking`]): a name of fixed length (a channel name is an
/// identifier, at most 63 bytes), from a hash of the node's name.
pub fn wake_channel(node: &str) -> String {
    let job = JobKey::new(super::model::JobKind::Job, "");
    format!("svc_wake_{:016x}", super::ownership::score(&job, node))
}

/// A timer slot offered to the cluster: `slot` of `job`, and the trigger its run gets
/// when the offer claims it.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotOffer {
    pub job: JobKey,
    pub slot: DateTime<Utc>,
    pub trigger: NewTrigger,
}

impl ClusterStore {
    /// Offers timer slot `slot` of `job`: the node whose insert of the slot succeeds runs
    /// it (the primary key makes that one node), every other gets [`SlotClaim::Taken`].
    /// In the same transaction the winner queues the run, unless the job is paused, or
    /// running or with a run queued (a tick while busy is skipped, as in single-node mode),
    /// and records which (`svc_slots.outcome`). One offer of
    /// [`claim_slots`](Self::claim_slots).
    pub async fn claim_slot(
        &self,
        job: &JobKey,
        slot: DateTime<Utc>,
        trigger: &NewTrigger,
    ) -> Result<SlotClaim, ClusterError> {
        let offer = SlotOffer {
            job: job.clone(),
            slot,
            trigger: trigger.clone(),
        };
        let claims = self.claim_slots(std::slice::from_ref(&offer)).await?;
        Ok(claims.first().copied().unwrap_or(SlotClaim::Taken))
    }

    /// [`claim_slot`](Self::claim_slot) for many slots in one transaction of five
    /// statements (the last records each won slot's outcome), whatever their number:
    /// what each offer became, in the order given.
    /// Of two won slots of one job the earlier queues its run (the other finds it queued:
    /// busy); an offer given twice is [`SlotClaim::Taken`] the second time.
    pub async fn claim_slots(&self, offers: &[SlotOffer]) -> Result<Vec<SlotClaim>, ClusterError> {
        if offers.is_empty() {
            return Ok(Vec::new());
        }
        let mut order: Vec<usize> = (0..offers.len()).collect();
        order.sort_by_key(|&n| offers[n].slot);
        let col = |f: fn(&SlotOffer) -> &str| order.iter().map(|&n| f(&offers[n])).collect();
        let kinds: Vec<&str> = col(|o| o.job.kind.as_str());
        let ids: Vec<&str> = col(|o| o.job.id.as_str());
        let nodes: Vec<&str> = col(|o| o.trigger.accepted_by.as_str());
        let slots: Vec<DateTime<Utc>> = order.iter().map(|&n| offers[n].slot).collect();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO svc_jobs (kind, id)
             SELECT DISTINCT kind, id FROM UNNEST($1::text[], $2::text[]) AS m(kind, id)
             ON CONFLICT DO NOTHING",
        )
        .bind(&kinds)
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
        let won: HashSet<(String, String, DateTime<Utc>)> = sqlx::query_as(
            "INSERT INTO svc_slots (kind, id, slot, node, claimed_at)
             SELECT kind, id, slot, node, now()
             FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[])
                  AS m(kind, id, slot, node)
             ON CONFLICT (kind, id, slot) DO NOTHING
             RETURNING kind, id, slot",
        )
        .bind(&kinds)
        .bind(&ids)
        .bind(&slots)
        .bind(&nodes)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
        // Each won slot once, the first offer of it (in the order of the slots).
        let mut seen = HashSet::new();
        let winners: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&n| {
                let o = &offers[n];
                let key = (o.job.kind.as_str().to_string(), o.job.id.clone(), o.slot);
                won.contains(&key) && seen.insert(key)
            })
            .collect();
        let paused = paused_of(&mut tx, offers, &winners).await?;
        let idle: Vec<usize> = winners
            .iter()
            .copied()
            .filter(|&n| !paused.contains(&offers[n].job))
            .collect();
        let queued = queue_runs(&mut tx, offers, &idle).await?;
        let claims = claims_of(offers, &winners, &paused, &idle, queued);
        record_outcomes(&mut tx, offers, &winners, &claims).await?;
        tx.commit().await?;
        Ok(claims)
    }

    /// The live nodes (a heartbeat within the lease), with their heartbeats and the
    /// digests of their definitions: what each node chooses the owners of slots by.
    pub async fn live_nodes(&self) -> Result<NodeView, ClusterError> {
        let rows = sqlx::query(
            "SELECT name, defs_digest, heartbeat_at,
                    EXTRACT(EPOCH FROM now() - heartbeat_at)::float8 AS age
             FROM svc_nodes
             WHERE heartbeat_at > now() - make_interval(secs => $1)
             ORDER BY name",
        )
        .bind(self.lease_secs())
        .fetch_all(self.pool())
        .await?;
        let nodes = rows
            .iter()
            .map(|row| {
                Ok(LiveNode {
                    name: row.try_get("name")?,
                    defs_digest: row.try_get("defs_digest")?,
                    heartbeat_at: row.try_get("heartbeat_at")?,
                    age_secs: row.try_get::<f64, _>("age")?.max(0.0),
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(NodeView { nodes })
    }
}

/// What each offer of [`ClusterStore::claim_slots`] became: taken by another node, or,
/// for the `winners`, paused, queued (`queued`: the run of each job that went in) or busy.
fn claims_of(
    offers: &[SlotOffer],
    winners: &[usize],
    paused: &HashSet<JobKey>,
    idle: &[usize],
    mut queued: HashMap<JobKey, i64>,
) -> Vec<SlotClaim> {
    let mut claims = vec![SlotClaim::Taken; offers.len()];
    for &n in winners {
        claims[n] = if paused.contains(&offers[n].job) {
            SlotClaim::SkippedPaused
        } else {
            SlotClaim::SkippedBusy
        };
    }
    for &n in idle {
        // The earliest slot of the job took the queue (the rows went in that order).
        if let Some(run_id) = queued.remove(&offers[n].job) {
            claims[n] = SlotClaim::Enqueued { run_id };
        }
    }
    claims
}

/// Records in the claim's transaction what became of each won slot, `offers[winners]`
/// (`svc_slots.outcome`, see [`SlotClaim::outcome`]), in one statement.
async fn record_outcomes(
    tx: &mut sqlx::PgConnection,
    offers: &[SlotOffer],
    winners: &[usize],
    claims: &[SlotClaim],
) -> Result<(), ClusterError> {
    let (mut kinds, mut ids, mut slots, mut outcomes) = (vec![], vec![], vec![], vec![]);
    for &n in winners {
        if let Some(outcome) = claims[n].outcome() {
            kinds.push(offers[n].job.kind.as_str());
            ids.push(offers[n].job.id.as_str());
            slots.push(offers[n].slot);
            outcomes.push(outcome);
        }
    }
    if outcomes.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE svc_slots s SET outcome = m.outcome
         FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[])
              AS m(kind, id, slot, outcome)
         WHERE s.kind = m.kind AND s.id = m.id AND s.slot = m.slot",
    )
    .bind(&kinds)
    .bind(&ids)
    .bind(&slots)
    .bind(&outcomes)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The jobs among `offers[winners]` that are paused, in one read.
async fn paused_of(
    tx: &mut sqlx::PgConnection,
    offers: &[SlotOffer],
    winners: &[usize],
) -> Result<HashSet<JobKey>, ClusterError> {
    if winners.is_empty() {
        return Ok(HashSet::new());
    }
    let kinds: Vec<&str> = winners
        .iter()
        .map(|&n| offers[n].job.kind.as_str())
        .collect();
    let ids: Vec<&str> = winners.iter().map(|&n| offers[n].job.id.as_str()).collect();
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT j.kind, j.id FROM svc_jobs j
         JOIN UNNEST($1::text[], $2::text[]) AS m(kind, id) ON m.kind = j.kind AND m.id = j.id
         WHERE j.paused",
    )
    .bind(&kinds)
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?;
    let mut paused = HashSet::new();
    for (kind, id) in rows {
        paused.insert(JobKey::new(super::store_rows::parse_kind(&kind)?, id));
    }
    Ok(paused)
}

/// Queues the runs of `offers[idle]` (in that order) whose job has no run running and
/// none queued: the run ID of each job that got one.
async fn queue_runs(
    tx: &mut sqlx::PgConnection,
    offers: &[SlotOffer],
    idle: &[usize],
) -> Result<HashMap<JobKey, i64>, ClusterError> {
    if idle.is_empty() {
        return Ok(HashMap::new());
    }
    let kinds: Vec<&str> = idle.iter().map(|&n| offers[n].job.kind.as_str()).collect();
    let ids: Vec<&str> = idle.iter().map(|&n| offers[n].job.id.as_str()).collect();
    let payloads: Vec<serde_json::Value> = idle
        .iter()
        .map(|&n| offers[n].trigger.payload.clone())
        .collect();
    let attempts: Vec<i32> = idle.iter().map(|&n| offers[n].trigger.attempt).collect();
    let nodes: Vec<&str> = idle
        .iter()
        .map(|&n| offers[n].trigger.accepted_by.as_str())
        .collect();
    let rows = sqlx::query(
        "INSERT INTO svc_runs (kind, id, state, trigger, attempt, accepted_by, accepted_at)
         SELECT m.kind, m.id, 'queued', m.trigger, m.attempt, m.node, now()
         FROM UNNEST($1::text[], $2::text[], $3::jsonb[], $4::int4[], $5::text[])
              WITH ORDINALITY AS m(kind, id, trigger, attempt, node, n)
         WHERE NOT EXISTS (SELECT 1 FROM svc_runs r
                           WHERE r.kind = m.kind AND r.id = m.id AND r.state = 'running')
         ORDER BY m.n
         ON CONFLICT (kind, id) WHERE state = 'queued' DO NOTHING
         RETURNING run_id, kind, id",
    )
    .bind(&kinds)
    .bind(&ids)
    .bind(&payloads)
    .bind(&attempts)
    .bind(&nodes)
    .fetch_all(&mut *tx)
    .await?;
    let mut queued = HashMap::new();
    for row in &rows {
        queued.insert(super::store_rows::job_key(row)?, row.try_get("run_id")?);
    }
    Ok(queued)
}
