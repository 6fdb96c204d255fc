//! Layer `time`: durations as the configuration writes them, time zones, and the
//! schedules of timers. Uses [`crate::util`] only.

pub mod cron;
pub mod duration;
pub mod schedule;
pub mod timezone;
