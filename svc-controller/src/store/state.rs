//! The persisted state of a job: its state file under `var/run/svc/...`.
//!
//! Plain `key = value` lines (see docs/formats.md), replaced atomically. Unknown keys are
//! ignored so that a newer release's file still loads; a value that does not parse makes
//! the file unusable and the state is then rebuilt from the logs.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};

use crate::store::delivery::DeliveryFacts;
use crate::util::fsutil;

/// Result of a finished run, as stored in a state file and used in log names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunResult {
    Success,
    Fail,
}

impl RunResult {
    /// Spelling in log file names and JobLog `status`: `success` or `fail`.
    pub fn log_status(self) -> &'static str {
        match self {
            RunResult::Success => "success",
            RunResult::Fail => "fail",
        }
    }

    /// Spelling of the job status after such a run: `success` or `failed`.
    pub fn job_status(self) -> &'static str {
        match self {
            RunResult::Success => "success",
            RunResult::Fail => "failed",
        }
    }
}

/// How a run ended, finer than its [`RunResult`]: `fail` splits into a failure of the
/// work itself, a cancellation, a time limit reached, and a run the controller's death
/// interrupted. The log file name keeps the [`RunResult`] (the interface's `fail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Success,
    Fail,
    Canceled,
    Timeout,
    Interrupted,
}

impl RunStatus {
    /// Every status, for series that start at zero (metrics).
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Success,
        RunStatus::Fail,
        RunStatus::Canceled,
        RunStatus::Timeout,
        RunStatus::Interrupted,
    ];

    /// Its name in the API, the history and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Fail => "fail",
            RunStatus::Canceled => "canceled",
            RunStatus::Timeout => "timeout",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// The result it is recorded as in log names and the job's status.
    pub fn result(self) -> RunResult {
        match self {
            RunStatus::Success => RunResult::Success,
            _ => RunResult::Fail,
        }
    }
}

/// What survives a restart of the controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobState {
    /// When the last run started.
    pub last_run: Option<DateTime<Utc>>,
    /// Result of the last finished run; `None` if it never finished one.
    pub last_result: Option<RunResult>,
    /// True while a run is going on. Only ever `true` in a file when the controller died
    /// during a run; the next start repairs it.
    pub started: bool,
    /// Number of the last run started as far as this file knows; the next run gets the
    /// highest of it and the numbers of the job's logs, plus one. A run does not write
    /// the file as it starts: its log, created durably first, records its number.
    pub counter: u64,
    pub paused: bool,
    /// The trigger waiting in the job's one-slot queue, kept so that an accepted trigger
    /// survives a pause, a reload and a restart. The run that takes it off the queue
    /// records that durably before its command starts (in the job's take record, see
    /// [`write_taken`], or by writing this file without it), so it runs exactly once.
    pub queued: Option<QueuedTrigger>,
}

/// A queued trigger as the state file keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedTrigger {
    /// What started it (`webhook`, `api`, ...), as the engine spells it.
    pub source: String,
    /// What a webhook delivery said of itself.
    pub facts: DeliveryFacts,
    /// Raw body of a webhook request.
    pub body: Option<Vec<u8>>,
    /// Tells this queued trigger from every other one of the job: the take record names
    /// it. `None` in files of earlier releases.
    pub id: Option<u64>,
}

/// Why a state file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: line {line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: io::Error,
    },
}

