//! Process-wide metrics, rendered in the Prometheus/OpenMetrics text format at `/svc/api/metrics`.
//!
//! One registry per process (the controller is one process per `dir_base`), built on first
//! use with [`prometheus_client`]. The recording functions below are what the engine and the
//! HTTP layer call; they only touch atomics and the families' own (non-poisoning) locks, so
//! they are cheap and never panic. Label values are escaped by the crate's encoder.
//!
//! Per-job series are labelled `kind` (`job`, `job_http`) and `job_id` (never `job`,
//! which Prometheus sets to the scrape job). They exist for configured jobs only, so
//! their number follows the configuration; a reload that removes a job removes its
//! series (after its last run, if one is going on).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `svc_runs_total` | counter | `kind`, `job_id`, `result` (`success`, `fail`) |
//! | `svc_job_runs_total` | counter (each status from 0) | `kind`, `job_id`, `status` (`success`, `fail`, `canceled`, `timeout`, `interrupted`) |
//! | `svc_job_last_success_timestamp_seconds` | gauge | `kind`, `job_id` |
//! | `svc_job_last_run_duration_seconds` | gauge | `kind`, `job_id` |
//! | `svc_job_last_run_success` | gauge (0/1) | `kind`, `job_id` |
//! | `svc_job_interval_seconds` | gauge | `kind`, `job_id` (jobs with a timer) |
//! | `svc_job_queued` | gauge (0/1) | `kind`, `job_id` |
//! | `svc_job_running` | gauge (0/1) | `kind`, `job_id` |
//! | `svc_job_paused` | gauge (0/1) | `kind`, `job_id` |
//! | `svc_job_cpu_seconds_total` | counter | `kind`, `job_id`, `mode` (`user`, `system`) |
//! | `svc_job_last_run_peak_memory_bytes` | gauge | `kind`, `job_id` |
//! | `svc_triggers_refused_total` | counter | `reason` (`not_found`, `paused`, `busy`, `shutting_down`, `not_saved`, `cluster_unavailable`) |
//! | `svc_triggers_dropped_total` | counter | `reason` |
//! | `svc_run_duration_seconds` | histogram | `kind` |
//! | `svc_run_queue_length` | gauge | |
//! | `svc_runs_running` | gauge | |
//! | `svc_max_job_running` | gauge | |
//! | `svc_timer_lateness_seconds` | histogram | |
//! | `svc_timer_ticks_skipped_total` | counter | `reason` (`running`, `paused`) |
//! | `svc_cluster_slot_offers_total` | counter | |
//! | `svc_cluster_wakeups_total` | counter | |
//! | `svc_webhook_rejections_total` | counter | `reason` |
//! | `svc_unauthenticated_total` | counter | `reason` (`action`, `login_unknown_name`, `login_throttled`) |
//! | `svc_http_requests_total` | counter | `route` (template or `other`), `status` |
//! | `svc_http_connections_shed_total` | counter | `reason` (`idle_closed`, `refused`) |
//! | `svc_pings_total` | counter | `result` (`sent`, `failed`, `dropped`) |
//! | `svc_build_info` | gauge (always 1) | `version` |
//! | `svc_start_time_seconds` | gauge | |

use crate::util::lock::MutexExt as _;
use std::sync::LazyLock;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::store::history::RunRecord;

mod families;
mod usage;
use crate::store::state::{RunResult, RunStatus};
use families::{EngineMetrics, JobFamilies, TrafficMetrics, register_process};

/// Upper bounds (seconds) of the run duration buckets: from 10 ms to one hour.
const RUN_DURATION_BUCKETS: [f64; 12] = [
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Upper bounds (seconds) of the timer lateness buckets: fine below 10 ms, where a timer
/// should fire, and coarse up to 10 s, where a stuck runtime or a stopped clock would
/// show.
const TIMER_LATENESS_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// Labels of `svc_runs_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RunLabels {
    kind: &'static str,
    job_id: String,
    result: &'static str,
}

/// Labels of `svc_job_runs_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct JobStatusLabels {
    kind: &'static str,
    job_id: String,
    status: &'static str,
}

/// Labels of the per-job series. The job's ID is `job_id`, not `job`: Prometheus
/// gives every scraped series the `job` label of its scrape configuration, and would
/// rename a `job` label of the target to `exported_job`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct JobLabels {
    kind: &'static str,
    job_id: String,
}

impl JobLabels {
    fn new(kind: &str, job_id: &str) -> Self {
        Self {
            kind: kind_label(kind),
            job_id: job_id.to_owned(),
        }
    }
}

/// A gauge of seconds, fractional.
type SecondsGauge = Gauge<f64, AtomicU64>;

/// Labels of `svc_run_duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// Labels of `svc_webhook_rejections_total` and `svc_triggers_dropped_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// Labels of `svc_pings_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// Labels of `svc_http_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    status: u16,
}

