//! A run's limits, applied the way the host allows: through the run's cgroup
//! ([`crate::runner::cgroups`]) where runs get one, else as resource limits of each process;
//! and at the run's end what its cgroup measured (CPU time, peak memory, an OOM kill,
//! refused forks) folded into its outcome and log.

use proto::{Action, ExecRequest, ResourceLimits, UsageSource};

use crate::runner::cgroups::{RunCgroup, RunCgroups, RunEnd, RunLimits};
use crate::runner::exec::{Outcome, RunEvent};

/// Makes the run's cgroup when `request` is a run of commands and runs get cgroups (its
/// `cgroup.procs` files go into the request), or sets the limits of the one made `ahead`
/// for its runner, and turns the limits no cgroup takes into resource limits of each
/// process. `Err`: the run cannot start, and why.
pub async fn apply(
    cgroups: Option<&std::sync::Arc<RunCgroups>>,
    request: &mut ExecRequest,
    ahead: Option<RunCgroup>,
) -> Result<Option<RunCgroup>, String> {
    if !matches!(request.action, Action::Commands { .. }) {
        return Ok(None);
    }
    let in_cgroup = cgroups.map_or((false, false), |c| (c.limits_pids(), c.limits_memory()));
    request.limits = per_process(request.limits, in_cgroup);
    let Some(cgroups) = cgroups.filter(|c| c.active()).cloned() else {
        return Ok(None);
    };
    let limits = RunLimits::of_run(&request.limits);
    let made = match ahead {
        // Made with these limits: no trip to a blocking thread on the way to the command.
        Some(cgroup) if cgroup.holds(&limits.ahead()) => Some(cgroup),
        ahead => {
            let (job_id, counter) = (request.job_id.clone(), request.counter);
            tokio::task::spawn_blocking(move || match ahead {
                Some(mut cgroup) => {
                    cgroup.set_limits(&limits.ahead())?;
                    Ok(Some(cgroup))
                }
                None => cgroups.create(&job_id, counter, &limits),
            })
            .await
            .map_err(|err| format!("cannot make the run's cgroup: {err}"))??
        }
    };
    if let Some(cgroup) = &made {
        request.cgroup_procs = cgroup.procs_files();
    }
    Ok(made)
}

/// The limits each process gets: `limit_memory` as `RLIMIT_DATA` and a set `limit_pids`
/// as `RLIMIT_NPROC` (unless `limit_nproc` is set) where no cgroup takes them.
fn per_process(
    mut limits: ResourceLimits,
    (pids_in_cgroup, memory_in_cgroup): (bool, bool),
) -> ResourceLimits {
    if !memory_in_cgroup {
        limits.data = limits.data.or(limits.memory);
    }
    if !pids_in_cgroup {
        limits.nproc = limits.nproc.or(limits.pids);
    }
    limits
}

