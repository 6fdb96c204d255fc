//! Finding, signalling and reaping what is left of a command's process tree: process groups
//! and the orphans re-parented to the runner (a child subreaper), read from `/proc`.

use std::collections::BTreeSet;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpgrp, getpid};

/// Pause between two looks at `/proc` while waiting for processes to go away.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Most rounds of kill-and-reap a sweep does before giving up.
const SWEEP_ROUNDS: usize = 100;

/// The fields of `/proc/<pid>/stat` the runner needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Process id (field 1).
    pub pid: i32,
    /// State letter (field 3), `Z` for a zombie.
    pub state: char,
    /// Parent process id (field 4).
    pub ppid: i32,
    /// Process group id (field 5).
    pub pgrp: i32,
}

/// Parses the content of `/proc/<pid>/stat`. The command name (field 2) is in parentheses
/// and may itself contain spaces and parentheses, so fields are read after the last `)`.
pub fn parse_stat(content: &str) -> Option<ProcStat> {
    let open = content.find('(')?;
    let close = content.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = content[..open].trim().parse().ok()?;
    let mut fields = content[close + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat {
        pid,
        state,
        ppid,
        pgrp,
    })
}

/// Every process whose parent is `parent`, read from `/proc`. For the runner itself the
/// kernel's own list of its children is read (`/proc/self/task/*/children`, which also
/// holds orphans re-parented to it as subreaper) instead of the stat of every process on
/// the host; the full scan remains for other parents and kernels without that list.
pub fn children_of(parent: i32) -> Vec<ProcStat> {
    if parent == getpid().as_raw()
        && let Some(pids) = own_children()
    {
        return pids
            .into_iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .filter_map(|content| parse_stat(&content))
            .filter(|stat| stat.ppid == parent)
            .collect();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter_map(|content| parse_stat(&content))
        .filter(|stat| stat.ppid == parent)
        .collect()
}

/// Pids the kernel lists as children of this process's threads; `None` when the kernel
/// does not offer the list (CONFIG_PROC_CHILDREN).
fn own_children() -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut pids = Vec::new();
    let mut listed = false;
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            listed = true;
            pids.extend(
                text.split_whitespace()
                    .filter_map(|pid| pid.parse::<i32>().ok()),
            );
        }
    }
    listed.then_some(pids)
}

/// True while process group `pgid` has at least one member (zombies included).
pub fn group_alive(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// Sends `signal` to process group `pgid`; false when the group is gone.
pub fn signal_group(pgid: i32, signal: Signal) -> bool {
    if pgid <= 1 || pgid == getpgrp().as_raw() {
        return false;
    }
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(err) => {
            eprintln!("svc-runner: cannot send {signal} to process group {pgid}: {err}");
            false
        }
    }
}

/// Reaps the runner's children that are zombies, except the pids in `owned` (children
/// tokio waits for itself). Returns how many were reaped.
pub fn reap_zombies(owned: &BTreeSet<i32>) -> usize {
    let me = getpid().as_raw();
    children_of(me)
        .into_iter()
        .filter(|child| child.state == 'Z' && !owned.contains(&child.pid))
        .filter(|child| reap(child.pid))
        .count()
}

/// Non-blocking `waitpid` on one specific pid; true when it was reaped (or already gone).
fn reap(pid: i32) -> bool {
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(nix::sys::wait::WaitStatus::StillAlive) => false,
        Ok(_) | Err(Errno::ECHILD) => true,
        Err(_) => false,
    }
}

/// Kills and reaps every child of the runner except those in `owned`: orphans of the
/// command tree re-parented to the runner, including ones that left the command's process
/// group or session. Each gets SIGKILL, and so does its process group when it leads one.
/// Only the listed pids are waited for; never `waitpid(-1)`. Returns the number of distinct
/// processes that were killed or reaped.
pub async fn sweep(owned: &BTreeSet<i32>) -> usize {
    let me = getpid().as_raw();
    let my_group = getpgrp().as_raw();
    let mut seen = BTreeSet::new();
    for _ in 0..SWEEP_ROUNDS {
        let orphans: Vec<ProcStat> = children_of(me)
            .into_iter()
            .filter(|child| !owned.contains(&child.pid))
            .collect();
        if orphans.is_empty() {
            break;
        }
        for orphan in &orphans {
            seen.insert(orphan.pid);
            if orphan.state != 'Z' {
                if orphan.pgrp == orphan.pid && orphan.pgrp != my_group {
                    signal_group(orphan.pgrp, Signal::SIGKILL);
                }
                match kill(Pid::from_raw(orphan.pid), Signal::SIGKILL) {
                    Ok(()) | Err(Errno::ESRCH) => {}
                    Err(err) => eprintln!("svc-runner: cannot kill pid {}: {err}", orphan.pid),
                }
            }
        }
        // Every orphan gets its waitpid: count, do not short-circuit.
        let left = orphans.iter().filter(|orphan| !reap(orphan.pid)).count();
        if left > 0 {
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
    seen.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_children_lists_a_spawned_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let pid = i32::try_from(child.id()).expect("pid");
        let me = getpid().as_raw();
        let found = children_of(me).iter().any(|stat| stat.pid == pid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            found,
            "the child {pid} is listed among the children of {me}"
        );
    }

    #[test]
    fn parses_plain_stat() {
        let stat =
            parse_stat("1234 (sleep) S 1200 1234 1200 0 -1 4194304 90 0 0 0").expect("parses");
        assert_eq!(
            stat,
            ProcStat {
                pid: 1234,
                state: 'S',
                ppid: 1200,
                pgrp: 1234
            }
        );
    }

    #[test]
    fn command_name_with_spaces_and_parens() {
        let stat = parse_stat("77 (a) b (c) Z) Z 5 9 9 0 -1").expect("parses");
        assert_eq!(stat.pid, 77);
        assert_eq!(stat.state, 'Z');
        assert_eq!(stat.ppid, 5);
        assert_eq!(stat.pgrp, 9);
    }

    #[test]
    fn garbage_is_refused() {
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("12 sleep S 1 2"), None);
        assert_eq!(parse_stat("12 (x) S"), None);
        assert_eq!(parse_stat(") 12 (x S 1 2"), None);
    }

    #[test]
    fn own_stat_is_readable() {
        let content = std::fs::read_to_string("/proc/self/stat").expect("proc");
        let stat = parse_stat(&content).expect("parses");
        assert_eq!(stat.pid, std::process::id() as i32);
        assert_eq!(stat.ppid, nix::unistd::getppid().as_raw());
    }

    #[test]
    fn refuses_to_signal_own_group_or_init() {
        assert!(!signal_group(getpgrp().as_raw(), Signal::SIGCONT));
        assert!(!signal_group(1, Signal::SIGCONT));
        assert!(!signal_group(0, Signal::SIGCONT));
    }
}