/// Labels of `svc_build_info`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

fn run_duration_histogram() -> Histogram {
    Histogram::new(RUN_DURATION_BUCKETS)
}

/// A registry with every svc metric, and the handles that record into it, by group in
/// the order they are registered (and rendered).
#[derive(Debug)]
struct Metrics {
    registry: Registry,
    jobs: JobFamilies,
    engine: EngineMetrics,
    traffic: TrafficMetrics,
    usage: usage::UsageMetrics,
}

impl Metrics {
    /// A fresh registry; `start_time` is the Unix time reported by `svc_start_time_seconds`.
    fn new(start_time: f64) -> Self {
        let mut registry = Registry::with_prefix("svc");
        let jobs = JobFamilies::register(&mut registry);
        let engine = EngineMetrics::register(&mut registry);
        let traffic = TrafficMetrics::register(&mut registry);
        register_process(&mut registry, start_time);
        let usage = usage::UsageMetrics::register(&mut registry);
        Self {
            registry,
            jobs,
            engine,
            traffic,
            usage,
        }
    }

    fn run_finished(&self, kind: &str, job_id: &str, run: &RunRecord) {
        let job = JobLabels::new(kind, job_id);
        let kind = job.kind;
        let seconds = Duration::from_millis(run.duration_ms).as_secs_f64();
        self.jobs
            .runs
            .get_or_create(&RunLabels {
                kind,
                job_id: job.job_id.clone(),
                result: run.status.result().log_status(),
            })
            .inc();
        self.jobs
            .job_runs
            .get_or_create(&JobStatusLabels {
                kind,
                job_id: job.job_id.clone(),
                status: run.status.as_str(),
            })
            .inc();
        self.jobs.job_last_duration.get_or_create(&job).set(seconds);
        self.record_last(&job, run.status.result(), run.ended_at);
        self.engine
            .run_duration
            .get_or_create(&KindLabels { kind })
            .observe(seconds);
        if let Some(used) = &run.usage {
            self.usage.run_finished(&job, used);
        }
    }

    fn job_loaded(&self, kind: &str, job_id: &str, last: Option<(RunResult, DateTime<Utc>)>) {
        let job = JobLabels::new(kind, job_id);
        // Every status from zero: `increase()` then sees a job's first failure, which
        // a series born at 1 would hide.
        for status in RunStatus::ALL {
            // Only creates the series: a reload keeps the counts it has.
            drop(self.jobs.job_runs.get_or_create(&JobStatusLabels {
                kind: job.kind,
                job_id: job.job_id.clone(),
                status: status.as_str(),
            }));
        }
        if let Some((result, began)) = last {
            // The state file keeps when the last run began, not when it ended: the
            // best time known without reading each job's history at every start.
            self.record_last(&job, result, began);
        }
    }

    /// How a job's last finished run ended, at `time`: the one rule behind
    /// `svc_job_last_run_success` and `svc_job_last_success_timestamp_seconds`, for a
    /// run's end ([`Self::run_finished`]) and for a job loaded ([`Self::job_loaded`]).
    /// A failure leaves the last success as it was.
    fn record_last(&self, job: &JobLabels, result: RunResult, time: DateTime<Utc>) {
        let success = result == RunResult::Success;
        self.jobs
            .job_last_run_success
            .get_or_create(job)
            .set(i64::from(success));
        if success {
            self.jobs
                .job_last_success
                .get_or_create(job)
                .set(unix_seconds(time));
        }
    }

    fn set_job_interval(&self, kind: &str, job_id: &str, gap: Option<Duration>) {
        let job = JobLabels::new(kind, job_id);
        match gap {
            Some(gap) => {
                self.jobs
                    .job_interval
                    .get_or_create(&job)
                    .set(gap.as_secs_f64());
            }
            None => {
                self.jobs.job_interval.remove(&job);
            }
        }
    }

    /// Drops every series of a job, so that a job removed from the configuration does
    /// not stay in the exposition (and in dashboards and alerts) until the restart.
    fn job_removed(&self, kind: &str, job_id: &str) {
        let job = JobLabels::new(kind, job_id);
        self.usage.job_removed(&job);
        for status in RunStatus::ALL {
            self.jobs.job_runs.remove(&JobStatusLabels {
                kind: job.kind,
                job_id: job.job_id.clone(),
                status: status.as_str(),
            });
            // Labelled as `run_finished` labels it, so that no result is left behind;
            // several statuses share a result, and removing it again does nothing.
            self.jobs.runs.remove(&RunLabels {
                kind: job.kind,
                job_id: job.job_id.clone(),
                result: status.result().log_status(),
            });
        }
        for family in [
            &self.jobs.job_last_success,
            &self.jobs.job_last_duration,
            &self.jobs.job_interval,
        ] {
            family.remove(&job);
        }
        for family in [
            &self.jobs.job_last_run_success,
            &self.jobs.job_queued,
            &self.jobs.job_running,
            &self.jobs.job_paused,
        ] {
            family.remove(&job);
        }
    }

