//! What `--check` says of replay protection: the jobs whose deliveries may repeat, and
//! the JobHttp actions that cannot be one-time. Notes, not warnings: both are choices an
//! operator may make on purpose.

use crate::config::{AuthKind, Config};

/// One line per job and setting that accepts a repeated signed request.
pub(super) fn replay_notes(config: &Config) -> Vec<String> {
    let mut notes: Vec<String> = config
        .jobs
        .iter()
        .filter(|job| {
            job.path.is_some() && job.auth_kind == AuthKind::HmacSha256 && !job.one_time_deliveries
        })
        .map(|job| {
            format!(
                "job {}: hmac-sha256 deliveries may repeat (the same body and signature run \
                 again); one_time_deliveries = true refuses repeats",
                job.id
            )
        })
        .collect();
    if !config.http_jobs.is_empty() && !config.main.require_epoch {
        notes.push(
            "job_http pause and resume are accepted without _svc_epoch (require_epoch = \
             false): such requests cannot be one-time"
                .to_string(),
        );
    }
    notes
}
