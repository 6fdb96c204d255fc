//! Proof that nothing started when nothing may, without a fixed wait: the service's own
//! count of timer ticks it skipped (`svc_timer_ticks_skipped_total`), and a job's state
//! file at rest (no run going on, no trigger queued).

use std::time::Duration;

use crate::{TestService, wait_for, wait_until};

/// `svc_timer_ticks_skipped_total{reason="<reason>"}` now (0 before the first).
pub async fn ticks_skipped(svc: &TestService, reason: &str) -> u64 {
    let sample = format!("svc_timer_ticks_skipped_total{{reason=\"{reason}\"}} ");
    let text = svc.get("/svc/api/metrics").await.raw;
    text.lines()
        .find_map(|line| line.strip_prefix(&sample))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |count| count as u64)
}

/// Waits (at most `limit`) until `more` ticks have been skipped for `reason` from now:
/// the timers ticked and started nothing.
pub async fn wait_ticks_skipped(svc: &TestService, reason: &str, more: u64, limit: Duration) {
    let from = ticks_skipped(svc, reason).await;
    let what = format!("{more} more timer ticks skipped ({reason})");
    wait_for(limit, &what, async || {
        (ticks_skipped(svc, reason).await >= from + more).then_some(())
    })
    .await;
}

/// Waits (at most `limit`) until job `id`'s state file shows it at rest after `counter`
/// runs: no run going on and no trigger queued. A job without a timer then starts
/// nothing more by itself.
pub async fn wait_at_rest(svc: &TestService, id: &str, counter: u64, limit: Duration) {
    let what = format!("job {id} at rest after run {counter}");
    wait_until(limit, &what, async || {
        svc.state_file(id).is_some_and(|state| {
            state.get("counter").map(String::as_str) == Some(counter.to_string().as_str())
                && state.get("status").map(String::as_str) != Some("started")
                && !state.contains_key("queued")
        })
    })
    .await;
}
