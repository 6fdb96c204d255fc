//! Bounded polling. Tests never sleep for a fixed time to let something happen; they poll a
//! condition every [`POLL`] until it holds, and fail with a description after a limit.

use std::time::{Duration, Instant};

/// Time between two evaluations of a condition.
pub const POLL: Duration = Duration::from_millis(15);

/// Polls `cond` every [`POLL`] until it returns true; panics naming `what` when `timeout`
/// passes first. The condition is evaluated one last time after the deadline, so a slow
/// poll cannot make a met condition fail.
///
/// ```
/// # use std::time::Duration;
/// # use svc_tests::wait_until;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut polls = 0;
/// wait_until(Duration::from_secs(10), "the third poll", async || {
///     polls += 1;
///     polls == 3
/// })
/// .await;
/// assert_eq!(polls, 3);
/// # }
/// ```
pub async fn wait_until(timeout: Duration, what: &str, mut cond: impl AsyncFnMut() -> bool) {
    wait_for(timeout, what, async || cond().await.then_some(())).await
}

/// Polls `probe` every [`POLL`] until it returns `Some`, and returns that value; panics
/// naming `what` when `timeout` passes first.
pub async fn wait_for<T>(
    timeout: Duration,
    what: &str,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        let expired = start.elapsed() >= timeout;
        if let Some(value) = probe().await {
            return value;
        }
        if expired {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}
