//! The definition hash of a job: what each node records in `svc_job_defs`, so that a node
//! whose definition of a job differs from another live node's is told (in the log at
//! start and at each reload, by `--check`, and in the UI).
//!
//! The hash is SHA-256 over a canonical text built field by field (never a `Debug`
//! output, which any refactoring may change), so that two releases that parse the same
//! definition the same way agree. Left out, on purpose:
//! - secrets and keys (`secret`, sensitive `env` values and header values, tokens in
//!   URLs): a hash of a low-entropy secret in a shared table could be brute-forced, and
//!   rotating a secret on one node first is a normal rollout step, not drift;
//! - what has no effect on a run: the file a definition came from, `name` (the ID is
//!   the key), `description` and `log_retention` (logs are kept per node).

use std::fmt::Write as _;
use std::time::Duration;

use proto::redact::{REDACTED, is_sensitive_name, redact_header, redact_url};
use sha2::{Digest, Sha256};

use crate::config::{HttpJobConfig, JobConfig, OnBusy, PingUrl};
use crate::time::schedule::Timer;

/// The first line of every canonical text. Changing what is hashed changes this line,
/// so that a node of another release is seen to hash differently rather than to hold
/// another definition by accident.
const FORMAT: &str = "svc-definition 1";

/// The canonical text, one `key value` line per field; values are JSON strings, so a
/// value holding a newline or a quote cannot be taken for another field.
struct Canonical(String);

impl Canonical {
    fn new(kind: &str) -> Canonical {
        let mut text = String::with_capacity(512);
        text.push_str(FORMAT);
        text.push('\n');
        let mut canonical = Canonical(text);
        canonical.field("kind", kind);
        canonical
    }

    fn field(&mut self, key: &str, value: &str) {
        // Serialising a `&str` cannot fail; the fallback keeps the text unambiguous anyway.
        let quoted = serde_json::to_string(value).unwrap_or_else(|_| format!("{value:?}"));
        let _ = writeln!(self.0, "{key} {quoted}");
    }

    fn list<S: AsRef<str>>(&mut self, key: &str, values: &[S]) {
        let _ = writeln!(self.0, "{key}# {}", values.len());
        for value in values {
            self.field(key, value.as_ref());
        }
    }

    fn option(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(value) => self.field(key, value),
            None => {
                let _ = writeln!(self.0, "{key} -");
            }
        }
    }

    fn duration(&mut self, key: &str, value: Duration) {
        self.field(key, &duration_text(value));
    }

    fn timer(&mut self, timer: Option<&Timer>) {
        match timer {
            None => self.option("timer", None),
            Some(Timer::Interval(every)) => self.field("interval", &duration_text(*every)),
            Some(Timer::Schedule(schedule, zone)) => {
                // The schedule's canonical form parses back to the same value.
                self.field("schedule", &schedule.to_string());
                self.field("zone", zone.name());
            }
        }
    }

    fn ping_url(&mut self, url: Option<&PingUrl>) {
        self.option("ping_url", url.map(PingUrl::redacted).as_deref());
    }

    fn finish(self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

/// A duration exactly, in seconds and nanoseconds.
fn duration_text(value: Duration) -> String {
    format!("{}.{:09}", value.as_secs(), value.subsec_nanos())
}

fn on_busy_text(on_busy: OnBusy) -> &'static str {
    match on_busy {
        OnBusy::Queue => "queue",
        OnBusy::Skip => "skip",
        OnBusy::Replace => "replace",
    }
}

/// `NAME=VALUE`, the value hidden when the name looks like a secret's.
fn env_text((name, value): &(String, String)) -> String {
    if is_sensitive_name(name) {
        format!("{name}={REDACTED}")
    } else {
        format!("{name}={value}")
    }
}

