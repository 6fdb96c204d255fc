//! Watches a sandboxed run's output for a write its sandbox refused, so that a failed
//! run's log ends with the path and the key that would allow it
//! ([`crate::security::sandbox_hint`]).

use std::path::PathBuf;

use crate::security::sandbox_hint::{self, Denial};

/// Most bytes of one output line kept while its end has not come: error messages are
/// short, and a longer line is not one of them.
const LINE_MAX: usize = 4096;

/// The output of one run, line by line, and the last refused write it showed outside
/// the run's writable paths.
#[derive(Debug)]
pub(super) struct SandboxWatch {
    writable: Vec<PathBuf>,
    partial: Vec<u8>,
    /// The line under way is longer than [`LINE_MAX`]: skipped to its end.
    overlong: bool,
    refused: Option<(PathBuf, Denial)>,
}

impl SandboxWatch {
    /// A watch of a run that may write below `writable` only.
    pub(super) fn new(writable: &[String]) -> SandboxWatch {
        SandboxWatch {
            writable: writable.iter().map(PathBuf::from).collect(),
            partial: Vec::new(),
            overlong: false,
            refused: None,
        }
    }

    /// Takes in the next bytes of the run's output.
    pub(super) fn output(&mut self, data: &[u8]) {
        for chunk in data.split_inclusive(|b| *b == b'\n') {
            if self.overlong || self.partial.len() + chunk.len() > LINE_MAX {
                // Too long to be an error message: skipped to its end.
                self.overlong = true;
                self.partial.clear();
            } else {
                self.partial.extend_from_slice(chunk);
            }
            if chunk.ends_with(b"\n") {
                if !self.overlong {
                    self.line();
                }
                self.partial.clear();
                self.overlong = false;
            }
        }
    }

    fn line(&mut self) {
        let line = String::from_utf8_lossy(&self.partial);
        if let Some((path, denial)) = sandbox_hint::denied_path(&line)
            && !sandbox_hint::is_writable(&path, &self.writable)
        {
            self.refused = Some((path, denial));
        }
    }

    /// The advice for the last refused write, for `[job "<name>"]`.
    pub(super) fn advice(mut self, name: &str) -> Option<String> {
        if !self.partial.is_empty() && !self.overlong {
            self.line();
        }
        let (path, denial) = self.refused?;
        Some(sandbox_hint::advice(
            &path,
            denial,
            &format!("[job \"{name}\"]"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_write_outside_the_writable_paths_is_advised_on() {
        let mut watch = SandboxWatch::new(&["/var/lib/svc/job/deploy".to_string()]);
        watch.output(b"building\nsh: 1: cannot create /srv/www/ind");
        watch.output(b"ex.html: Permission denied\nsh: 1: cannot create ");
        watch.output(b"/var/lib/svc/job/deploy/x: Permission denied\nmore");
        let advice = watch.advice("deploy").expect("advice");
        assert!(
            advice.contains("/srv/www/index.html is outside")
                && advice.contains("`write_paths = /srv/www` to [job \"deploy\"]"),
            "{advice}"
        );
        let mut watch = SandboxWatch::new(&["/w".to_string()]);
        watch.output(b"sh: 1: cannot create /w/x: Permission denied\n");
        assert_eq!(watch.advice("a"), None, "inside its paths: not the sandbox");
        let mut watch = SandboxWatch::new(&[]);
        watch.output(&[b'x'; 5000]);
        watch.output(b"sh: 1: cannot create /srv/y: Permission denied\n");
        assert_eq!(watch.advice("a"), None, "the end of an overlong line");
    }
}
