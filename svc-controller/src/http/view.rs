//! JSON views of jobs and the Environment, as the API serves them, built from the
//! engine's read-only looks ([`crate::engine::read`]).
//!
//! These are wire types. They never carry a secret, a password or the value of a
//! sensitive header: see [`proto::redact`]. The Environment answer is built once per
//! change of the engine ([`EnvironmentCache`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::engine::read::{JobRef, JobStatus, RegistryRef};
use crate::engine::{Def, Engine, Kind};
use crate::schedule::Timer;

/// What a time that never happened looks like (Go's zero time, as upstream sends it).
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

// The one redaction rule, shared with the runner.
pub use proto::redact::{REDACTED, redact_header, redact_url};

fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(
        || ZERO_TIME.to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    )
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Serialize)]
struct LogView<'a> {
    job_id: &'a str,
    name: String,
    status: &'static str,
    counter: u64,
}

/// Members every job view has, Job or JobHttp.
#[derive(Serialize)]
struct CommonView<'a> {
    last_run: String,
    next_run: String,
    id: &'a str,
    name: &'a str,
    description: &'a str,
    status: &'static str,
    interval: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule: Option<String>,
    logs: Vec<LogView<'a>>,
    log_retention: usize,
}

#[derive(Serialize)]
struct JobView<'a> {
    #[serde(flatten)]
    common: CommonView<'a>,
    path: &'a str,
    auth_kind: &'static str,
    header_sign: &'a str,
    commands: &'a [String],
    timeout: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit_nproc: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit_nofile: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit_as: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit_memory: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    write_paths: Vec<String>,
    /// Shown only when off.
    #[serde(skip_serializing_if = "is_true")]
    sandbox: bool,
}

fn is_true(value: &bool) -> bool {
    *value
}

#[derive(Serialize)]
struct HttpJobView<'a> {
    #[serde(flatten)]
    common: CommonView<'a>,
    http_method: &'static str,
    http_url: String,
    http_request_type: &'static str,
    http_headers: Vec<String>,
    http_timeout: u64,
    http_insecure: bool,
}

/// The `status` member of a job's view.
fn status(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Paused => "paused",
        JobStatus::Started => "started",
        JobStatus::Finished(result) => result.job_status(),
        JobStatus::Never => "",
    }
}

fn timer_fields(timer: Option<&Timer>) -> (u64, Option<String>) {
    match timer {
        Some(Timer::Interval(every)) => (nanos(*every), None),
        Some(Timer::Schedule(schedule)) => (0, Some(schedule.to_string())),
        None => (0, None),
    }
}

/// The job's logs, oldest first; a run going on is listed last with status `started`.
fn logs<'a>(job: JobRef<'a>) -> Vec<LogView<'a>> {
    job.logs()
        .map(|log| LogView {
            job_id: job.id(),
            name: log.name,
            status: log.status.as_str(),
            counter: log.counter,
        })
        .collect()
}

/// The members shared by both kinds of job.
struct Shared<'a> {
    name: &'a str,
    description: &'a str,
    timer: Option<&'a Timer>,
    log_retention: usize,
}

fn common<'a>(job: JobRef<'a>, shared: Shared<'a>) -> CommonView<'a> {
    let (interval, schedule) = timer_fields(shared.timer);
    CommonView {
        last_run: time(job.last_run()),
        next_run: time(job.next_run()),
        id: job.id(),
        name: shared.name,
        description: shared.description,
        status: status(job.status()),
        interval,
        schedule,
        logs: logs(job),
        log_retention: shared.log_retention,
    }
}

