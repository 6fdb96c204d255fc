//! Between the cluster's tables and its domain types: rows read into [`JobKey`]s and
//! runs, job definitions written as the columns `UNNEST` takes (and their digest).

use std::collections::BTreeMap;

use sqlx::Row as _;
use sqlx::postgres::PgRow;

use super::error::ClusterError;
use super::model::{ClaimedRun, JobDef, JobKey, JobKind, ReapedRun};

/// `defs` as the columns `UNNEST` takes (kinds, IDs, hashes), one row per job whatever
/// the caller gives: an upsert that meets the same key twice in one statement is refused
/// by PostgreSQL, and a comparison would count a job twice.
pub(super) fn def_columns(defs: &[JobDef]) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
    let unique: BTreeMap<&JobKey, &str> = defs
        .iter()
        .map(|def| (&def.job, def.hash.as_str()))
        .collect();
    let kinds = unique.keys().map(|job| job.kind.as_str()).collect();
    let ids = unique.keys().map(|job| job.id.as_str()).collect();
    let hashes = unique.values().copied().collect();
    (kinds, ids, hashes)
}

pub(super) fn parse_kind(kind: &str) -> Result<JobKind, ClusterError> {
    JobKind::parse(kind).ok_or_else(|| ClusterError::BadData(format!("unknown job kind {kind:?}")))
}

pub(super) fn job_key(row: &PgRow) -> Result<JobKey, ClusterError> {
    let kind: String = row.try_get("kind")?;
    Ok(JobKey {
        kind: parse_kind(&kind)?,
        id: row.try_get("id")?,
    })
}

pub(super) fn claimed_run(row: &PgRow) -> Result<ClaimedRun, ClusterError> {
    Ok(ClaimedRun {
        run_id: row.try_get("run_id")?,
        job: job_key(row)?,
        counter: row.try_get("counter")?,
        attempt: row.try_get("attempt")?,
        payload: row.try_get("trigger")?,
        accepted_by: row.try_get("accepted_by")?,
        accepted_at: row.try_get("accepted_at")?,
        started_at: row.try_get("started_at")?,
        lease_until: row.try_get("lease_until")?,
    })
}

pub(super) fn reaped_run(row: &PgRow) -> Result<ReapedRun, ClusterError> {
    Ok(ReapedRun {
        run_id: row.try_get("run_id")?,
        job: job_key(row)?,
        counter: row.try_get("counter")?,
        node: row.try_get("node")?,
    })
}

/// A digest of a node's job definitions, as [`def_columns`] lists them (one row per job,
/// in order): the same on two nodes exactly when they define the same jobs alike.
pub(super) fn defs_digest(kinds: &[&str], ids: &[&str], hashes: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for ((kind, id), hash) in kinds.iter().zip(ids).zip(hashes) {
        for part in [kind, id, hash] {
            digest.update(part.as_bytes());
            digest.update([0]);
        }
    }
    hex::encode(digest.finalize())
}
