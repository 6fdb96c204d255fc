//! Process-wide metrics, rendered in the Prometheus text format at `/svc/api/metrics`.
//!
//! PLACEHOLDER: the recording functions are wired into the engine and the HTTP layer;
//! the implementation is being written (issue 3, item 8).

use std::time::Duration;

/// A finished run of a Job (`kind` = `job`) or JobHttp (`job_http`).
pub fn run_finished(_kind: &str, _job_id: &str, _success: bool, _duration: Duration) {}

/// Number of runs waiting (queued triggers plus runs waiting for a permit) changed.
pub fn set_queue_length(_waiting: usize) {}

/// A webhook was refused; `reason` is a short fixed word such as `signature`.
pub fn webhook_rejected(_reason: &'static str) {}

/// An HTTP request was answered.
pub fn http_request(_route: &str, _status: u16) {}

/// The text exposition of every metric.
pub fn render() -> String {
    String::new()
}