/// Ends the run's cgroup after its runner is done and folds what it measured into
/// `outcome`: its CPU time and peak memory, and an OOM kill, which makes a failed run's
/// end `oom` in its summary, history and log.
pub async fn conclude(
    cgroup: RunCgroup,
    limits: &ResourceLimits,
    outcome: &mut Outcome,
    sink: &mut (dyn FnMut(RunEvent<'_>) + Send),
) {
    let end = match tokio::task::spawn_blocking(move || cgroup.finish()).await {
        Ok(end) => end,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the end of a run's cgroup");
            return;
        }
    };
    fold(&end, limits, outcome, sink);
}

fn fold(
    end: &RunEnd,
    limits: &ResourceLimits,
    outcome: &mut Outcome,
    sink: &mut (dyn FnMut(RunEvent<'_>) + Send),
) {
    if let Some(usage) = outcome.detail.usage.as_mut() {
        if let (Some(user), Some(system)) = (end.cpu_user_ms, end.cpu_system_ms) {
            usage.cpu_user_ms = user;
            usage.cpu_system_ms = system;
        }
        if let Some(peak) = end.peak_memory_bytes {
            usage.peak_memory_bytes = peak;
            usage.measured_by = UsageSource::Cgroup;
        }
    }
    if end.forks_refused > 0 {
        sink(RunEvent::Line(format!(
            "--- limit_pids: {} fork(s) refused, the run reached its limit of {} tasks",
            end.forks_refused,
            RunLimits::tasks_of(limits)
        )));
    }
    if end.killed_at_end > 0 {
        sink(RunEvent::Line(format!(
            "--- {} process(es) left in the run's cgroup at its end were killed",
            end.killed_at_end
        )));
    }
    if end.oom_kills > 0 {
        let limit = limits.memory.map_or_else(
            || "the host's".to_string(),
            |bytes| format!("limit_memory = {}", mebibytes(bytes)),
        );
        sink(RunEvent::Line(format!(
            "--- oom: the kernel killed {} process(es) of the run at its memory limit ({limit})",
            end.oom_kills
        )));
        if !outcome.success {
            outcome.detail.oom = true;
            outcome.summary = format!("oom: out of memory ({limit}); {}", outcome.summary);
        }
    }
}

fn mebibytes(bytes: u64) -> String {
    if bytes % (1 << 20) == 0 {
        format!("{}M", bytes >> 20)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_no_cgroup_takes_become_resource_limits() {
        let limits = ResourceLimits {
            memory: Some(64 << 20),
            pids: Some(100),
            ..ResourceLimits::default()
        };
        let none = per_process(limits, (false, false));
        assert_eq!((none.data, none.nproc), (Some(64 << 20), Some(100)));
        let both = per_process(limits, (true, true));
        assert_eq!((both.data, both.nproc), (None, None));
        let own_nproc = ResourceLimits {
            nproc: Some(7),
            ..limits
        };
        assert_eq!(per_process(own_nproc, (false, true)).nproc, Some(7));
    }

    fn usage() -> Option<Box<proto::ResourceUsage>> {
        Some(Box::new(proto::ResourceUsage {
            cpu_user_ms: 1,
            cpu_system_ms: 1,
            peak_memory_bytes: 5,
            io_read_bytes: None,
            io_write_bytes: None,
            measured_by: UsageSource::Rusage,
        }))
    }

    #[test]
    fn an_oom_kill_marks_a_failed_run_and_the_cgroup_measures_it() {
        let mut outcome = Outcome::fail("exit code 137 from command 1");
        outcome.detail.usage = usage();
        let end = RunEnd {
            cpu_user_ms: Some(300),
            cpu_system_ms: Some(20),
            peak_memory_bytes: Some(64 << 20),
            oom_kills: 1,
            ..RunEnd::default()
        };
        let limits = ResourceLimits {
            memory: Some(64 << 20),
            ..ResourceLimits::default()
        };
        let mut lines = Vec::new();
        fold(&end, &limits, &mut outcome, &mut |event| {
            if let RunEvent::Line(line) = event {
                lines.push(line);
            }
        });
        assert!(outcome.detail.oom);
        assert!(
            outcome
                .summary
                .starts_with("oom: out of memory (limit_memory = 64M)"),
            "{}",
            outcome.summary
        );
        let usage = outcome.detail.usage.expect("usage");
        assert_eq!(
            (usage.cpu_user_ms, usage.peak_memory_bytes),
            (300, 64 << 20)
        );
        assert_eq!(usage.measured_by, UsageSource::Cgroup);
        assert_eq!(lines.len(), 1, "{lines:?}");
    }

    #[test]
    fn a_run_that_succeeded_despite_an_oom_kill_stays_a_success() {
        let mut outcome = Outcome {
            success: true,
            summary: "1 command ran".into(),
            detail: Default::default(),
        };
        let end = RunEnd {
            oom_kills: 1,
            forks_refused: 3,
            ..RunEnd::default()
        };
        let mut lines = 0;
        fold(&end, &ResourceLimits::default(), &mut outcome, &mut |_| {
            lines += 1
        });
        assert!(outcome.success && !outcome.detail.oom);
        assert_eq!(lines, 2);
    }
}
