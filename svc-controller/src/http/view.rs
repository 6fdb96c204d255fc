//! JSON views of jobs and the Environment, as the API serves them, built from the
//! engine's read-only looks ([`crate::engine::read`]).
//!
//! These are wire types. They never carry a secret, a password or the value of a
//! sensitive header: see [`proto::redact`]. A view is built from a [`JobSnapshot`],
//! copied out of the registry while it is locked (definitions are shared, not copied),
//! and serialised after the lock is released: with 10,000 jobs serialising takes tens
//! of milliseconds, which the timers and triggers waiting for the lock would otherwise
//! wait too. The Environment answer is built once per change of the engine
//! ([`EnvironmentCache`]), off the async workers, and kept as gzip only.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};

use crate::config::MainConfig;
use crate::engine::read::{JobRef, JobStatus, RegistryRef};
use crate::engine::{Def, Engine, EngineError, Kind};
use crate::store::logstore::{LogMeta, LogName};
use crate::time::schedule::Timer;

/// What a time that never happened looks like (Go's zero time, as upstream sends it).
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

// The one redaction rule, shared with the runner.
pub use proto::redact::{redact_header, redact_url};

fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| ZERO_TIME.to_string(), crate::time::timezone::utc_text)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What the views show of one job, copied out of the registry.
#[derive(Debug)]
struct JobSnapshot {
    def: Def,
    status: JobStatus,
    last_run: Option<DateTime<Utc>>,
    next_run: Option<DateTime<Utc>>,
    logs: Vec<LogMeta>,
}

impl JobSnapshot {
    /// Quick: runs with the registry locked.
    fn of(job: JobRef<'_>) -> JobSnapshot {
        JobSnapshot {
            def: job.def().clone(),
            status: job.status(),
            last_run: job.last_run(),
            next_run: job.next_run(),
            logs: job.logs().collect(),
        }
    }

    fn id(&self) -> &str {
        match &self.def {
            Def::Job(job) => &job.id,
            Def::Http(job) => &job.id,
        }
    }
}

#[derive(Serialize)]
struct LogView<'a> {
    job_id: &'a str,
    #[serde(serialize_with = "display")]
    name: LogName<'a>,
    status: &'static str,
    counter: u64,
}

fn display<S: Serializer>(
    value: &impl std::fmt::Display,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// A job's logs, serialised one by one as they are listed.
struct LogsView<'a> {
    id: &'a str,
    logs: &'a [LogMeta],
}

impl Serialize for LogsView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.logs.iter().map(|log| LogView {
            job_id: self.id,
            name: LogName {
                id: self.id,
                counter: log.counter,
                status: log.status,
            },
            status: log.status.as_str(),
            counter: log.counter,
        }))
    }
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
    /// The IANA zone of `schedule`'s wall clock.
    timezone: &'a str,
    logs: LogsView<'a>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    limit_pids: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_weight: Option<u64>,
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
        Some(Timer::Schedule(schedule, _)) => (0, Some(schedule.to_string())),
        None => (0, None),
    }
}

/// The members shared by both kinds of job.
struct Shared<'a> {
    name: &'a str,
    description: &'a str,
    timer: Option<&'a Timer>,
    timezone: &'a str,
    log_retention: usize,
}

