//! The families of the registry by group, each registered in the order it is rendered:
//! per job, the engine's totals, the traffic, and the process's constant series (the
//! usage families are `usage.rs`'s).

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::{
    BuildLabels, HttpLabels, JobLabels, JobStatusLabels, KindLabels, ReasonLabels, ResultLabels,
    RunLabels, SecondsGauge, TIMER_LATENESS_BUCKETS, run_duration_histogram,
};

/// The per-job families: each job's finished runs and how the last one ended, its
/// timer's interval, and whether it is queued, running or paused.
#[derive(Debug)]
pub(super) struct JobFamilies {
    pub(super) runs: Family<RunLabels, Counter>,
    pub(super) job_runs: Family<JobStatusLabels, Counter>,
    pub(super) job_last_success: Family<JobLabels, SecondsGauge>,
    pub(super) job_last_duration: Family<JobLabels, SecondsGauge>,
    pub(super) job_last_run_success: Family<JobLabels, Gauge>,
    pub(super) job_interval: Family<JobLabels, SecondsGauge>,
    pub(super) job_queued: Family<JobLabels, Gauge>,
    pub(super) job_running: Family<JobLabels, Gauge>,
    pub(super) job_paused: Family<JobLabels, Gauge>,
}

/// The engine's totals: runs going on and waiting, the permits, refused triggers, how
/// long runs took, and how the timers fire.
#[derive(Debug)]
pub(super) struct EngineMetrics {
    pub(super) runs_running: Gauge,
    pub(super) max_job_running: Gauge,
    pub(super) triggers_refused: Family<ReasonLabels, Counter>,
    pub(super) run_duration: Family<KindLabels, Histogram, fn() -> Histogram>,
    pub(super) queue_length: Gauge,
    pub(super) timer_lateness: Histogram,
    pub(super) timer_ticks_skipped: Family<ReasonLabels, Counter>,
    pub(super) cluster_slot_offers: Counter,
    pub(super) cluster_wakeups: Counter,
}

/// What came from outside and what became of it: refused webhooks, requests of no one
/// known, dropped triggers, HTTP requests, shed connections; and the pings sent out.
#[derive(Debug)]
pub(super) struct TrafficMetrics {
    pub(super) webhook_rejections: Family<ReasonLabels, Counter>,
    pub(super) unauthenticated: Family<ReasonLabels, Counter>,
    pub(super) triggers_dropped: Family<ReasonLabels, Counter>,
    pub(super) http_requests: Family<HttpLabels, Counter>,
    pub(super) connections_shed: Family<ReasonLabels, Counter>,
    pub(super) pings: Family<ResultLabels, Counter>,
}

impl JobFamilies {
    /// Registers the group in `registry`, in this order.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let runs = Family::<RunLabels, Counter>::default();
        registry.register(
            "runs",
            "Finished runs by kind (job, job_http), job ID and result (success, fail)",
            runs.clone(),
        );
        let job_runs = Family::<JobStatusLabels, Counter>::default();
        registry.register(
            "job_runs",
            "Finished runs by kind, job ID and how they ended (success, fail, canceled, \
             timeout, interrupted)",
            job_runs.clone(),
        );
        let job_last_success = Family::<JobLabels, SecondsGauge>::default();
        registry.register_with_unit(
            "job_last_success_timestamp",
            "Unix time the last successful run of each job ended; after a restart of the \
             controller, until the job's next success, the time that run began (what the \
             job's state keeps), and only when it was the job's last run; absent while no \
             success is known",
            Unit::Seconds,
            job_last_success.clone(),
        );
        let job_last_duration = Family::<JobLabels, SecondsGauge>::default();
        registry.register_with_unit(
            "job_last_run_duration",
            "Duration of the last finished run of each job",
            Unit::Seconds,
            job_last_duration.clone(),
        );
        let job_last_run_success = Family::<JobLabels, Gauge>::default();
        registry.register(
            "job_last_run_success",
            "1 when the last finished run of each job succeeded, 0 when it did not (absent \
             until the job has a finished run)",
            job_last_run_success.clone(),
        );
        let job_interval = Family::<JobLabels, SecondsGauge>::default();
        registry.register_with_unit(
            "job_interval",
            "Longest gap expected between two timer runs of each job with a timer: its \
             interval, or the longest gap between the slots of its schedule over the next \
             8 days (a weekend included), plus its random_delay",
            Unit::Seconds,
            job_interval.clone(),
        );
        let job_queued = Family::<JobLabels, Gauge>::default();
        registry.register(
            "job_queued",
            "1 when the one-slot queue of each job holds a trigger (a further trigger is \
             then refused or replaces it), else 0",
            job_queued.clone(),
        );
        let job_running = Family::<JobLabels, Gauge>::default();
        registry.register(
            "job_running",
            "1 while a run of each job is going on (a Job's run holds a max_job_running \
             permit, a JobHttp call none), else 0",
            job_running.clone(),
        );
        let job_paused = Family::<JobLabels, Gauge>::default();
        registry.register(
            "job_paused",
            "1 while each job is paused (its timer and triggers start no run), else 0",
            job_paused.clone(),
        );
        Self {
            runs,
            job_runs,
            job_last_success,
            job_last_duration,
            job_last_run_success,
            job_interval,
            job_queued,
            job_running,
            job_paused,
        }
    }
}