/// A job's view, Job or JobHttp, serialised as its own members.
#[derive(Serialize)]
#[serde(untagged)]
enum EntryView<'a> {
    Job(JobView<'a>),
    Http(HttpJobView<'a>),
}

fn entry_view(look: JobRef<'_>) -> EntryView<'_> {
    match look.def() {
        Def::Job(job) => EntryView::Job(JobView {
            common: common(
                look,
                Shared {
                    name: &job.name,
                    description: &job.description,
                    timer: job.timer.as_ref(),
                    log_retention: job.log_retention,
                },
            ),
            path: job.path.as_deref().unwrap_or_default(),
            auth_kind: job.auth_kind.as_str(),
            header_sign: &job.header_sign,
            commands: &job.commands,
            timeout: job.timeout.map_or(0, nanos),
            limit_nproc: job.limits.nproc,
            limit_nofile: job.limits.nofile,
            limit_as: job.limits.address_space,
            limit_memory: job.limits.data,
            write_paths: job
                .write_paths
                .iter()
                .map(|path| path.display().to_string())
                .collect(),
            sandbox: job.sandbox,
        }),
        Def::Http(job) => EntryView::Http(HttpJobView {
            common: common(
                look,
                Shared {
                    name: &job.name,
                    description: &job.description,
                    timer: Some(&job.timer),
                    log_retention: job.log_retention,
                },
            ),
            http_method: job.http_method.as_str(),
            http_url: redact_url(&job.http_url),
            http_request_type: job.http_request_type.as_str(),
            http_headers: job
                .http_headers
                .iter()
                .map(|(k, v)| redact_header(k, v))
                .collect(),
            http_timeout: nanos(job.http_timeout),
            http_insecure: job.http_insecure,
        }),
    }
}

/// The view of one job as JSON; `None` when there is no such job.
pub fn job_json(engine: &Engine, kind: Kind, id: &str) -> Option<serde_json::Value> {
    engine.with_job(kind, id, |job| {
        serde_json::to_value(entry_view(job)).unwrap_or_else(|err| {
            tracing::error!(job = id, error = %err, "cannot serialise a job");
            serde_json::Value::Null
        })
    })
}

#[derive(Serialize)]
struct EnvironmentView<'a> {
    jobs: BTreeMap<&'a str, EntryView<'a>>,
    http_jobs: BTreeMap<&'a str, EntryView<'a>>,
    name: &'a str,
    version: &'static str,
    listen_address: &'a str,
    dir_base: String,
    dir_public: String,
    http_timeout: u64,
    max_job_running: usize,
    is_development: bool,
}

fn collect(jobs: RegistryRef<'_>, kind: Kind) -> BTreeMap<&str, EntryView<'_>> {
    jobs.jobs(kind)
        .map(|job| (job.def().name(), entry_view(job)))
        .collect()
}

fn environment_view(jobs: RegistryRef<'_>) -> EnvironmentView<'_> {
    let main = jobs.main();
    EnvironmentView {
        jobs: collect(jobs, Kind::Job),
        http_jobs: collect(jobs, Kind::Http),
        name: &main.name,
        version: env!("CARGO_PKG_VERSION"),
        listen_address: &main.listen_address,
        dir_base: main.dir_base.display().to_string(),
        dir_public: main
            .dir_public
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        http_timeout: nanos(main.http_timeout),
        max_job_running: main.max_job_running,
        is_development: main.is_development,
    }
}

/// The whole 200 answer of the Environment endpoint, wrapper included, as JSON bytes,
/// serialised straight from the views.
fn environment_json(jobs: RegistryRef<'_>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Answer<'a> {
        code: u16,
        message: &'static str,
        data: EnvironmentView<'a>,
    }
    serde_json::to_vec(&Answer {
        code: 200,
        message: "",
        data: environment_view(jobs),
    })
    .unwrap_or_else(|err| {
        tracing::error!(error = %err, "cannot serialise the environment");
        br#"{"code":500,"message":"internal error","data":null}"#.to_vec()
    })
}

/// gzip at the fastest level: the answer is rebuilt at every change, so speed beats the
/// last few percent of size.
fn gzip_fast(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 8),
        flate2::Compression::fast(),
    );
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}

/// The Environment answer, ready to send: plain JSON and its gzip.
#[derive(Debug)]
pub struct EnvironmentAnswer {
    pub json: Bytes,
    pub gzip: Bytes,
}

/// The Environment answer of the engine's current generation, built once per change
/// and shared by every request until the next, so polling dashboards cost one copy of
/// the bytes each.
#[derive(Debug, Default)]
pub struct EnvironmentCache {
    built: Mutex<Option<(u64, Arc<EnvironmentAnswer>)>>,
}

impl EnvironmentCache {
    /// The answer for `engine` as it is now.
    pub fn answer(&self, engine: &Engine) -> Arc<EnvironmentAnswer> {
        // Read before building: a change made meanwhile bumps the generation after it,
        // so the next request rebuilds; a stale answer is never kept past a change.
        let generation = engine.generation();
        if let Ok(built) = self.built.lock()
            && let Some((cached, answer)) = built.as_ref()
            && *cached == generation
        {
            return answer.clone();
        }
        let json = engine.with_all(environment_json);
        let gzip = gzip_fast(&json);
        let answer = Arc::new(EnvironmentAnswer {
            json: Bytes::from(json),
            gzip: Bytes::from(gzip),
        });
        if let Ok(mut built) = self.built.lock() {
            *built = Some((generation, answer.clone()));
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_headers_are_redacted() {
        for name in [
            "Authorization",
            "Cookie",
            "X-Api-Key",
            "X-Auth-Token",
            "Proxy-Authorization",
            "X-Secret",
        ] {
            assert_eq!(
                redact_header(name, "hunter2"),
                format!("{name}: {REDACTED}")
            );
        }
        assert_eq!(redact_header("Accept", "text/plain"), "Accept: text/plain");
    }

    #[test]
    fn urls_lose_passwords_and_sensitive_parameters() {
        assert_eq!(
            redact_url("https://bob:hunter2@example.org/x?token=abc&page=2"),
            format!("https://bob:{REDACTED}@example.org/x?token={REDACTED}&page=2")
        );
        assert_eq!(
            redact_url("http://127.0.0.1:1/svc"),
            "http://127.0.0.1:1/svc"
        );
    }
}
