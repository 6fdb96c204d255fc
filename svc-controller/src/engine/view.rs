//! JSON views of jobs and the Environment, as the API serves them.
//!
//! These are wire types, built from the registry. They never carry a secret, a password
//! or the value of a sensitive header: see [`proto::redact`].

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::{Def, Entry, Kind, Registry};
use crate::config::MainConfig;
use crate::logstore::{LogMeta, LogStatus};
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

fn status(kind: Kind, entry: &Entry) -> &'static str {
    let running = entry.run.as_ref().is_some_and(|run| run.counter.is_some());
    if entry.state.paused {
        "paused"
    } else if running || (kind == Kind::Http && entry.resumed) {
        "started"
    } else {
        entry.state.last_result.map_or("", |r| r.job_status())
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
fn logs<'a>(id: &'a str, entry: &'a Entry) -> Vec<LogView<'a>> {
    let running = entry
        .run
        .as_ref()
        .and_then(|run| run.counter)
        .map(|counter| LogMeta {
            counter,
            status: LogStatus::Started,
        });
    entry
        .logs
        .iter()
        .chain(running.as_ref())
        .map(|log: &LogMeta| LogView {
            job_id: id,
            name: entry.log_dir.file_name(log.counter, log.status),
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

fn common<'a>(kind: Kind, id: &'a str, entry: &'a Entry, shared: Shared<'a>) -> CommonView<'a> {
    let (interval, schedule) = timer_fields(shared.timer);
    CommonView {
        last_run: time(entry.state.last_run),
        next_run: time(entry.next_run),
        id,
        name: shared.name,
        description: shared.description,
        status: status(kind, entry),
        interval,
        schedule,
        logs: logs(id, entry),
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

fn entry_view<'a>(kind: Kind, id: &'a str, entry: &'a Entry) -> EntryView<'a> {
    match &entry.def {
        Def::Job(job) => EntryView::Job(JobView {
            common: common(
                kind,
                id,
                entry,
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
                kind,
                id,
                entry,
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

/// The view of one job.
pub(super) fn entry_json(kind: Kind, id: &str, entry: &Entry) -> serde_json::Value {
    serde_json::to_value(entry_view(kind, id, entry)).unwrap_or_else(|err| {
        tracing::error!(job = id, error = %err, "cannot serialise a job");
        serde_json::Value::Null
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

fn collect(kind: Kind, map: &BTreeMap<String, Entry>) -> BTreeMap<&str, EntryView<'_>> {
    map.iter()
        .filter(|(_, e)| !e.retired)
        .map(|(id, e)| (e.def.name(), entry_view(kind, id, e)))
        .collect()
}

fn environment_view<'a>(main: &'a MainConfig, registry: &'a Registry) -> EnvironmentView<'a> {
    EnvironmentView {
        jobs: collect(Kind::Job, &registry.jobs),
        http_jobs: collect(Kind::Http, &registry.http),
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
pub(super) fn environment_answer(main: &MainConfig, registry: &Registry) -> Vec<u8> {
    #[derive(Serialize)]
    struct Answer<'a> {
        code: u16,
        message: &'static str,
        data: EnvironmentView<'a>,
    }
    serde_json::to_vec(&Answer {
        code: 200,
        message: "",
        data: environment_view(main, registry),
    })
    .unwrap_or_else(|err| {
        tracing::error!(error = %err, "cannot serialise the environment");
        br#"{"code":500,"message":"internal error","data":null}"#.to_vec()
    })
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
