//! cluster-scale: what PostgreSQL's processes cost, read from /proc (with `--pg-pid`):
//! their CPU time and their memory (proportional set size).

use std::collections::HashMap;

/// Linux's USER_HZ, the unit of /proc/<pid>/stat's times (100 on every architecture
/// Linux runs on today).
const CLK_TCK: f64 = 100.0;

/// PostgreSQL's processes: the postmaster and its children.
pub(crate) fn pg_pids(postmaster: u32) -> Vec<u32> {
    let mut pids = vec![postmaster];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if stat_fields(pid)
            .is_some_and(|f| f.get(1).and_then(|p| p.parse().ok()) == Some(postmaster))
        {
            pids.push(pid);
        }
    }
    pids
}

/// The fields of /proc/<pid>/stat after the command name (state first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// CPU seconds (user + system) used so far by process `pid`.
pub(crate) fn process_cpu(pid: u32) -> Option<f64> {
    let f = stat_fields(pid)?;
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Some((tick(11) + tick(12)) / CLK_TCK)
}

/// CPU seconds (user + system) used so far by each of PostgreSQL's processes.
pub(crate) struct PgCpu(HashMap<u32, f64>);

impl PgCpu {
    pub(crate) fn read(postmaster: Option<u32>) -> Option<PgCpu> {
        let pids = pg_pids(postmaster?);
        Some(PgCpu(
            pids.into_iter()
                .filter_map(|pid| Some((pid, process_cpu(pid)?)))
                .collect(),
        ))
    }

    /// CPU seconds used between `self` and `later`: by the processes alive at both
    /// reads, and all of it by those started meanwhile. A backend that ended meanwhile
    /// is left out (its time cannot be read any more), so a window keeps the
    /// connections it measures open to its end.
    fn since(&self, later: &PgCpu) -> f64 {
        later
            .0
            .iter()
            .map(|(pid, cpu)| cpu - self.0.get(pid).copied().unwrap_or(0.0))
            .sum()
    }
}

/// PostgreSQL's CPU seconds since `before` (with `--pg-pid`).
pub(crate) fn pg_cpu_since(postmaster: Option<u32>, before: &Option<PgCpu>) -> Option<f64> {
    Some(before.as_ref()?.since(&PgCpu::read(postmaster)?))
}

/// Proportional set size (KiB) of PostgreSQL's processes, and how many there are: the
/// memory the server costs, shared buffers counted once.
pub(crate) fn pg_pss(postmaster: Option<u32>) -> Option<(u64, usize)> {
    let pids = pg_pids(postmaster?);
    let mut total = 0;
    for pid in &pids {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else {
            continue;
        };
        if let Some(kb) = text
            .lines()
            .find_map(|line| line.strip_prefix("Pss:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        {
            total += kb;
        }
    }
    Some((total, pids.len()))
}
