//! The wall clock the engine schedules by: what time it is, and waiting for a time.
//!
//! Timers and the run records read the time through [`Clock`] rather than from the
//! system, so that the engine's tests can drive time by hand: a test's clock moves only
//! when the test moves it, and no test has to wait for real time to pass.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

/// Wall time for scheduling decisions: due times, `next_run`, `last_run`.
pub trait Clock: Send + Sync {
    /// The wall time now.
    fn now(&self) -> DateTime<Utc>;

    /// Resolves once the wall time has reached `due` (at once if it already has). It
    /// must never resolve early, whatever the clock does meanwhile.
    fn sleep_until(&self, due: DateTime<Utc>) -> BoxFuture<'_, ()>;
}

/// The system's clock, which the service runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    /// Sleeps on the monotonic clock for the time left, then looks at the wall clock
    /// again: a wall clock stepped back meanwhile (NTP, an operator) would otherwise
    /// fire a timer early.
    fn sleep_until(&self, due: DateTime<Utc>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            loop {
                let Ok(left) = (due - Utc::now()).to_std() else {
                    return;
                };
                if left.is_zero() {
                    return;
                }
                tokio::time::sleep(left).await;
            }
        })
    }
}