fn job_text(job: &JobConfig) -> Canonical {
    let mut c = Canonical::new("job");
    // When it runs.
    c.timer(job.timer.as_ref());
    c.option("catch_up", job.catch_up.map(duration_text).as_deref());
    c.duration("random_delay", job.random_delay);
    c.field("retry", &job.retry.to_string());
    c.duration("retry_delay", job.retry_delay);
    // How triggers are taken (the secrets they are checked with are left out).
    c.option("path", job.path.as_deref());
    c.field("auth_kind", job.auth_kind_name);
    c.field("header_sign", &job.header_sign);
    c.field("public_key", &job.public_key);
    c.list("filter_event", &job.filter_event);
    let refs: Vec<&str> = job.filter_ref.iter().map(glob::Pattern::as_str).collect();
    c.list("filter_ref", &refs);
    c.field("on_busy", on_busy_text(job.on_busy));
    c.list("on_success", &job.on_success);
    c.list("on_failure", &job.on_failure);
    // What it runs, as whom, within which limits.
    c.list("command", &job.commands);
    c.option("timeout", job.timeout.map(duration_text).as_deref());
    c.option("user", job.user.as_deref());
    c.option("group", job.group.as_deref());
    c.option(
        "dir_work",
        job.dir_work
            .as_ref()
            .map(|dir| dir.to_string_lossy())
            .as_deref(),
    );
    let env: Vec<String> = job.env.iter().map(env_text).collect();
    c.list("env", &env);
    c.field("capabilities", &format!("{:#x}", job.capabilities));
    let limit = |value: Option<u64>| value.map(|v| v.to_string());
    c.option("limit_nproc", limit(job.limits.nproc).as_deref());
    c.option("limit_nofile", limit(job.limits.nofile).as_deref());
    c.option("limit_as", limit(job.limits.address_space).as_deref());
    c.option("limit_memory", limit(job.limits.memory).as_deref());
    // Keys newer than the hash's form count only when set, so that a job without them
    // keeps its hash across an upgrade of part of a cluster.
    for (key, value) in [
        ("limit_pids", job.limits.pids),
        ("cpu_weight", job.limits.cpu_weight),
    ] {
        if let Some(value) = value {
            c.field(key, &value.to_string());
        }
    }
    let write_paths: Vec<String> = job
        .write_paths
        .iter()
        .map(|path| path.to_string_lossy().into_owned())
        .collect();
    c.list("write_paths", &write_paths);
    c.field("sandbox", if job.sandbox { "true" } else { "false" });
    // Whom its ends are told.
    c.list("notif_on_success", &job.notif_on_success);
    c.list("notif_on_failed", &job.notif_on_failed);
    c.ping_url(job.ping_url.as_ref());
    c
}

fn http_job_text(job: &HttpJobConfig) -> Canonical {
    let mut c = Canonical::new("job_http");
    c.timer(job.timer.as_ref());
    c.field("http_method", job.http_method.as_str());
    c.field("http_url", &redact_url(&job.http_url));
    c.field("http_request_type", job.http_request_type.as_str());
    let headers: Vec<String> = job
        .http_headers
        .iter()
        .map(|(name, value)| redact_header(name, value))
        .collect();
    c.list("http_header", &headers);
    c.duration("http_timeout", job.http_timeout);
    c.field(
        "http_insecure",
        if job.http_insecure { "true" } else { "false" },
    );
    c.field(
        "http_follow_redirects",
        if job.http_follow_redirects {
            "true"
        } else {
            "false"
        },
    );
    // Whether the call is signed, and in which header; never with what.
    c.field(
        "signed",
        if job.secret.is_some() {
            "true"
        } else {
            "false"
        },
    );
    c.field("header_sign", &job.header_sign);
    c.option("user", job.user.as_deref());
    c.option("group", job.group.as_deref());
    c.list("notif_on_success", &job.notif_on_success);
    c.list("notif_on_failed", &job.notif_on_failed);
    c.ping_url(job.ping_url.as_ref());
    c
}

/// The definition hash of a Job: 64 hex digits.
pub fn job_hash(job: &JobConfig) -> String {
    job_text(job).finish()
}

/// The definition hash of a JobHttp: 64 hex digits.
pub fn http_job_hash(job: &HttpJobConfig) -> String {
    http_job_text(job).finish()
}

#[cfg(test)]
#[path = "defhash_tests.rs"]
mod tests;