impl EngineMetrics {
    /// Registers the group in `registry`, in this order.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let runs_running = Gauge::default();
        registry.register(
            "runs_running",
            "Job runs going on, each holding one of the max_job_running permits (JobHttp \
             calls take none and are not counted; svc_job_running shows them per job)",
            runs_running.clone(),
        );
        let max_job_running = Gauge::default();
        registry.register(
            "max_job_running",
            "The max_job_running setting: how many Job runs may go on at once",
            max_job_running.clone(),
        );
        let triggers_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "triggers_refused",
            "Triggers the engine refused (webhook, run now, chains, retries), by reason",
            triggers_refused.clone(),
        );
        let run_duration = Family::<KindLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            run_duration_histogram,
        );
        registry.register_with_unit(
            "run_duration",
            "Duration of finished runs by kind",
            Unit::Seconds,
            run_duration.clone(),
        );
        let queue_length = Gauge::default();
        registry.register(
            "run_queue_length",
            "Runs waiting: queued triggers plus runs waiting for a max_job_running permit",
            queue_length.clone(),
        );
        let timer_lateness = Histogram::new(TIMER_LATENESS_BUCKETS);
        registry.register_with_unit(
            "timer_lateness",
            "How late timers fire: the time the engine took a timer's trigger (started the \
             run, or skipped the tick because the job is paused or still busy) minus the due time",
            Unit::Seconds,
            timer_lateness.clone(),
        );
        let timer_ticks_skipped = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "timer_ticks_skipped",
            "Timer ticks that started no run, by reason: the job's previous run was still \
             going on or waiting for a permit (running), or the job is paused (paused)",
            timer_ticks_skipped.clone(),
        );
        let cluster_slot_offers = Counter::default();
        registry.register(
            "cluster_slot_offers",
            "Timer slots this node offered to the cluster's database (cluster mode): its own \
             slots on time, another node's when that node stopped beating",
            cluster_slot_offers.clone(),
        );
        let cluster_wakeups = Counter::default();
        registry.register(
            "cluster_wakeups",
            "Wake-up signals from other nodes this node's claimer acted on (cluster mode)",
            cluster_wakeups.clone(),
        );
        Self {
            runs_running,
            max_job_running,
            triggers_refused,
            run_duration,
            queue_length,
            timer_lateness,
            timer_ticks_skipped,
            cluster_slot_offers,
            cluster_wakeups,
        }
    }
}

impl TrafficMetrics {
    /// Registers the group in `registry`, in this order.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let webhook_rejections = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "webhook_rejections",
            "Refused webhook triggers by reason",
            webhook_rejections.clone(),
        );
        let unauthenticated = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "unauthenticated",
            "Requests refused before anyone was known (no valid signature or session, a login \
             for a name that is no account, a throttled login), counted instead of audited",
            unauthenticated.clone(),
        );
        let triggers_dropped = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "triggers_dropped",
            "Accepted triggers that were queued and then dropped without a run, by reason",
            triggers_dropped.clone(),
        );
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "http_requests",
            "Answered HTTP requests by route template (or other) and status code",
            http_requests.clone(),
        );
        let connections_shed = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "http_connections_shed",
            "Connections past max_connections: an idle one closed to make room (idle_closed) \
             or the new one answered 503 (refused)",
            connections_shed.clone(),
        );
        let pings = Family::<ResultLabels, Counter>::default();
        registry.register(
            "pings",
            "Health pings (ping_url) by result: sent (the check answered 2xx, retries \
             included), failed (every attempt failed, or the service stopped first), \
             dropped (never tried: too many were waiting)",
            pings.clone(),
        );
        Self {
            webhook_rejections,
            unauthenticated,
            triggers_dropped,
            http_requests,
            connections_shed,
            pings,
        }
    }
}

/// The process's constant series: `svc_build_info` and `svc_start_time_seconds`
/// (`start_time`, Unix time); nothing records into them later.
pub(super) fn register_process(registry: &mut Registry, start_time: f64) {
    let build_info = Family::<BuildLabels, Gauge>::default();
    build_info
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
        })
        .set(1);
    registry.register(
        "build_info",
        "Always 1; the version label is the svc-controller version",
        build_info,
    );
    let start = Gauge::<f64, AtomicU64>::default();
    start.set(start_time);
    registry.register_with_unit(
        "start_time",
        "Unix time the controller process started",
        Unit::Seconds,
        start,
    );
}
