//! What the run's sandbox refused, told in the words of the configuration: the path a
//! command's error message names as denied, or a command's redirection into a path, when
//! it lies outside what the run may write, and the key that would allow it.

use std::path::{Path, PathBuf};

/// Why a write was refused, as the error message says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// `Permission denied` (EACCES): the run's sandbox, or the file's own permissions.
    Permission,
    /// `Read-only file system` (EROFS): a read-only mount, such as the system the
    /// packaged unit makes read-only.
    ReadOnly,
}

/// Verbs of the error messages of writes (`sh: cannot create`, `touch: cannot touch`,
/// `mkdir: cannot create directory`, `cp: cannot create regular file`, `rm: cannot
/// remove`, `tee: …`, `mv: cannot move`, `ln: failed to create symbolic link`).
const WRITE_WORDS: [&str; 6] = [
    "cannot create",
    "cannot touch",
    "cannot remove",
    "cannot move",
    "failed to create",
    "tee: ",
];

/// Shells, whose `<shell>: [line N: ]<path>: Permission denied` is a redirection's.
const SHELLS: [&str; 6] = ["sh", "bash", "dash", "ash", "ksh", "zsh"];

/// The absolute path a command's error line names as refused for writing, and why:
/// `sh: 1: cannot create /srv/www/index.html: Permission denied`, `touch: cannot touch
/// '/srv/x': Read-only file system`, `bash: /srv/x: Permission denied` (a redirection).
/// `None` for any other line.
pub fn denied_path(line: &str) -> Option<(PathBuf, Denial)> {
    let line = line.trim_end();
    let (before, denial) = if let Some(before) = line.strip_suffix(": Permission denied") {
        (before, Denial::Permission)
    } else if let Some(before) = line.strip_suffix(": Read-only file system") {
        (before, Denial::ReadOnly)
    } else {
        return None;
    };
    // The path is in the last `: `-separated part; a shell's redirection error is
    // `<shell>: [<line>: ]<path>`, every other a verb then the path, maybe quoted.
    let last = before.rsplit(": ").next().unwrap_or(before);
    let program = before.split(':').next().unwrap_or_default();
    let program = program.rsplit('/').next().unwrap_or(program);
    let is_write = denial == Denial::ReadOnly
        || WRITE_WORDS.iter().any(|word| before.contains(word))
        || (SHELLS.contains(&program) && last.starts_with('/'));
    if !is_write {
        return None;
    }
    let start = last.find('/')?;
    let path: String = last[start..]
        .chars()
        .take_while(|c| !matches!(c, '\'' | '"' | '‘' | '’' | '`'))
        .collect();
    let path = path.trim_end();
    (!path.is_empty()).then(|| (PathBuf::from(path), denial))
}

/// Whether `path` is `writable` or below one of its paths.
pub fn is_writable(path: &Path, writable: &[PathBuf]) -> bool {
    writable.iter().any(|allowed| path.starts_with(allowed))
}

/// The directory to name in `write_paths` for a write to `path`: the directory it is
/// created in.
pub fn suggested_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|parent| *parent != Path::new("/"))
        .unwrap_or(path)
}

/// The log line that says what to change: the path refused, the key that allows it in
/// `section` (`[job "deploy"]`), and for a read-only file system the unit's drop-in.
pub fn advice(path: &Path, denial: Denial, section: &str) -> String {
    let dir = suggested_dir(path).display();
    let path = path.display();
    let mut text = format!(
        "--- sandbox: {path} is outside what this run may write (its working directory, \
         TMPDIR and write_paths): to let the job write there, add `write_paths = {dir}` to \
         {section}, or set `sandbox = false` in it"
    );
    if denial == Denial::ReadOnly {
        text.push_str(&format!(
            "; the file system is read-only here: under the packaged unit, also \
             `ReadWritePaths={dir}` in a drop-in (`systemctl edit svc`)"
        ));
    }
    text
}