fn common<'a>(job: &'a JobSnapshot, shared: Shared<'a>) -> CommonView<'a> {
    let (interval, schedule) = timer_fields(shared.timer);
    CommonView {
        last_run: time(job.last_run),
        next_run: time(job.next_run),
        id: job.id(),
        name: shared.name,
        description: shared.description,
        status: status(job.status),
        interval,
        schedule,
        timezone: shared.timezone,
        logs: LogsView {
            id: job.id(),
            logs: &job.logs,
        },
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

fn entry_view(look: &JobSnapshot) -> EntryView<'_> {
    match &look.def {
        Def::Job(job) => EntryView::Job(JobView {
            common: common(
                look,
                Shared {
                    name: &job.name,
                    description: &job.description,
                    timer: job.timer.as_ref(),
                    timezone: job.timezone.name(),
                    log_retention: job.log_retention,
                },
            ),
            path: job.path.as_deref().unwrap_or_default(),
            auth_kind: job.auth_kind_name,
            header_sign: &job.header_sign,
            commands: &job.commands,
            timeout: job.timeout.map_or(0, nanos),
            limit_nproc: job.limits.nproc,
            limit_nofile: job.limits.nofile,
            limit_as: job.limits.address_space,
            limit_memory: job.limits.memory,
            limit_pids: job.limits.pids,
            cpu_weight: job.limits.cpu_weight,
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
                    timer: job.timer.as_ref(),
                    timezone: job.timezone.name(),
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
    let job = engine.with_job(kind, id, JobSnapshot::of)?;
    Some(snapshot_json(&job))
}

/// Pauses or resumes a job and answers its view as the change left it (see
/// [`Engine::set_paused`]). Blocking: the job's state is saved durably.
pub fn paused_job_json(
    engine: &Engine,
    kind: Kind,
    id: &str,
    paused: bool,
) -> Result<serde_json::Value, EngineError> {
    let job = engine.set_paused(kind, id, paused, JobSnapshot::of)?;
    Ok(snapshot_json(&job))
}

fn snapshot_json(job: &JobSnapshot) -> serde_json::Value {
    serde_json::to_value(entry_view(job)).unwrap_or_else(|err| {
        tracing::error!(job = job.id(), error = %err, "cannot serialise a job");
        serde_json::Value::Null
    })
}

/// Every job, copied out of the registry, and the generation they were copied at.
struct EnvironmentSnapshot {
    jobs: Vec<JobSnapshot>,
    http_jobs: Vec<JobSnapshot>,
}

impl EnvironmentSnapshot {
    /// Quick: runs with the registry locked.
    fn of(registry: RegistryRef<'_>) -> EnvironmentSnapshot {
        EnvironmentSnapshot {
            jobs: registry.jobs(Kind::Job).map(JobSnapshot::of).collect(),
            http_jobs: registry.jobs(Kind::Http).map(JobSnapshot::of).collect(),
        }
    }
}

/// Jobs keyed by name, in name order (a name given twice keeps the job listed last),
/// each view built only as it is written.
struct JobsByName<'a>(BTreeMap<&'a str, &'a JobSnapshot>);

impl<'a> JobsByName<'a> {
    fn of(jobs: &'a [JobSnapshot]) -> JobsByName<'a> {
        JobsByName(jobs.iter().map(|job| (job.def.name(), job)).collect())
    }
}

impl Serialize for JobsByName<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, job)| (name, entry_view(job))))
    }
}

#[derive(Serialize)]
struct EnvironmentView<'a> {
    jobs: JobsByName<'a>,
    http_jobs: JobsByName<'a>,
    name: &'a str,
    version: &'static str,
    listen_address: &'a str,
    dir_base: String,
    dir_public: String,
    http_timeout: u64,
    max_job_running: usize,
    is_development: bool,
}

fn environment_view<'a>(
    main: &'a MainConfig,
    snapshot: &'a EnvironmentSnapshot,
) -> EnvironmentView<'a> {
    EnvironmentView {
        jobs: JobsByName::of(&snapshot.jobs),
        http_jobs: JobsByName::of(&snapshot.http_jobs),
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

/// The whole 200 answer of the Environment endpoint, wrapper included, serialised
/// straight from the views into gzip at the fastest level: the answer is rebuilt at
/// every change, so speed beats the last few percent of size. CPU work of tens of
/// milliseconds with 10,000 jobs: call it off the async workers.
fn environment_gzip(main: &MainConfig, snapshot: &EnvironmentSnapshot) -> Vec<u8> {
    #[derive(Serialize)]
    struct Answer<'a> {
        code: u16,
        message: &'static str,
        data: EnvironmentView<'a>,
    }
    let gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // serde_json writes a few bytes at a time; deflate wants them in larger pieces.
    let mut writer = std::io::BufWriter::with_capacity(64 * 1024, gzip);
    let answer = Answer {
        code: 200,
        message: "",
        data: environment_view(main, snapshot),
    };
    let written = serde_json::to_writer(&mut writer, &answer)
        .map_err(std::io::Error::from)
        .and_then(|()| writer.into_inner().map_err(|err| err.into_error()))
        .and_then(flate2::write::GzEncoder::finish);
    written.unwrap_or_else(|err| {
        tracing::error!(error = %err, "cannot serialise the environment");
        internal_error_gzip()
    })
}