    /// Replaces the queue and running gauges with what `snapshot` counted.
    fn apply_queue_snapshot(&self, snapshot: &QueueSnapshot) {
        self.set_queue_length(snapshot.waiting);
        self.engine
            .runs_running
            .set(i64::try_from(snapshot.running).unwrap_or(i64::MAX));
        // Rebuilt from scratch: a job removed since the last count goes with it. The
        // caller holds the lock that keeps another read from rendering meanwhile.
        self.jobs.job_queued.clear();
        self.jobs.job_running.clear();
        self.jobs.job_paused.clear();
        for job in &snapshot.jobs {
            let labels = JobLabels::new(job.kind, &job.job_id);
            self.jobs
                .job_queued
                .get_or_create(&labels)
                .set(i64::from(job.queued));
            self.jobs
                .job_running
                .get_or_create(&labels)
                .set(i64::from(job.running));
            self.jobs
                .job_paused
                .get_or_create(&labels)
                .set(i64::from(job.paused));
        }
    }

    fn trigger_refused(&self, reason: &'static str) {
        self.engine
            .triggers_refused
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    fn set_queue_length(&self, waiting: usize) {
        self.engine
            .queue_length
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }

    fn webhook_rejected(&self, reason: &'static str) {
        self.traffic
            .webhook_rejections
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    fn http_request(&self, route: &str, status: u16) {
        self.traffic
            .http_requests
            .get_or_create(&HttpLabels {
                route: route.to_owned(),
                status,
            })
            .inc();
    }

    fn render(&self) -> String {
        let mut text = String::with_capacity(4096);
        if let Err(err) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            // Writing to a String does not fail; keep whatever was written if it ever does.
            tracing::warn!(error = %err, "encoding the metrics failed");
        }
        text
    }
}

/// The `kind` label: one of the two known kinds, anything else as `other` (keeps the
/// label's values bounded whatever a caller passes).
fn kind_label(kind: &str) -> &'static str {
    match kind {
        "job" => "job",
        "job_http" => "job_http",
        _ => "other",
    }
}

/// Unix time of the process start: from `/proc` when it can be read, else now.
fn process_start_time() -> f64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64());
    proc_start_time()
        .filter(|start| *start > 0.0 && *start <= now)
        .unwrap_or(now)
}

/// Boot time (`btime` of `/proc/stat`) plus the process's `starttime` (field 22 of
/// `/proc/self/stat`, in clock ticks since boot).
fn proc_start_time() -> Option<f64> {
    // USER_HZ: the unit of /proc times, fixed by the kernel ABI at 100 on Linux ports.
    const USER_HZ: f64 = 100.0;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may itself contain spaces or `)`.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // Fields from 3 (state) on; starttime is field 22.
    let ticks: f64 = after_comm.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: f64 = boot
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(btime + ticks / USER_HZ)
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics::new(process_start_time()));

/// Builds the registry now rather than on first use (optional: every other function
/// builds it when needed). Calling it early at start-up makes the fallback start time
/// (used when `/proc` cannot be read) the start-up time.
pub fn init() {
    LazyLock::force(&METRICS);
}

fn unix_seconds(t: DateTime<Utc>) -> f64 {
    t.timestamp() as f64 + f64::from(t.timestamp_subsec_micros()) / 1e6
}

/// A finished run of a Job (`kind` = `job`) or JobHttp (`job_http`), as its history
/// records it.
pub fn run_finished(kind: &str, job_id: &str, run: &RunRecord) {
    METRICS.run_finished(kind, job_id, run);
}

/// A job was loaded (at start, or added by a reload): its runs by status start at zero,
/// and `last` (how its last run ended and when it began, from its state file) makes
/// `svc_job_last_run_success` and `svc_job_last_success_timestamp_seconds` survive a
/// restart. The state file keeps no end time, so a last success loaded is the time
/// that run began (earlier than the end a run's end records, by its duration).
pub fn job_loaded(kind: &str, job_id: &str, last: Option<(RunResult, DateTime<Utc>)>) {
    METRICS.job_loaded(kind, job_id, last);
}

/// The longest gap expected between two timer runs of a job (`None`: it has no timer).
pub fn job_interval(kind: &str, job_id: &str, gap: Option<Duration>) {
    METRICS.set_job_interval(kind, job_id, gap);
}

/// A job left the configuration (and its last run, if one was going on, ended).
pub fn job_removed(kind: &str, job_id: &str) {
    METRICS.job_removed(kind, job_id);
}