/// The absolute paths `command` redirects its output into (`> /srv/x`, `>>/srv/x`,
/// `2> /var/x`), but the devices (`/dev/null`, `/dev/stderr`, …) and descriptors
/// (`>&2`). What a shell would expand (`$VAR`, quotes) is not looked into.
pub fn redirect_targets(command: &str) -> Vec<PathBuf> {
    let mut targets = Vec::new();
    let mut rest = command;
    while let Some(at) = rest.find('>') {
        let after = rest[at + 1..].trim_start_matches('>');
        rest = after;
        if after.starts_with('&') || after.starts_with('|') {
            continue;
        }
        let target: String = after
            .trim_start()
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | ')'))
            .collect();
        if target.starts_with('/') && !target.starts_with("/dev/") && !target.starts_with("/proc/")
        {
            targets.push(PathBuf::from(target));
        }
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_refusals_name_their_path() {
        let cases = [
            (
                "sh: 1: cannot create /srv/www/index.html: Permission denied",
                "/srv/www/index.html",
                Denial::Permission,
            ),
            (
                "bash: line 1: /srv/www/index.html: Permission denied",
                "/srv/www/index.html",
                Denial::Permission,
            ),
            (
                "bash: /srv/x: Read-only file system",
                "/srv/x",
                Denial::ReadOnly,
            ),
            (
                "touch: cannot touch '/srv/www/a b': Permission denied",
                "/srv/www/a b",
                Denial::Permission,
            ),
            (
                "mkdir: cannot create directory ‘/srv/new’: Read-only file system",
                "/srv/new",
                Denial::ReadOnly,
            ),
            (
                "cp: cannot create regular file '/opt/app/bin': Permission denied",
                "/opt/app/bin",
                Denial::Permission,
            ),
            (
                "tee: /var/www/out.txt: Permission denied",
                "/var/www/out.txt",
                Denial::Permission,
            ),
        ];
        for (line, path, denial) in cases {
            assert_eq!(
                denied_path(line),
                Some((PathBuf::from(path), denial)),
                "{line}"
            );
        }
    }

    #[test]
    fn reads_and_other_lines_are_not_taken_for_refused_writes() {
        for line in [
            "cat: /etc/shadow: Permission denied",
            "ls: cannot open directory '/root': Permission denied",
            "grep: /var/secret: Permission denied",
            "everything is fine",
            "curl: (7) Failed to connect: Connection refused",
            "Permission denied",
        ] {
            assert_eq!(denied_path(line), None, "{line}");
        }
    }

    #[test]
    fn the_advice_names_the_directory_and_the_keys() {
        let text = advice(
            Path::new("/srv/www/index.html"),
            Denial::Permission,
            "[job \"deploy\"]",
        );
        assert!(
            text.contains("`write_paths = /srv/www` to [job \"deploy\"]"),
            "{text}"
        );
        assert!(text.contains("`sandbox = false`"), "{text}");
        assert!(!text.contains("ReadWritePaths"), "{text}");
        let text = advice(Path::new("/srv"), Denial::ReadOnly, "[job \"x\"]");
        assert!(text.contains("`write_paths = /srv`"), "{text}");
        assert!(text.contains("ReadWritePaths=/srv"), "{text}");
        assert!(is_writable(
            Path::new("/srv/www/a"),
            &[PathBuf::from("/srv/www")]
        ));
        assert!(!is_writable(
            Path::new("/srv/wwwx"),
            &[PathBuf::from("/srv/www")]
        ));
    }

    #[test]
    fn redirections_into_absolute_paths_are_found() {
        assert_eq!(
            redirect_targets("echo hi > /srv/www/index.html; date >>/var/log/x 2>&1"),
            [
                PathBuf::from("/srv/www/index.html"),
                PathBuf::from("/var/log/x")
            ]
        );
        assert_eq!(
            redirect_targets("cmd 2>/dev/null >&2 > relative | tee x"),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            redirect_targets("(echo a >/opt/y)"),
            [PathBuf::from("/opt/y")]
        );
    }
}