impl JobState {
    /// The `status` value written to the file.
    fn status_text(&self) -> &'static str {
        if self.started {
            "started"
        } else {
            self.last_result.map_or("", RunResult::job_status)
        }
    }

    /// Serialises to the file format.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        let last_run = self
            .last_run
            .map(crate::time::timezone::utc_text)
            .unwrap_or_default();
        let _ = writeln!(text, "last_run = {last_run}");
        let _ = writeln!(text, "status = {}", self.status_text());
        let _ = writeln!(text, "counter = {}", self.counter);
        let _ = writeln!(text, "paused = {}", self.paused);
        if let Some(queued) = &self.queued {
            let _ = writeln!(text, "queued = {}", queued.source);
            let facts = &queued.facts;
            for (key, value) in [
                ("queued_event", &facts.event),
                ("queued_delivery", &facts.id),
                ("queued_ref", &facts.git_ref),
                ("queued_commit", &facts.commit),
            ] {
                if let Some(value) = value {
                    let _ = writeln!(text, "{key} = {}", BASE64.encode(value));
                }
            }
            if let Some(body) = &queued.body {
                let _ = writeln!(text, "queued_body = {}", BASE64.encode(body));
            }
            if let Some(id) = queued.id {
                let _ = writeln!(text, "queued_id = {id:016x}");
            }
        }
        text
    }

    /// Parses the file format. `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<JobState, StateError> {
        let mut state = JobState::default();
        let (mut facts, mut body, mut id) = (DeliveryFacts::default(), None, None);
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |message: String| StateError::Parse {
                path: origin.to_string(),
                line: index + 1,
                message,
            };
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| fail(format!("expected `key = value`, got {line:?}")))?;
            let value = value.trim();
            match key.trim() {
                "last_run" if value.is_empty() => state.last_run = None,
                "last_run" => {
                    let time = DateTime::parse_from_rfc3339(value)
                        .map_err(|e| fail(format!("last_run {value:?}: {e}")))?;
                    state.last_run = Some(time.with_timezone(&Utc));
                }
                "status" => {
                    (state.last_result, state.started) = match value {
                        "" | "paused" => (None, false),
                        "success" => (Some(RunResult::Success), false),
                        "failed" | "fail" => (Some(RunResult::Fail), false),
                        "started" => (None, true),
                        other => return Err(fail(format!("unknown status {other:?}"))),
                    }
                }
                "counter" => {
                    state.counter = value
                        .parse()
                        .map_err(|e| fail(format!("counter {value:?}: {e}")))?;
                }
                // Earlier releases reserved run numbers in blocks and wrote the end of
                // the block here. It is not trusted: after a crash it would skip numbers
                // no run used. A start numbers the next run from the logs instead.
                "counter_reserved" => {}
                "paused" => {
                    state.paused = match value {
                        "true" => true,
                        "false" => false,
                        other => return Err(fail(format!("paused {other:?} is not a boolean"))),
                    }
                }
                "queued" if !value.is_empty() => {
                    state.queued = Some(QueuedTrigger {
                        source: value.to_string(),
                        facts: DeliveryFacts::default(),
                        body: None,
                        id: None,
                    });
                }
                key @ ("queued_event" | "queued_delivery" | "queued_ref" | "queued_commit") => {
                    let bytes = BASE64
                        .decode(value)
                        .map_err(|e| fail(format!("{key}: {e}")))?;
                    let text = String::from_utf8(bytes)
                        .map_err(|_| fail(format!("{key} is not UTF-8")))?;
                    let slot = match key {
                        "queued_event" => &mut facts.event,
                        "queued_delivery" => &mut facts.id,
                        "queued_ref" => &mut facts.git_ref,
                        _ => &mut facts.commit,
                    };
                    *slot = Some(text);
                }
                "queued_id" => {
                    id = Some(
                        u64::from_str_radix(value, 16)
                            .map_err(|e| fail(format!("queued_id {value:?}: {e}")))?,
                    );
                }
                "queued_body" => {
                    body = Some(
                        BASE64
                            .decode(value)
                            .map_err(|e| fail(format!("queued_body: {e}")))?,
                    );
                }
                _ => {}
            }
        }
        if let Some(queued) = state.queued.as_mut() {
            queued.facts = facts;
            queued.body = body;
            queued.id = id;
        }
        Ok(state)
    }

    /// Reads a state file; `Ok(None)` when it does not exist.
    pub fn load(path: &Path) -> Result<Option<JobState>, StateError> {
        let origin = path.display().to_string();
        match std::fs::read(path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                JobState::parse(&text, &origin).map(Some)
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Read {
                path: origin,
                source,
            }),
        }
    }

    /// Replaces the state file atomically, durably unless `durability` says otherwise.
    pub fn save(&self, path: &Path, durability: fsutil::Durability) -> Result<(), StateError> {
        let text = self.to_text();
        match durability {
            fsutil::Durability::Durable => fsutil::atomic_write(path, text.as_bytes()),
            fsutil::Durability::Atomic => fsutil::replace_file(path, text.as_bytes()),
        }
        .map_err(|source| StateError::Write {
            path: path.display().to_string(),
            source,
        })
    }
}

