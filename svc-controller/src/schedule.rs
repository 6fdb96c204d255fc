//! Timers: fixed intervals and the calendar schedule grammar, evaluated in UTC.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// When a job runs by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timer {
    /// Every `interval` (at least one second).
    Interval(Duration),
    /// On the calendar.
    Schedule(Schedule),
}

/// A calendar schedule (see `Schedule::from_str` for the grammar).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    Minutely,
}

/// A schedule expression that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

impl FromStr for Schedule {
    type Err = ScheduleError;
    fn from_str(_text: &str) -> Result<Self, ScheduleError> {
        Err(ScheduleError("not implemented".into()))
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("minutely")
    }
}

impl Schedule {
    /// The first time of the schedule strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> DateTime<Utc> {
        after
    }
}

impl Timer {
    /// When the first run is due after a start at `now`, given the last run.
    pub fn first_due(&self, now: DateTime<Utc>, _last_run: Option<DateTime<Utc>>) -> DateTime<Utc> {
        now
    }

    /// The due time following `previous_due`, strictly after `now`.
    pub fn next_due(&self, _previous_due: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        now
    }
}
