//! Values the configuration refuses because they would weaken the service rather than
//! because they do not parse: a secret made only of white space, and a `dir_public` that
//! would hand the service's own files (its secret, configuration, logs, runs) to anyone
//! who asks for them over HTTP.

use std::path::{Component, Path, PathBuf};

use proto::redact::Secret;

use super::section_reader::Reader;
use crate::config::MainConfig;

/// Refuses a secret with no character other than white space: as easy to guess as none,
/// and most likely a slip (a value quoted by mistake). The message never quotes the
/// value.
pub(super) fn check_secret_not_blank(value: &str) -> Result<(), String> {
    if !value.is_empty() && value.trim().is_empty() {
        return Err(
            "a secret made only of white space is refused: it is as easy to guess \
                    as none; give a long random value"
                .into(),
        );
    }
    Ok(())
}

impl Reader<'_> {
    /// A secret key that may be empty (`None`: unset); a blank one is an error.
    pub(super) fn secret(&mut self, key: &str) -> Option<Secret> {
        let entry = self.first(key)?;
        let value = entry.value.as_deref().unwrap_or_default();
        if let Err(message) = check_secret_not_blank(value) {
            self.fail(entry, &message);
            return None;
        }
        (!value.is_empty()).then(|| Secret::new(value.to_string()))
    }
}

/// `path` with its `.` and `..` parts taken out as written (a `..` of `/` stays `/`), so
/// that `public/..` is compared as the directory it names.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// What `dir_public` must stay clear of, each with what it is for the message: served,
/// each would give away the secret (the state directory), the configuration with the
/// users' password hashes, the logs or the runs' files.
fn served_never(main: &MainConfig) -> Vec<(PathBuf, &'static str)> {
    let mut guarded = vec![
        (main.dir_base.join("etc"), "configuration directory"),
        (main.dir_state(), "state directory, which holds the secret"),
        (main.dir_logs(), "log directory"),
        (main.dir_runtime(), "runner socket's directory"),
        (main.dir_bodies(), "request bodies of the runs"),
        (main.dir_run_tmp(), "temporary directories of the runs"),
    ];
    let main_dir = main.dir_main_file();
    // A main file directly in `/` leaves no directory of its own to guard: `/` itself is
    // refused anyway.
    if main_dir.parent().is_some() {
        guarded.push((main_dir, "directory of the main configuration file"));
    }
    guarded
}

/// Refuses a `dir_public` that is `/`, or is, holds or lies below one of the service's
/// own directories ([`served_never`]), compared as written and, when both exist, as
/// resolved (symbolic links followed).
pub(super) fn check_dir_public(main: &MainConfig, dir: &Path) -> Result<(), String> {
    let written = lexical(dir);
    let real = std::fs::canonicalize(dir).ok();
    let is_root = |p: &Path| p.parent().is_none() && p.has_root();
    if is_root(&written) || real.as_deref().is_some_and(is_root) {
        return Err(
            "dir_public must not be /: it would serve every file of the machine, \
                    the service's secret among them; give it a directory of its own"
                .into(),
        );
    }
    let overlaps = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    for (guarded, what) in served_never(main) {
        let guarded_written = lexical(&guarded);
        let guarded_real = std::fs::canonicalize(&guarded).ok();
        let hit = overlaps(&written, &guarded_written)
            || matches!((&real, &guarded_real), (Some(a), Some(b)) if overlaps(a, b));
        if hit {
            return Err(format!(
                "dir_public {} would serve the {what} ({}) to anyone: give it a directory \
                 of its own, outside the service's configuration, state, logs and runs",
                dir.display(),
                guarded.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "guards_tests.rs"]
mod tests;