/// The `max_job_running` setting, for alerts on saturation.
pub fn set_max_job_running(permits: usize) {
    METRICS
        .engine
        .max_job_running
        .set(i64::try_from(permits).unwrap_or(i64::MAX));
}

/// The engine refused a trigger (see `svc_triggers_refused_total`).
pub fn trigger_refused(reason: &'static str) {
    METRICS.trigger_refused(reason);
}

/// A timer fired `lateness` after its due time (see `svc_timer_lateness_seconds`).
pub fn timer_fired(lateness: Duration) {
    METRICS
        .engine
        .timer_lateness
        .observe(lateness.as_secs_f64());
}

/// A timer tick started no run; `reason` is `running` (the previous run still goes on)
/// or `paused`.
pub fn timer_tick_skipped(reason: &'static str) {
    METRICS
        .engine
        .timer_ticks_skipped
        .get_or_create(&ReasonLabels { reason })
        .inc();
}

/// `count` timer slots offered to the cluster's database.
pub fn cluster_slot_offers(count: usize) {
    METRICS
        .engine
        .cluster_slot_offers
        .inc_by(u64::try_from(count).unwrap_or(u64::MAX));
}

/// A wake-up signal from another node, acted on.
pub fn cluster_wakeup() {
    METRICS.engine.cluster_wakeups.inc();
}

/// What the engine counts for the queue and running gauges when the metrics are read.
#[derive(Debug, Default)]
pub struct QueueSnapshot {
    /// Queued triggers plus runs waiting for a permit (`svc_run_queue_length`).
    pub waiting: usize,
    /// Job runs going on, each holding a `max_job_running` permit (`svc_runs_running`);
    /// JobHttp calls take none, and are left out so the gauge compares with the setting.
    pub running: usize,
    /// Each configured job (`svc_job_queued`, `svc_job_running`, `svc_job_paused`).
    pub jobs: Vec<JobQueueState>,
}

/// One job in a [`QueueSnapshot`].
#[derive(Debug)]
pub struct JobQueueState {
    /// `job` or `job_http`.
    pub kind: &'static str,
    pub job_id: String,
    /// Its one-slot queue holds a trigger.
    pub queued: bool,
    /// A run of it is going on.
    pub running: bool,
    /// It is paused.
    pub paused: bool,
}

/// What [`render`] asks for the queue's state before it renders.
type QueueSource = Box<dyn Fn() -> Option<QueueSnapshot> + Send + Sync>;

static QUEUE_SOURCE: std::sync::Mutex<Option<QueueSource>> = std::sync::Mutex::new(None);

/// Where the queue and running gauges come from when the metrics are read: counting
/// walks every job, too much to do at each change with thousands of them. `None` from
/// `source` (nothing changed, or its engine is gone) keeps the last values.
pub fn set_queue_source(source: impl Fn() -> Option<QueueSnapshot> + Send + Sync + 'static) {
    *QUEUE_SOURCE.locked() = Some(Box::new(source));
}

/// A webhook was refused; `reason` is a short fixed word such as `signature`.
pub fn webhook_rejected(reason: &'static str) {
    METRICS.webhook_rejected(reason);
}

/// A request was refused before anyone was known (see `svc_unauthenticated_total`).
pub fn unauthenticated(reason: &'static str) {
    METRICS
        .traffic
        .unauthenticated
        .get_or_create(&ReasonLabels { reason })
        .inc();
}

/// A connection past `max_connections` was shed; `reason` is `idle_closed` or `refused`.
pub fn connection_shed(reason: &'static str) {
    METRICS
        .traffic
        .connections_shed
        .get_or_create(&ReasonLabels { reason })
        .inc();
}

/// A queued trigger was dropped without a run; `reason` is a short fixed word such as
/// `job_removed`.
pub fn trigger_dropped(reason: &'static str) {
    METRICS
        .traffic
        .triggers_dropped
        .get_or_create(&ReasonLabels { reason })
        .inc();
}

/// A health ping was sent, failed for good or was dropped (`result`: `sent`, `failed`,
/// `dropped`).
pub fn ping_sent(result: &'static str) {
    METRICS
        .traffic
        .pings
        .get_or_create(&ResultLabels { result })
        .inc();
}

/// An HTTP request was answered; `route` is the matched route template (never the raw
/// path) or `other`.
pub fn http_request(route: &str, status: u16) {
    METRICS.http_request(route, status);
}

/// The text exposition of every metric (OpenMetrics text, which ends with `# EOF`;
/// Prometheus's text parser reads it too).
pub fn render() -> String {
    // Held through the rendering: two reads at once must not render the per-job gauges
    // while the other one rebuilds them.
    let source = QUEUE_SOURCE.locked();
    if let Some(snapshot) = source.as_ref().and_then(|source| source()) {
        METRICS.apply_queue_snapshot(&snapshot);
    }
    METRICS.render()
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
