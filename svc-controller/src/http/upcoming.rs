//! The coming slots of the jobs with a schedule (`GET /svc/api/upcoming`), for the
//! dashboard's timeline of the next hours. The Environment gives each job its next run
//! and its interval, from which the page steps an interval job's runs itself; a
//! schedule's slots (cron, `daily`, ...) follow its zone's wall clock, which only the
//! schedule code knows, so they are listed here.
//!
//! Bounded: at most [`MAX_HOURS`] ahead, [`MAX_SLOTS`] slots per job and [`MAX_JOBS`]
//! jobs (by kind, then ID), each a few schedule searches; the jobs are copied out of the
//! registry under its lock and the slots computed after it is released.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use super::query::{number_up_to, params};
use super::{ApiError, AppState, ok};
use crate::engine::Kind;
use crate::engine::read::{JobStatus, RegistryRef};
use crate::time::schedule::Timer;
use crate::time::timezone::utc_text;

/// The furthest ahead a query may look, and what it looks at when it does not say.
pub const MAX_HOURS: u32 = 24;
/// Slots listed per job; a job with more in the window says `more`.
pub const MAX_SLOTS: usize = 48;
/// Jobs listed; with more, the answer says `truncated`.
pub const MAX_JOBS: usize = 1000;

/// A job with a schedule, copied out of the registry.
struct Scheduled {
    kind: Kind,
    id: String,
    timer: Timer,
    next_run: Option<DateTime<Utc>>,
}

/// Every job and JobHttp with a schedule (not an interval) that is not paused, by kind
/// then ID. Quick: runs with the registry locked.
fn scheduled(registry: RegistryRef<'_>) -> Vec<Scheduled> {
    let mut found: Vec<Scheduled> = [Kind::Job, Kind::Http]
        .into_iter()
        .flat_map(|kind| registry.jobs(kind))
        .filter(|job| job.status() != JobStatus::Paused)
        .filter_map(|job| {
            let timer = match job.def() {
                crate::engine::Def::Job(def) => def.timer.as_ref(),
                crate::engine::Def::Http(def) => def.timer.as_ref(),
            };
            let timer = timer.filter(|t| matches!(t, Timer::Schedule(..)))?;
            Some(Scheduled {
                kind: job.kind(),
                id: job.id().to_owned(),
                timer: timer.clone(),
                next_run: job.next_run(),
            })
        })
        .collect();
    found.sort_by(|a, b| (a.kind.as_str(), &a.id).cmp(&(b.kind.as_str(), &b.id)));
    found
}

/// The slots of `timer` from `first` up to `until` (both included), at most
/// [`MAX_SLOTS`]; and whether more lie in the window.
fn slots(timer: &Timer, first: DateTime<Utc>, until: DateTime<Utc>) -> (Vec<DateTime<Utc>>, bool) {
    let mut out = Vec::new();
    let mut due = first;
    while due <= until && due != DateTime::<Utc>::MAX_UTC {
        if out.len() == MAX_SLOTS {
            return (out, true);
        }
        out.push(due);
        due = timer.next_due(due, due);
    }
    (out, false)
}

#[derive(Serialize)]
struct JobSlots {
    kind: &'static str,
    id: String,
    /// RFC 3339, UTC, in order.
    slots: Vec<String>,
    more: bool,
}

#[derive(Serialize)]
struct Upcoming {
    from: String,
    until: String,
    jobs: Vec<JobSlots>,
    truncated: bool,
}

/// The answer for the jobs copied out, from `now` to `hours` later.
fn upcoming(jobs: Vec<Scheduled>, now: DateTime<Utc>, hours: u32) -> Upcoming {
    let until = now + TimeDelta::hours(i64::from(hours));
    let truncated = jobs.len() > MAX_JOBS;
    let jobs = jobs
        .into_iter()
        .take(MAX_JOBS)
        .map(|job| {
            // The timer's own next run while it runs; the schedule's next slot before it
            // started (or in cluster mode on a node that does not hold the timer).
            let first = job
                .next_run
                .filter(|next| *next > now)
                .unwrap_or_else(|| job.timer.next_due(now, now));
            let (found, more) = slots(&job.timer, first, until);
            JobSlots {
                kind: job.kind.as_str(),
                id: job.id,
                slots: found.into_iter().map(utc_text).collect(),
                more,
            }
        })
        .collect();
    Upcoming {
        from: utc_text(now),
        until: utc_text(until),
        jobs,
        truncated,
    }
}

/// `GET /svc/api/upcoming?hours=<1 to 24>`: see the module documentation.
pub(super) async fn upcoming_slots(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = params(query.unwrap_or_default().as_bytes());
    let hours = number_up_to(&pairs, "hours", MAX_HOURS, MAX_HOURS)?;
    let engine = state.engine.clone();
    let now = engine.now();
    let jobs = engine.with_all(scheduled);
    let answer = super::blocking(move || upcoming(jobs, now, hours)).await?;
    let data = serde_json::to_value(answer)
        .map_err(|err| ApiError::internal("cannot encode the upcoming slots", err))?;
    Ok(ok(data))
}
