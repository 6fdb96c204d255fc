//! The run history of each job: one JSON line per finished run in
//! `$dir_base/var/log/svc/history/<kind>/<id>.jsonl`, which outlives the run's log
//! (`log_retention` deletes logs, never this). Reads see the last [`KEEP`] runs; the
//! file is cut back to them by an atomic rewrite once it is over [`COMPACT_AT_BYTES`]
//! (judged by its size, so that an append never reads the file).
//!
//! Appends come from the engine's syncer (one write and one data sync per file and
//! round); a crash may lose the lines of runs whose ends were not synced yet, never
//! tear the file for a reader: a line that does not parse (a write cut short) is
//! skipped, and the next append starts on a line of its own.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead as _, BufReader, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::state::RunStatus;
use crate::util::fsutil;

/// Runs a history keeps per job, whatever `log_retention` says.
pub const KEEP: usize = 1000;
/// Size over which a history file is rewritten with its last [`KEEP`] runs: at least
/// twice [`KEEP`] records of [`MAX_SUMMARY`] and their fields.
pub const COMPACT_AT_BYTES: u64 = 1024 * 1024;
/// Longest summary a record keeps, in bytes (a longer one is cut at a character).
pub const MAX_SUMMARY: usize = 200;
/// Most runs one read returns.
pub const MAX_PAGE: usize = KEEP;

/// One finished run, as the history keeps it and `/svc/api/job_exec/runs` sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub counter: u64,
    /// How it ended; the log name says `success` or `fail` only.
    pub status: RunStatus,
    /// What started it: `timer`, `webhook`, `api` (an upstream-style trigger call),
    /// `manual` (run now), `retry`, `catch-up`, `chain`; `unknown` for a run the
    /// controller's death interrupted.
    pub trigger: String,
    /// The code host's delivery ID, for a webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
    /// For a retry, a chained run or a catch-up: the run or slot it follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// 1, then 2 for the first retry, and so on.
    pub attempt: u32,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub duration_ms: u64,
    /// Exit code of the last command that ran, when it exited by itself.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Signal that ended the last command that ran.
    #[serde(default)]
    pub signal: Option<i32>,
    /// Status of a JobHttp's response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The end's one line (`exit code 2 from command 1`, `HTTP 503`, ...).
    pub summary: String,
    /// CPU time, peak memory and I/O of the run's processes (a run of commands whose
    /// runner reported them; absent from older lines). Boxed, as in the run's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<proto::ResourceUsage>>,
    /// Why a failed run failed, when it was not its commands' doing: `oom` (the kernel
    /// killed a process of it at its memory limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RunRecord {
    /// The record of run `counter`, whose end its runner never reported (the controller
    /// died, or the run's task ended first): what started it and how its commands
    /// ended are not known.
    pub fn lost(
        counter: u64,
        status: RunStatus,
        (started_at, ended_at): (DateTime<Utc>, DateTime<Utc>),
        summary: &str,
    ) -> RunRecord {
        RunRecord {
            counter,
            status,
            trigger: "unknown".into(),
            delivery: None,
            cause: None,
            attempt: 1,
            started_at,
            ended_at,
            duration_ms: u64::try_from((ended_at - started_at).num_milliseconds()).unwrap_or(0),
            exit_code: None,
            signal: None,
            http_status: None,
            summary: String::new(),
            usage: None,
            reason: None,
        }
        .with_summary(summary)
    }

    /// Cuts the summary to [`MAX_SUMMARY`] bytes.
    pub fn with_summary(mut self, summary: &str) -> RunRecord {
        let mut end = summary.len().min(MAX_SUMMARY);
        while !summary.is_char_boundary(end) {
            end -= 1;
        }
        self.summary = summary[..end].to_string();
        self
    }

    /// One line of the file, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }
}

/// The history file of one job.
#[derive(Debug, Clone)]
pub struct HistoryFile {
    path: PathBuf,
}

