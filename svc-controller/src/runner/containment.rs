//! How this host contains runs: asked of the runner binary itself
//! (`svc-runner --probe-containment`), which makes a run's namespaces as it would for a
//! run, with the privileges runners get from this process, and says how it went. Shown
//! by `--check` and logged at start-up, so that a host where runs fall back to process
//! groups (no CAP_SYS_ADMIN and no user namespaces) is known before a job escapes.

use std::path::Path;
use std::process::{Command, Stdio};

/// The probe's line: `namespaces: ...` or `fallback: ... (why)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Containment {
    pub line: String,
}

impl Containment {
    /// True when runs of commands get namespaces of their own (all of them, or all but
    /// the runs as root).
    pub fn namespaces(&self) -> bool {
        self.line.starts_with("namespaces:")
    }
}

/// Runs the probe with `runner`; a probe that cannot run is a fallback that says why.
pub fn probe(runner: &Path) -> Containment {
    let output = Command::new(runner)
        .arg("--probe-containment")
        .env_clear()
        .env("PATH", crate::runner::spawner::RUNNER_PATH_ENV)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let line = match output {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
        Ok(output) => format!(
            "fallback: the runner's probe failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ),
        Err(err) => format!(
            "fallback: cannot start {} to probe: {err}",
            runner.display()
        ),
    };
    Containment { line }
}
