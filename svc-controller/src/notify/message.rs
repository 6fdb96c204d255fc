//! What a notification says about a run: a [`Report`], made once per run end from the
//! engine's [`RunEnded`] and the last lines of the run's log (read on the blocking pool,
//! never on the run path), then written as an e-mail or a webhook payload.

use std::io;

use crate::time::timezone::utc_text;

use crate::engine::RunEnded;
use crate::store::logstore::{LogStatus, last_lines};

/// Lines of the run's log a notification carries, the last ones.
pub const LOG_LINES: usize = 50;

/// Bytes read from the end of the log to find them: far more than 50 ordinary lines; a
/// line longer than what is left is cut at the start.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// One run's end, as every notification of it tells it.
#[derive(Debug, Clone)]
pub struct Report {
    /// The service's `name`.
    pub service: String,
    /// What the engine told of the run.
    pub run: RunEnded,
    /// The last lines of the run's log, oldest first, without their newlines.
    pub log: Vec<String>,
    /// Why the log could not be read, when it could not.
    pub log_missing: Option<String>,
}

/// The last [`LOG_TAIL_BYTES`] of the run's log (`None` when it is gone: retention may
/// remove it when later runs end quickly). Blocking.
fn read_log_tail(run: &RunEnded) -> io::Result<Option<Vec<u8>>> {
    let status = LogStatus::Finished(run.result);
    match run.log_dir.read_tail(run.counter, status, LOG_TAIL_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

impl Report {
    /// The report of `run`, with the last lines of its log. Blocking: reads the log.
    pub fn read(service: &str, run: RunEnded) -> Report {
        let tail = read_log_tail(&run);
        Report::new(service, run, tail)
    }

    /// The report of `run`, with what [`read_log_tail`] found.
    pub fn new(service: &str, run: RunEnded, tail: io::Result<Option<Vec<u8>>>) -> Report {
        let (log, log_missing) = match tail {
            Ok(Some(bytes)) => (last_lines(&bytes, LOG_TAIL_BYTES, LOG_LINES), None),
            Ok(None) => (
                Vec::new(),
                Some("it was removed (log_retention)".to_string()),
            ),
            Err(err) => (Vec::new(), Some(format!("cannot read it: {err}"))),
        };
        Report {
            service: service.to_string(),
            run,
            log,
            log_missing,
        }
    }

    /// `success` or `failed`, as the job's status says it.
    pub fn status(&self) -> &'static str {
        self.run.result.job_status()
    }

    /// `svc: job deploy run 12 failed`.
    pub fn subject(&self) -> String {
        format!(
            "{}: {} {} run {} {}",
            self.service,
            self.run.kind.as_str(),
            self.run.job_id,
            self.run.counter,
            self.status()
        )
    }

    /// The plain text of an e-mail: what ran, when, how it ended, and the last lines of
    /// its log.
    pub fn text(&self) -> String {
        let took = (self.run.ended_at - self.run.started_at)
            .to_std()
            .map(|took| crate::time::duration::format_duration(rounded(took)))
            .unwrap_or_else(|_| "0s".to_string());
        let mut text = format!(
            "{subject}\n\n\
             Job:     {name}\n\
             ID:      {id}\n\
             Run:     {counter}\n\
             Status:  {status}\n\
             Started: {started}\n\
             Ended:   {ended} ({took})\n\n",
            subject = self.subject(),
            name = self.run.job_name,
            id = self.run.job_id,
            counter = self.run.counter,
            status = self.status(),
            started = utc_text(self.run.started_at),
            ended = utc_text(self.run.ended_at),
        );
        match &self.log_missing {
            Some(why) => text.push_str(&format!("The run's log is not shown: {why}.\n")),
            None => {
                text.push_str(&format!(
                    "The last {} lines of the run's log:\n\n",
                    self.log.len()
                ));
                for line in &self.log {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        text
    }
}

/// `took` to the second, or below a second to the millisecond.
fn rounded(took: std::time::Duration) -> std::time::Duration {
    if took >= std::time::Duration::from_secs(1) {
        std::time::Duration::from_secs(took.as_secs())
    } else {
        std::time::Duration::from_millis(u64::try_from(took.as_millis()).unwrap_or(0))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use chrono::{DateTime, Utc};

    use super::*;
    use crate::engine::Kind;
    use crate::store::logstore::LogDir;
    use crate::store::state::RunResult;

    fn t(text: &str) -> DateTime<Utc> {
        text.parse().expect("a time")
    }

    /// Run 12 of job `deploy_site` ("deploy site"), 10:00:00 to 10:01:30, its logs in
    /// `dir`.
    pub fn ended(dir: &std::path::Path, result: RunResult) -> RunEnded {
        RunEnded {
            kind: Kind::Job,
            job_id: "deploy_site".into(),
            job_name: "deploy site".into(),
            counter: 12,
            result,
            started_at: t("2026-01-05T10:00:00Z"),
            ended_at: t("2026-01-05T10:01:30Z"),
            log_dir: LogDir::new(dir.to_path_buf(), "deploy_site"),
            notifs: vec!["mail".into()],
        }
    }

    #[test]
    fn a_report_reads_the_runs_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = LogDir::new(dir.path().to_path_buf(), "deploy_site");
        let mut log = logs.create(12, "=== run 12").expect("create");
        for n in 1..=60 {
            log.line(&format!("line {n}")).expect("line");
        }
        log.finish(RunResult::Fail).expect("finish");
        let ended = ended(dir.path(), RunResult::Fail);
        let report = Report::read("svc", ended);
        assert_eq!(report.log.len(), LOG_LINES);
        assert!(report.log[0].ends_with(" line 11"), "{:?}", report.log[0]);
        assert!(report.log[49].ends_with(" line 60"), "{:?}", report.log[49]);
        assert_eq!(report.log_missing, None);

        // Gone (retention) or unreadable: said so, and sent all the same.
        let other = tempfile::tempdir().expect("tempdir");
        let ended = super::tests::ended(other.path(), RunResult::Fail);
        let report = Report::read("svc", ended.clone());
        assert!(report.log.is_empty());
        assert_eq!(
            report.log_missing.as_deref(),
            Some("it was removed (log_retention)")
        );
        let report = Report::new("svc", ended, Err(io::Error::other("disk on fire")));
        assert!(
            report
                .text()
                .contains("not shown: cannot read it: disk on fire")
        );
    }

    #[test]
    fn subject_and_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ended = ended(dir.path(), RunResult::Success);
        let tail = Ok(Some(
            b"2026-01-05 10:00:00 === run 12\n2026-01-05 10:01:30 done\n".to_vec(),
        ));
        let report = Report::new("ci", ended.clone(), tail);
        assert_eq!(report.subject(), "ci: job deploy_site run 12 success");
        assert_eq!(
            report.text(),
            "ci: job deploy_site run 12 success\n\n\
             Job:     deploy site\n\
             ID:      deploy_site\n\
             Run:     12\n\
             Status:  success\n\
             Started: 2026-01-05T10:00:00Z\n\
             Ended:   2026-01-05T10:01:30Z (1m30s)\n\n\
             The last 2 lines of the run's log:\n\n\
             2026-01-05 10:00:00 === run 12\n\
             2026-01-05 10:01:30 done\n"
        );
        let mut failed = ended;
        failed.result = RunResult::Fail;
        failed.kind = Kind::Http;
        failed.ended_at = failed.started_at - Duration::from_secs(1);
        let report = Report::new("svc", failed, Ok(None));
        assert_eq!(report.subject(), "svc: job_http deploy_site run 12 failed");
        assert!(report.text().contains("(0s)"), "a clock stepped back");
        assert_eq!(
            rounded(Duration::from_micros(7_283_824)),
            Duration::from_secs(7)
        );
        assert_eq!(
            rounded(Duration::from_micros(7_283)),
            Duration::from_millis(7)
        );
    }
}
