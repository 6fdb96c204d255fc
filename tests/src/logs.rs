//! Job log files as `docs/formats.md` describes them:
//! `var/log/svc/<kind>/<id>/<id>.<counter>.<status>`, one timestamped line per line.

use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;

/// Length of the `YYYY-MM-DD HH:MM:SS ` prefix of every log line.
const STAMP_LEN: usize = 20;

/// One log file found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Run number.
    pub counter: u64,
    /// `started`, `success` or `fail` (whatever the file name says).
    pub status: String,
    /// Full path of the file.
    pub path: PathBuf,
}

impl LogFile {
    /// Parses a file name `<id>.<counter>.<status>`; `None` when it is not a log of `id`,
    /// or not a log yet (`<id>.<counter>.creating`: a log's first line, before the log
    /// gets its name).
    pub fn from_name(dir: &Path, id: &str, file_name: &str) -> Option<LogFile> {
        let rest = file_name.strip_prefix(id)?.strip_prefix('.')?;
        let (counter, status) = rest.split_once('.')?;
        if status == "creating" {
            return None;
        }
        Some(LogFile {
            counter: counter.parse().ok()?,
            status: status.to_owned(),
            path: dir.join(file_name),
        })
    }

    /// The whole file as text (lossy for invalid UTF-8); empty when it vanished meanwhile.
    pub fn content(&self) -> String {
        std::fs::read(&self.path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// The first line (the run's header: who or what started it), without its newline.
    pub fn first_line(&self) -> String {
        self.content()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// The lines of the file with their timestamps split off.
    pub fn lines(&self) -> Vec<LogLine> {
        parse_log_lines(&self.content())
    }

    /// The text of the lines (timestamps removed).
    pub fn texts(&self) -> Vec<String> {
        self.lines().into_iter().map(|line| line.text).collect()
    }

    /// Panics, printing the file, unless the run ended with `status`.
    pub fn assert_status(&self, status: &str) {
        assert_eq!(
            self.status,
            status,
            "run {} should have ended with {status}; {} holds:\n{}",
            self.counter,
            self.path.display(),
            self.content()
        );
    }
}

/// A line of a log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The leading timestamp, `None` when the line does not start with one.
    pub time: Option<NaiveDateTime>,
    /// The text after the timestamp and its space (the whole line when there is none).
    pub text: String,
}

/// Splits a log into lines and each line into its timestamp and text.
pub fn parse_log_lines(content: &str) -> Vec<LogLine> {
    content
        .lines()
        .map(|line| match split_stamp(line) {
            Some((time, text)) => LogLine {
                time: Some(time),
                text: text.to_owned(),
            },
            None => LogLine {
                time: None,
                text: line.to_owned(),
            },
        })
        .collect()
}

/// Checks that every line of `content` starts with `YYYY-MM-DD HH:MM:SS ` (the regular
/// expression `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d `); the error names the first bad line.
pub fn check_timestamps(content: &str) -> Result<(), String> {
    for (number, line) in content.lines().enumerate() {
        if split_stamp(line).is_none() {
            return Err(format!(
                "line {} does not start with a timestamp: {line:?}",
                number + 1
            ));
        }
    }
    Ok(())
}

/// `Some((time, text))` when `line` starts with a well-formed timestamp and a space.
fn split_stamp(line: &str) -> Option<(NaiveDateTime, &str)> {
    let stamp = line.get(..STAMP_LEN)?;
    let shape_ok = stamp.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        10 | 19 => b == b' ',
        13 | 16 => b == b':',
        _ => b.is_ascii_digit(),
    });
    if !shape_ok {
        return None;
    }
    let time = NaiveDateTime::parse_from_str(&stamp[..STAMP_LEN - 1], "%Y-%m-%d %H:%M:%S").ok()?;
    Some((time, &line[STAMP_LEN..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_lines() {
        let file = LogFile::from_name(Path::new("/x"), "a_b", "a_b.12.success").expect("a log");
        assert_eq!(file.counter, 12);
        assert_eq!(file.status, "success");
        assert!(LogFile::from_name(Path::new("/x"), "a", "a_b.1.fail").is_none());
        assert!(LogFile::from_name(Path::new("/x"), "a", "a.x.fail").is_none());

        let text = "2026-11-20 23:30:00 $ echo hi\n2026-11-20 23:30:00 hi\n";
        assert!(check_timestamps(text).is_ok());
        let lines = parse_log_lines(text);
        assert_eq!(lines[1].text, "hi");
        assert!(check_timestamps("2026-11-20 23:30:00 ok\nhi\n").is_err());
        assert!(check_timestamps("2026-11-20T23:30:00 no\n").is_err());
    }
}
