//! What a run's processes used, from the resource usage of the runner's reaped
//! children (`getrusage(RUSAGE_CHILDREN)`): every command the runner waited for, every
//! process those waited for, and, through the run's init once it is reaped, every orphan
//! the init reaped.

use nix::sys::resource::{Usage, UsageWho, getrusage};
use nix::sys::time::TimeVal;
use proto::{ResourceUsage, UsageSource};

/// Bytes in one block of `ru_inblock` and `ru_oublock` (fixed by the kernel, whatever the
/// device's block size).
const BLOCK_BYTES: u64 = 512;

/// The usage of every child the runner has reaped so far. A runner serves one run and
/// starts with no children (forked ones too: a fork's counters begin at zero), so this is
/// the run's. `None` when the kernel refuses (it does not).
pub fn of_reaped_children() -> Option<ResourceUsage> {
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .ok()
        .map(|usage| from_rusage(&usage))
}

fn from_rusage(usage: &Usage) -> ResourceUsage {
    let count = |value: libc::c_long| u64::try_from(value).unwrap_or(0);
    ResourceUsage {
        cpu_user_ms: millis(usage.user_time()),
        cpu_system_ms: millis(usage.system_time()),
        // Kilobytes on Linux; the largest resident set of one process, never a sum.
        peak_memory_bytes: count(usage.max_rss()).saturating_mul(1024),
        io_read_bytes: Some(count(usage.block_reads()).saturating_mul(BLOCK_BYTES)),
        io_write_bytes: Some(count(usage.block_writes()).saturating_mul(BLOCK_BYTES)),
        measured_by: UsageSource::Rusage,
    }
}

fn millis(time: TimeVal) -> u64 {
    let seconds = u64::try_from(time.tv_sec()).unwrap_or(0);
    let micros = u64::try_from(time.tv_usec()).unwrap_or(0);
    seconds.saturating_mul(1000).saturating_add(micros / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reaped_childs_cpu_time_and_memory_are_counted() {
        let before = of_reaped_children().expect("usage");
        // A child that burns some CPU time and touches 32 MiB, then is reaped.
        let status = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; \
                 head -c 33554432 /dev/zero | tail -n 1 | wc -c >/dev/null",
            ])
            .status()
            .expect("run sh");
        assert!(status.success());
        let after = of_reaped_children().expect("usage");
        let cpu = |u: &ResourceUsage| u.cpu_user_ms + u.cpu_system_ms;
        assert!(cpu(&after) > cpu(&before), "{before:?} then {after:?}");
        // tail keeps the whole line it reads: at least the 32 MiB.
        assert!(
            after.peak_memory_bytes >= 32 << 20,
            "{} bytes",
            after.peak_memory_bytes
        );
        assert_eq!(after.measured_by, UsageSource::Rusage);
    }

    #[test]
    fn time_values_become_milliseconds() {
        assert_eq!(millis(TimeVal::new(2, 345_999)), 2345);
        assert_eq!(millis(TimeVal::new(-1, 0)), 0);
    }
}
