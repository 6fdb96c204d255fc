//! Test harness: starts the real `svc-controller` binary on a temporary `dir_base` and talks
//! to it over HTTP, signals and the files it writes.
//!
//! The pieces:
//!
//! - [`binaries()`]: builds (once per test process) and locates `svc-controller` and
//!   `svc-runner` in the target directory the tests were built into;
//! - [`TestService`] / [`TestServiceBuilder`]: a configuration tree in a temporary
//!   directory, the controller process started on it, and typed helpers for the HTTP API,
//!   the log files and the state files;
//! - [`wait_until`] / [`wait_for`]: bounded polling, the only way tests wait;
//! - [`hmac_sha256_hex`] / [`hmac_sha1_hex`]: request signatures;
//! - [`proc`]: looking for processes by command line, for "nothing is left running" checks;
//! - [`logs`]: reading log files in the format of `docs/formats.md`;
//! - [`sse`]: reading server-sent event streams as they come;
//! - [`prom`]: the metrics read with a real OpenMetrics parser, and `promtool`;
//! - [`sink`]: a loopback HTTP receiver of what the controller sends out (webhooks,
//!   health pings);
//! - [`web`]: plain HTTP for the login and rights tests (no cookie jar, no redirects);
//! - [`postgres`]: a throwaway PostgreSQL server on a free loopback port, for the cluster
//!   tests.

mod binaries;
pub mod logs;
pub mod postgres;
pub mod proc;
pub mod prom;
pub mod raw_http;
mod service;
mod service_api;
mod sign;
pub mod sink;
pub mod sse;
pub mod ticks;
mod wait;
pub mod web;

pub use binaries::{Binaries, binaries};
pub use logs::{LogFile, LogLine, check_timestamps, parse_log_lines};
pub use service::{TestService, TestServiceBuilder};
pub use service_api::{ApiResponse, send_until_queued};
pub use sign::{fresh_epoch, hmac_sha1_hex, hmac_sha256_hex, standard_signature};
pub use wait::{POLL, wait_for, wait_until};

/// Exit status the controller uses for an invalid configuration (`EX_CONFIG`).
pub const EX_CONFIG: i32 = 78;

/// Limit used by the tests for anything that should happen within a few seconds.
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Standard output then standard error of a finished process, as text.
pub fn output_text(output: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// True when the tests run as root. Otherwise prints that `test` is skipped: tests that
/// switch users or change capabilities need root (CI runs as root).
pub fn running_as_root(test: &str) -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        eprintln!("skipped: {test} needs root");
    }
    root
}

/// True when the kernel has Landlock (any ABI). Otherwise prints that `test` is skipped:
/// the sandbox's tests need it (Debian 12's and RHEL 9's kernels have it).
pub fn has_landlock(test: &str) -> bool {
    let abi = proto::sandbox::kernel_abi();
    if abi.is_none() {
        eprintln!("skipped: {test} needs a kernel with Landlock");
    }
    abi.is_some()
}

/// The capability bounding set of `packaging/svc.service` (`CapabilityBoundingSet=`),
/// with its `NoNewPrivileges=yes`, as `setpriv` arguments for
/// [`TestServiceBuilder::wrapper`]: the controller runs as root with CAP_SETUID,
/// CAP_SETGID, CAP_KILL, CAP_CHOWN, and CAP_SYS_ADMIN with CAP_SYS_CHROOT for the
/// namespaces of each run, only (`tests/work_dir.rs` checks it against the unit).
pub fn unit_like_wrapper() -> Vec<&'static str> {
    vec![
        "setpriv",
        "--no-new-privs",
        "--bounding-set=-all,+setuid,+setgid,+kill,+chown,+sys_admin,+sys_chroot",
        "--inh-caps=-all",
        "--",
    ]
}

/// The unit's bounding set less CAP_SYS_ADMIN and CAP_SYS_CHROOT, as a drop-in that
/// takes them back leaves it: runners make their namespaces in a user namespace, and
/// runs as root fall back to process groups.
pub fn without_sys_admin_wrapper() -> Vec<&'static str> {
    vec![
        "setpriv",
        "--no-new-privs",
        "--bounding-set=-all,+setuid,+setgid,+kill,+chown",
        "--inh-caps=-all",
        "--",
    ]
}

/// True when a test under [`unit_like_wrapper`] can run: as root, with `setpriv`
/// (util-linux) present. Otherwise prints that `test` is skipped.
pub fn can_run_unit_like(test: &str) -> bool {
    if !running_as_root(test) {
        return false;
    }
    let found = std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        found,
        "{test} needs `setpriv` from util-linux (apt-get install util-linux)"
    );
    true
}

/// Text of a `[job "<name>"]` section with `lines` in it, each `key = value` with the value
/// written as the job should get it (quoted here as git-config needs), or a bare `key`.
pub fn job_section(name: &str, lines: &[&str]) -> String {
    let mut text = format!("[job \"{name}\"]\n");
    for line in lines {
        match line.split_once('=') {
            Some((key, value)) => {
                text.push_str(&format!(
                    "{} = {}",
                    key.trim(),
                    svc_controller::config::quote_value(value.trim())
                ));
            }
            None => text.push_str(line),
        }
        text.push('\n');
    }
    text
}

/// Writes an executable shell script atomically (a temporary file renamed over `path`), so
/// a process exec'ing `path` meanwhile sees either the old or the new script, never half.
pub fn write_script(path: &std::path::Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body).unwrap_or_else(|err| panic!("write {}: {err}", tmp.display()));
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|err| panic!("chmod {}: {err}", tmp.display()));
    std::fs::rename(&tmp, path).unwrap_or_else(|err| panic!("rename to {}: {err}", path.display()));
}

/// Parses an RFC 3339 time from a JSON string value; `None` when absent or malformed.
pub fn rfc3339(value: &serde_json::Value) -> Option<chrono::DateTime<chrono::Utc>> {
    let text = value.as_str()?;
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|time| time.with_timezone(&chrono::Utc))
}

/// How many times a start moves to another free port when another process took the one
/// it chose before it could bind it ([`free_port`] cannot hold a port for its caller).
pub const PORT_COLLISIONS: u32 = 5;

/// Whether a server's output says it could not listen because its port was taken.
pub fn lost_its_port(output: &str) -> bool {
    output.contains("Address already in use")
}

/// A loopback port nothing listened on a moment ago, and never given before by this
/// process: the kernel hands a port it just freed to the next caller as readily as any,
/// so two tests asking at once could get one port, and the second to bind lose it. A
/// port another process takes meanwhile stays possible; the starts that bind it retry.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("find a free loopback port");
        if given.insert(port) {
            return port;
        }
    }
}