/// The answer when the Environment could not be built, gzipped like the others.
fn internal_error_gzip() -> Vec<u8> {
    use std::io::Write as _;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = gzip
        .write_all(br#"{"code":500,"message":"internal error","data":null,"name":"ERR_INTERNAL"}"#);
    gzip.finish().unwrap_or_default()
}

/// The Environment answer, ready to send. Only its gzip is kept: with 10,000 jobs and
/// 100,000 logs the JSON is 11 MB and its gzip 0.6 MB, and the UI asks for gzip; a
/// client that does not gets the JSON decompressed a chunk at a time as it is sent
/// ([`EnvironmentAnswer::json_chunks`]).
#[derive(Debug)]
pub struct EnvironmentAnswer {
    pub gzip: Bytes,
}

/// Bytes of JSON decompressed per chunk of a plain answer.
const PLAIN_CHUNK: usize = 64 * 1024;

impl EnvironmentAnswer {
    /// The JSON answer, decompressed from the gzip a chunk at a time, so that serving it
    /// plain never holds the whole of it in memory.
    pub fn json_chunks(
        &self,
    ) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static {
        use bytes::Buf as _;
        let decoder = flate2::read::GzDecoder::new(self.gzip.clone().reader());
        futures_util::stream::try_unfold(decoder, |mut decoder| async move {
            use std::io::Read as _;
            let mut chunk = vec![0; PLAIN_CHUNK];
            let mut filled = 0;
            // Fills the chunk unless the JSON ends first: fewer, fuller frames.
            while filled < chunk.len() {
                match decoder.read(&mut chunk[filled..])? {
                    0 => break,
                    read => filled += read,
                }
            }
            if filled == 0 {
                return Ok(None);
            }
            chunk.truncate(filled);
            Ok(Some((Bytes::from(chunk), decoder)))
        })
    }
}

/// The Environment answer of the engine's current generation, built once per change
/// and shared by every request until the next, so polling dashboards cost one copy of
/// the bytes each.
#[derive(Debug, Default)]
pub struct EnvironmentCache {
    /// The last answer built, with the generation it shows.
    built: Mutex<Option<(u64, Arc<EnvironmentAnswer>)>>,
    /// Held while an answer is built: requests that come meanwhile wait for it instead
    /// of building the same answer again.
    building: tokio::sync::Mutex<()>,
}

impl EnvironmentCache {
    /// The answer for `engine` as it is now: one that shows at least every change made
    /// before this call.
    pub async fn answer(&self, engine: &Engine) -> Arc<EnvironmentAnswer> {
        // Read before building: a change made meanwhile bumps the generation after it,
        // so the next request rebuilds; a stale answer is never kept past a change.
        let wanted = engine.generation();
        if let Some(answer) = self.built_since(wanted) {
            return answer;
        }
        let _building = self.building.lock().await;
        // Built by the request this one waited for, from a generation at least as new.
        if let Some(answer) = self.built_since(wanted) {
            return answer;
        }
        let generation = engine.generation();
        let snapshot = engine.with_all(EnvironmentSnapshot::of);
        let engine = engine.clone();
        let built =
            tokio::task::spawn_blocking(move || environment_gzip(engine.main(), &snapshot)).await;
        let gzip = built.unwrap_or_else(|err| {
            tracing::error!(error = %err, "building the environment failed");
            internal_error_gzip()
        });
        let answer = Arc::new(EnvironmentAnswer {
            gzip: Bytes::from(gzip),
        });
        if let Ok(mut built) = self.built.lock() {
            *built = Some((generation, answer.clone()));
        }
        answer
    }

    /// The answer built last, if it shows generation `wanted` or a later one.
    fn built_since(&self, wanted: u64) -> Option<Arc<EnvironmentAnswer>> {
        let built = self.built.lock().ok()?;
        let (generation, answer) = built.as_ref()?;
        (*generation >= wanted).then(|| answer.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::redact::REDACTED;

    /// An engine without timers over a temporary `dir_base` with `jobs` webhook jobs
    /// (`j0`, `j1`, ...), each with `logs` finished logs on disk.
    fn engine_with_jobs(jobs: usize, logs: u64) -> (tempfile::TempDir, Engine) {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical");
        let mut text = format!("[svc]\ndir_base = {}\n", base.display());
        for i in 0..jobs {
            text.push_str(&format!(
                "\n[job \"j{i}\"]\npath = /j{i}\nsecret = s{i}\ncommand = true\nlog_retention = {logs}\n"
            ));
            let log_dir = base.join(format!("var/log/svc/job/j{i}"));
            std::fs::create_dir_all(&log_dir).expect("mkdir");
            for counter in 1..=logs {
                std::fs::write(log_dir.join(format!("j{i}.{counter}.success")), "")
                    .expect("write a log");
            }
        }
        let main_file = base.join("svc.conf");
        std::fs::write(&main_file, text).expect("write the configuration");
        let config = crate::config::load(&main_file).expect("load");
        let hub = crate::runner::exec::RunnerHub::start(
            &config.main.dir_runtime(),
            base.join("none"),
            Vec::new(),
        )
        .expect("runner hub");
        let engine = Engine::new(
            &config,
            Arc::new(hub),
            Arc::new(crate::engine::clock::SystemClock),
            None,
        );
        (dir, engine)
    }

    fn gunzip(data: &[u8]) -> Vec<u8> {
        use std::io::Read as _;
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(data)
            .read_to_end(&mut plain)
            .expect("gzip");
        plain
    }

    #[tokio::test]
    async fn the_environment_lists_every_job_and_log_and_streams_plain() {
        use futures_util::TryStreamExt as _;
        let (_dir, engine) = engine_with_jobs(300, 3);
        let cache = EnvironmentCache::default();
        let answer = cache.answer(&engine).await;
        let json = gunzip(&answer.gzip);
        let value: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
        assert_eq!(value["code"], 200);
        let jobs = value["data"]["jobs"].as_object().expect("jobs");
        assert_eq!(jobs.len(), 300);
        let logs = jobs["j7"]["logs"].as_array().expect("logs");
        let names: Vec<&str> = logs.iter().filter_map(|log| log["name"].as_str()).collect();
        assert_eq!(names, ["j7.1.success", "j7.2.success", "j7.3.success"]);
        assert_eq!(logs[2]["job_id"], "j7");
        assert_eq!(logs[2]["status"], "success");
        assert_eq!(logs[2]["counter"], 3);
        assert_eq!(jobs["j7"]["path"], "/j7");

        // Plain, it comes a chunk at a time, and is the same JSON.
        let chunks: Vec<Bytes> = answer.json_chunks().try_collect().await.expect("chunks");
        assert!(chunks.len() > 1, "{} bytes in one chunk", json.len());
        assert!(chunks.iter().all(|chunk| chunk.len() <= PLAIN_CHUNK));
        assert_eq!(chunks.concat(), json);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_environment_is_built_once_per_change() {
        let (_dir, engine) = engine_with_jobs(20, 1);
        let cache = Arc::new(EnvironmentCache::default());
        let first = cache.answer(&engine).await;
        assert!(
            Arc::ptr_eq(&first, &cache.answer(&engine).await),
            "no change, same answer"
        );

        engine.pause(Kind::Job, "j3").expect("pause");
        // Requests that come together after a change share one new answer.
        let answers = futures_util::future::join_all((0..8).map(|_| {
            let (cache, engine) = (cache.clone(), engine.clone());
            tokio::spawn(async move { cache.answer(&engine).await })
        }))
        .await;
        let answers: Vec<_> = answers.into_iter().map(|a| a.expect("task")).collect();
        assert!(!Arc::ptr_eq(&first, &answers[0]), "rebuilt after the pause");
        assert!(
            answers.iter().all(|a| Arc::ptr_eq(a, &answers[0])),
            "built once"
        );
        let value: serde_json::Value =
            serde_json::from_slice(&gunzip(&answers[0].gzip)).expect("JSON");
        assert_eq!(value["data"]["jobs"]["j3"]["status"], "paused");
    }

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
