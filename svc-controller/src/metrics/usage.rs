//! The metrics of what runs used: CPU seconds per job and the last run's peak memory,
//! from the usage each run's runner reports (runs of commands only).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::JobLabels;

/// Labels of `svc_job_cpu_seconds_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CpuLabels {
    kind: &'static str,
    job_id: String,
    /// `user` or `system`, as the kernel splits CPU time.
    mode: &'static str,
}

/// The usage families of the registry.
#[derive(Debug)]
pub(super) struct UsageMetrics {
    cpu: Family<CpuLabels, Counter<f64, AtomicU64>>,
    peak_memory: Family<JobLabels, Gauge>,
}

impl UsageMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let cpu = Family::<CpuLabels, Counter<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "job_cpu",
            "CPU time the runs of each job used since the controller started, by mode \
             (user, system); runs of commands whose runner reported it",
            Unit::Seconds,
            cpu.clone(),
        );
        let peak_memory = Family::<JobLabels, Gauge>::default();
        registry.register_with_unit(
            "job_last_run_peak_memory",
            "Peak memory of the last run of each job that reported it: its cgroup's peak, \
             or without one the largest resident set of a single process of the run",
            Unit::Bytes,
            peak_memory.clone(),
        );
        UsageMetrics { cpu, peak_memory }
    }

    /// Adds what a run of `job` used.
    pub(super) fn run_finished(&self, job: &JobLabels, usage: &proto::ResourceUsage) {
        for (mode, ms) in [("user", usage.cpu_user_ms), ("system", usage.cpu_system_ms)] {
            self.cpu
                .get_or_create(&CpuLabels {
                    kind: job.kind,
                    job_id: job.job_id.clone(),
                    mode,
                })
                .inc_by(ms as f64 / 1000.0);
        }
        self.peak_memory
            .get_or_create(job)
            .set(i64::try_from(usage.peak_memory_bytes).unwrap_or(i64::MAX));
    }

    /// Drops every series of a removed job.
    pub(super) fn job_removed(&self, job: &JobLabels) {
        for mode in ["user", "system"] {
            self.cpu.remove(&CpuLabels {
                kind: job.kind,
                job_id: job.job_id.clone(),
                mode,
            });
        }
        self.peak_memory.remove(job);
    }
}