/// Where the take record of the job whose state file is `state_path` lives: beside it,
/// under the same name with `.taken` added (a job ID has no dot).
pub fn taken_path(state_path: &Path) -> PathBuf {
    let mut name = state_path.as_os_str().to_owned();
    name.push(".taken");
    PathBuf::from(name)
}

/// Length of a take record: `taken = <16 hex digits> <8 hex digits of check>\n`.
const TAKEN_LEN: usize = 34;

/// The check of a take record: the CRC-32 of the ID's bytes (`crc32fast`, which the
/// gzip code already brings).
fn taken_check(id: u64) -> u32 {
    crc32fast::hash(&id.to_be_bytes())
}

/// Records durably that the queued trigger `id` was taken off the job's queue, before
/// its run's command starts: one small write in place and one `fdatasync`, instead of
/// a new state file (its write, its sync, a rename and the directory's sync) on the
/// way to every run that takes a queued trigger. The record has a fixed length and a
/// check, so a write torn by a power failure reads as no record: the command had not
/// started then. The first write of a job creates the file and syncs its directory.
/// Blocking.
pub fn write_taken(path: &Path, id: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let record = format!("taken = {id:016x} {:08x}\n", taken_check(id));
    debug_assert_eq!(record.len(), TAKEN_LEN);
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(file) => {
            file.write_all_at(record.as_bytes(), 0)?;
            file.sync_data()
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            fsutil::atomic_write(path, record.as_bytes())
        }
        Err(err) => Err(err),
    }
}

