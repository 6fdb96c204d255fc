//! Looking at processes through `/proc`, to check that nothing a run started is left behind.
//!
//! PID 1 of a test container does not always reap orphans, so a process that has exited
//! may stay a zombie for a while; every helper here treats a zombie as gone.

use std::path::Path;

/// The one-letter state of `pid` from `/proc/<pid>/stat` (`R`, `S`, `Z`, ...), `None` when
/// there is no such process.
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything; the state follows the
    // last closing parenthesis.
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// The command line of `pid` with its arguments joined by spaces; `None` when there is no
/// such process (or it is a zombie, whose command line is empty).
pub fn cmdline(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    if raw.is_empty() {
        return None;
    }
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|part| !part.is_empty())
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect();
    Some(parts.join(" "))
}

/// The parent pid of `pid` (from `/proc/<pid>/stat`); `None` when there is no such
/// process.
pub fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// The command name of `pid` (`/proc/<pid>/comm`, what `ps -o comm` shows).
pub fn comm(pid: i32) -> Option<String> {
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(name.trim_end().to_string())
}

/// Live descendants of `root` whose command name is `name`, with their command lines.
pub fn descendants_named(root: i32, name: &str) -> Vec<(i32, String)> {
    let descends = |mut pid: i32| {
        while let Some(up) = parent(pid) {
            if up == root {
                return true;
            }
            if up <= 1 {
                return false;
            }
            pid = up;
        }
        false
    };
    find_by_cmdline("")
        .into_iter()
        .filter(|(pid, _)| comm(*pid).as_deref() == Some(name) && descends(*pid))
        .collect()
}

/// True when `pid` exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    matches!(state(pid), Some(s) if s != 'Z' && s != 'X')
}

/// Live processes whose whole command line is `command` (arguments joined by spaces): the
/// program itself, not a shell whose script names it. A test that waits for a command
/// started inside `if ...; then ...; fi` needs this: the shell matches `find_by_cmdline`
/// before it has run what comes first.
pub fn find_by_exact_cmdline(command: &str) -> Vec<(i32, String)> {
    find_by_cmdline(command)
        .into_iter()
        .filter(|(_, cmd)| cmd == command)
        .collect()
}

/// `base` (a command whose last word is a number, such as `sleep 300.42`) made unique to
/// this test process: the process ID, in 7 digits, appended to the number. Another test
/// suite running on the same host at the same time then neither finds nor kills (a
/// test's reaper) the processes of this one.
pub fn marker(base: &str) -> String {
    format!("{base}{:07}", std::process::id())
}

/// Live (non-zombie) processes, other than this one, whose command line contains `marker`.
pub fn find_by_cmdline(marker: &str) -> Vec<(i32, String)> {
    let own = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir(Path::new("/proc")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == own || !is_alive(pid) {
            continue;
        }
        if let Some(cmd) = cmdline(pid)
            && cmd.contains(marker)
        {
            found.push((pid, cmd));
        }
    }
    found
}