impl HistoryFile {
    /// The history of job `id` under `root` (`var/log/svc/history/job` or `.../job_http`).
    pub fn new(root: &Path, id: &str) -> HistoryFile {
        HistoryFile {
            path: root.join(format!("{id}.jsonl")),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `lines` (each ending in a newline) in one write and syncs the data; cuts
    /// the file back to its last [`KEEP`] runs once it is over [`COMPACT_AT_BYTES`].
    /// Blocking.
    pub fn append(&self, lines: &str) -> io::Result<()> {
        // A retry after a full disk starts on a line of its own, as after a crash.
        crate::util::space_reserve::retry_when_full(|| self.append_once(lines))
    }

    fn append_once(&self, lines: &str) -> io::Result<()> {
        let (mut file, created) = match OpenOptions::new().append(true).read(true).open(&self.path)
        {
            Ok(file) => (file, false),
            Err(err) if err.kind() == io::ErrorKind::NotFound => (self.create()?, true),
            Err(err) => return Err(err),
        };
        // After a write cut short by a crash, the next line starts on a line of its own.
        let mut text = String::with_capacity(lines.len() + 1);
        let len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                text.push('\n');
            }
        }
        text.push_str(lines);
        file.write_all(text.as_bytes())?;
        file.sync_data()?;
        if created && let Some(dir) = self.path.parent() {
            // The new name, too, must survive a power failure.
            fsutil::sync_dir(dir)?;
        }
        if len + text.len() as u64 > COMPACT_AT_BYTES {
            self.compact()?;
        }
        Ok(())
    }