/// The queued trigger a take record names; `None` when there is no record, or only a
/// torn one. Blocking.
pub fn read_taken(path: &Path) -> io::Result<Option<u64>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let parsed = (|| {
        let text = std::str::from_utf8(bytes.get(..TAKEN_LEN)?).ok()?;
        let rest = text.strip_prefix("taken = ")?.strip_suffix('\n')?;
        let (id, check) = rest.split_once(' ')?;
        let id = u64::from_str_radix(id, 16).ok()?;
        (u32::from_str_radix(check, 16).ok()? == taken_check(id)).then_some(id)
    })();
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sample() -> JobState {
        JobState {
            last_run: Some(
                Utc.with_ymd_and_hms(2026, 11, 20, 23, 30, 0)
                    .single()
                    .expect("time"),
            ),
            last_result: Some(RunResult::Fail),
            started: false,
            counter: 42,
            paused: true,
            queued: None,
        }
    }

    #[test]
    fn a_counter_reservation_of_an_earlier_release_is_ignored() {
        let state = sample();
        let text = state.to_text();
        let old = text.replace("counter = 42\n", "counter = 42\ncounter_reserved = 141\n");
        assert_ne!(old, text);
        assert_eq!(JobState::parse(&old, "t").expect("parse"), state);
        assert!(!text.contains("counter_reserved"), "{text}");
    }

    #[test]
    fn a_queued_trigger_round_trips() {
        let mut state = sample();
        state.queued = Some(QueuedTrigger {
            source: "webhook".to_string(),
            facts: DeliveryFacts {
                event: Some("push = main".to_string()),
                id: Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".to_string()),
                git_ref: Some("refs/heads/main".to_string()),
                commit: Some("0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c".to_string()),
            },
            body: Some(b"{\"ref\": \"main\"}\n\x00\xff".to_vec()),
            id: Some(0x0123_4567_89ab_cdef),
        });
        let text = state.to_text();
        assert!(text.contains("queued = webhook\n"), "{text}");
        assert_eq!(JobState::parse(&text, "t").expect("parse"), state);
        let bare = JobState::parse("counter = 2\nqueued = api\n", "t").expect("parse");
        assert_eq!(
            bare.queued,
            Some(QueuedTrigger {
                source: "api".to_string(),
                facts: DeliveryFacts::default(),
                body: None,
                id: None,
            })
        );
        assert!(JobState::parse("queued = webhook\nqueued_body = !!\n", "t").is_err());
    }

    #[test]
    fn text_round_trips() {
        let state = sample();
        let text = state.to_text();
        assert_eq!(
            text,
            "last_run = 2026-11-20T23:30:00Z\nstatus = failed\ncounter = 42\npaused = true\n"
        );
        assert_eq!(JobState::parse(&text, "t").expect("parse"), state);
    }

    #[test]
    fn never_run_state_round_trips() {
        let state = JobState::default();
        assert_eq!(
            JobState::parse(&state.to_text(), "t").expect("parse"),
            state
        );
    }

    #[test]
    fn started_status_is_kept() {
        let state = JobState::parse("status = started\ncounter = 3\n", "t").expect("parse");
        assert!(state.started);
        assert_eq!(state.counter, 3);
    }

    #[test]
    fn bad_values_are_errors_naming_file_and_line() {
        for text in [
            "counter = -1",
            "counter = x",
            "paused = maybe",
            "status = weird",
            "last_run = yesterday",
            "garbage",
        ] {
            let err = JobState::parse(text, "/var/run/svc/job/x").expect_err(text);
            assert!(
                err.to_string().contains("/var/run/svc/job/x: line 1"),
                "{err}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let state = JobState::parse("counter = 1\nfuture_key = 9\n", "t").expect("parse");
        assert_eq!(state.counter, 1);
    }

    #[test]
    fn save_and_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("job");
        assert_eq!(JobState::load(&path).expect("missing is fine"), None);
        sample()
            .save(&path, fsutil::Durability::Durable)
            .expect("save");
        assert_eq!(JobState::load(&path).expect("load"), Some(sample()));
    }

    #[test]
    fn a_take_record_names_the_trigger_and_a_torn_one_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = taken_path(&dir.path().join("deploy"));
        assert_eq!(path, dir.path().join("deploy.taken"));
        assert_eq!(read_taken(&path).expect("read"), None, "no record yet");
        write_taken(&path, 0xfeed_beef_0000_0001).expect("first write");
        assert_eq!(
            read_taken(&path).expect("read"),
            Some(0xfeed_beef_0000_0001)
        );
        write_taken(&path, 7).expect("overwrite");
        assert_eq!(read_taken(&path).expect("read"), Some(7));
        assert_eq!(
            std::fs::metadata(&path).expect("stat").len(),
            TAKEN_LEN as u64
        );
        // A write torn by a power failure: part of the new record over the old one.
        let old = std::fs::read(&path).expect("read");
        write_taken(&path, 0x1234_5678_9abc_def0).expect("write");
        let new = std::fs::read(&path).expect("read");
        for cut in 1..TAKEN_LEN - 1 {
            let mut torn = new[..cut].to_vec();
            torn.extend_from_slice(&old[cut..]);
            std::fs::write(&path, &torn).expect("write torn");
            let read = read_taken(&path).expect("read");
            assert!(
                read.is_none() || torn == new || torn == old,
                "cut at {cut}: {read:?} from {:?}",
                String::from_utf8_lossy(&torn)
            );
        }
        std::fs::write(&path, b"").expect("empty");
        assert_eq!(read_taken(&path).expect("read"), None);
    }
}