    /// Creates the file (and its directory, the first time a job of its kind ends).
    fn create(&self) -> io::Result<File> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&self.path)
    }

    /// Rewrites the file with its last [`KEEP`] records (temp file, sync, rename).
    fn compact(&self) -> io::Result<()> {
        let records = self.read_all()?;
        let start = records.len().saturating_sub(KEEP);
        let text: String = records[start..].iter().map(RunRecord::to_line).collect();
        fsutil::atomic_write(&self.path, text.as_bytes())
    }

    /// Every record the file holds that parses, oldest first; none when there is no
    /// file. Blocking.
    fn read_all(&self) -> io::Result<Vec<RunRecord>> {
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let mut records = Vec::new();
        for line in BufReader::new(file).lines() {
            if let Ok(record) = serde_json::from_str::<RunRecord>(&line?) {
                records.push(record);
            }
        }
        Ok(records)
    }

    /// The highest run number among the file's last records, 0 when it has none. Reads
    /// the file's end only, a page at first and more while no whole record is in it: a
    /// start reads this for each job whose state file is gone (a reboot empties
    /// `/var/run`), possibly thousands. Blocking.
    pub fn newest_counter(&self) -> io::Result<u64> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(err) => return Err(err),
        };
        let len = file.metadata()?.len();
        let mut want: u64 = 4096;
        loop {
            let start = len.saturating_sub(want);
            file.seek(SeekFrom::Start(start))?;
            let mut tail = Vec::new();
            (&mut file).take(len - start).read_to_end(&mut tail)?;
            // Unless the file starts there, the first line is cut.
            let newest = tail
                .split(|&byte| byte == b'\n')
                .skip(usize::from(start > 0))
                .filter_map(|line| serde_json::from_slice::<RunRecord>(line).ok())
                .map(|record| record.counter)
                .max();
            match newest {
                Some(counter) => return Ok(counter),
                None if start == 0 => return Ok(0),
                None => want = want.saturating_mul(4),
            }
        }
    }

    /// A page of the last [`KEEP`] runs, newest first: at most `limit` of them (at most
    /// [`MAX_PAGE`]) whose counter is below `before` when given. Blocking.
    pub fn page(&self, limit: usize, before: Option<u64>) -> io::Result<Vec<RunRecord>> {
        let records = self.read_all()?;
        let start = records.len().saturating_sub(KEEP);
        Ok(records[start..]
            .iter()
            .rev()
            .filter(|record| before.is_none_or(|before| record.counter < before))
            .take(limit.min(MAX_PAGE))
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(counter: u64) -> RunRecord {
        let at = DateTime::from_timestamp(1_790_000_000 + counter as i64, 0).unwrap_or_default();
        RunRecord {
            counter,
            status: if counter % 2 == 0 {
                RunStatus::Success
            } else {
                RunStatus::Timeout
            },
            trigger: "timer".into(),
            delivery: None,
            cause: None,
            attempt: 1,
            started_at: at,
            ended_at: at,
            duration_ms: 5,
            exit_code: (counter % 2 == 0).then_some(0),
            signal: (counter % 2 == 1).then_some(15),
            http_status: None,
            summary: "done".into(),
            usage: (counter % 2 == 0).then_some(Box::new(proto::ResourceUsage {
                cpu_user_ms: 510,
                cpu_system_ms: 20,
                peak_memory_bytes: 67_108_864,
                io_read_bytes: Some(0),
                io_write_bytes: None,
                measured_by: proto::UsageSource::Rusage,
            })),
            reason: None,
        }
    }

    #[test]
    fn pages_go_newest_first_and_stop_before_a_counter() {
        let dir = tempfile::tempdir().expect("temp dir");
        let history = HistoryFile::new(&dir.path().join("job"), "build");
        assert_eq!(history.page(10, None).expect("read"), vec![]);
        let lines: String = (1..=5).map(|n| record(n).to_line()).collect();
        history.append(&lines).expect("append");
        let counters = |page: Vec<RunRecord>| page.iter().map(|r| r.counter).collect::<Vec<_>>();
        assert_eq!(counters(history.page(2, None).expect("read")), [5, 4]);
        assert_eq!(
            counters(history.page(10, Some(4)).expect("read")),
            [3, 2, 1]
        );
        assert_eq!(history.page(10, None).expect("read")[0], record(5));
    }

    #[test]
    fn the_newest_counter_is_read_from_the_end_of_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let history = HistoryFile::new(dir.path(), "build");
        assert_eq!(history.newest_counter().expect("no file"), 0);
        // Lines longer than a page, so that the last page holds none whole, and a torn
        // line at the end.
        let long = |n: u64| RunRecord {
            delivery: Some("d".repeat(5000)),
            ..record(n)
        };
        let mut text: String = (1..=40).map(|n| long(n).to_line()).collect();
        text.push_str(&record(41).to_line()[..30]);
        std::fs::write(history.path(), &text).expect("write");
        assert_eq!(history.newest_counter().expect("read"), 40);
        std::fs::write(history.path(), "not a record\n").expect("write");
        assert_eq!(history.newest_counter().expect("read"), 0);
    }

    #[test]
    fn a_line_written_before_usage_was_recorded_still_reads() {
        let dir = tempfile::tempdir().expect("temp dir");
        let history = HistoryFile::new(dir.path(), "build");
        let old = r#"{"counter":7,"status":"success","trigger":"timer","attempt":1,"started_at":"2026-11-20T23:30:00Z","ended_at":"2026-11-20T23:30:01Z","duration_ms":1000,"exit_code":0,"signal":null,"summary":"ok"}"#;
        std::fs::write(history.path(), format!("{old}\n")).expect("write");
        history.append(&record(8).to_line()).expect("append");
        let page = history.page(10, None).expect("read");
        assert_eq!(page.len(), 2);
        assert_eq!((page[1].counter, &page[1].usage), (7, &None));
        assert_eq!(
            page[0].usage.as_ref().map(|usage| usage.cpu_user_ms),
            Some(510)
        );
        assert!(!record(7).to_line().contains("usage"), "no usage, no field");
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_next_append_starts_a_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let history = HistoryFile::new(dir.path(), "build");
        let whole = record(1).to_line();
        let torn = &record(2).to_line()[..20];
        std::fs::write(history.path(), format!("{whole}{torn}")).expect("write");
        history.append(&record(3).to_line()).expect("append");
        let counters: Vec<u64> = history
            .page(10, None)
            .expect("read")
            .iter()
            .map(|r| r.counter)
            .collect();
        assert_eq!(counters, [3, 1]);
    }

    #[test]
    fn the_file_is_cut_back_to_the_last_runs_it_keeps() {
        let dir = tempfile::tempdir().expect("temp dir");
        let history = HistoryFile::new(dir.path(), "build");
        // Records with the longest summary, so that the file passes its size limit.
        let long = "x".repeat(MAX_SUMMARY + 50);
        let line = |n: u64| record(n).with_summary(&long).to_line();
        let per_file = COMPACT_AT_BYTES / line(1).len() as u64;
        let total = per_file + 10;
        for chunk in (1..=total).collect::<Vec<_>>().chunks(500) {
            let lines: String = chunk.iter().map(|&n| line(n)).collect();
            history.append(&lines).expect("append");
        }
        let size = std::fs::metadata(history.path()).expect("stat").len();
        assert!(size <= COMPACT_AT_BYTES, "{size} bytes");
        assert!(
            per_file as usize > 2 * KEEP,
            "{per_file} records fit before a cut"
        );
        let page = history.page(MAX_PAGE + 5, None).expect("read");
        assert_eq!(page.len(), KEEP);
        assert_eq!(page[0].counter, total);
        assert_eq!(page[KEEP - 1].counter, total - KEEP as u64 + 1);
    }
}
