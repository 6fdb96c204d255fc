//! What the crash loop (`crash.rs`) checks after each kill of the controller and after
//! each restart: every state file in its exact format and parsed, every log's
//! timestamped whole lines, first and last line, one file per run, finished logs never
//! changed nor lost, run numbers never going back, never used twice and without a gap
//! over all the kills; after a restart, every interrupted run repaired as `fail` (or as
//! its history recorded it) with its content kept, and the job's status with it. The
//! state file checker has a test of its own here.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash as _, Hasher as _};
use std::time::SystemTime;

use svc_controller::store::state::JobState;
use svc_tests::{LogFile, TestService, check_timestamps, parse_log_lines};

/// The jobs of the crash loop's service.
const ALL_JOBS: [&str; 7] = [
    "tick", "hook0", "hook1", "hook2", "long", "chatty", "toggle",
];
/// Jobs without a timer: their status only changes when the test triggers them.
const WEBHOOK_JOBS: [&str; 5] = ["hook0", "hook1", "hook2", "long", "chatty"];

/// The final line of a log repaired after a crash.
const INTERRUPTED: &str = "interrupted, the controller stopped before the run ended";

// ----- what is on disk ------------------------------------------------------------------

/// A log file as seen at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeenLog {
    status: String,
    len: u64,
    modified: Option<SystemTime>,
    /// Hash of the content.
    hash: u64,
    /// The first line without its time.
    first_line: String,
    /// The content, kept for logs still `started` (their repair must keep it).
    content: Option<String>,
}

/// One job's files at one moment.
#[derive(Debug, Default, Clone)]
struct JobFiles {
    state: Option<JobState>,
    state_status: String,
    logs: BTreeMap<u64, SeenLog>,
    /// The run numbers of its history's whole lines, in file order.
    recorded: Vec<u64>,
}

/// A short hash of `content`, to tell whether a log changed.
fn hash(content: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    content.hash(&mut hasher);
    hasher.finish()
}

/// Reads and checks the state file and logs of `id`. Every problem is pushed to
/// `problems` with `when` in front. A finished log whose size and time match what
/// `known` holds was checked before and is not read again.
fn read_job(
    svc: &TestService,
    id: &str,
    known: &BTreeMap<(String, u64), SeenLog>,
    when: &str,
    problems: &mut Vec<String>,
) -> JobFiles {
    let mut files = JobFiles::default();
    read_state(svc, id, when, problems, &mut files);
    files.recorded = history_records(svc, id)
        .iter()
        .filter_map(|record| record["counter"].as_u64())
        .collect();
    let mut per_counter: BTreeMap<u64, Vec<LogFile>> = BTreeMap::new();
    for log in svc.job_logs(id) {
        per_counter.entry(log.counter).or_default().push(log);
    }
    // A log's first line is written under `.creating` before the log gets its name: a
    // kill may leave one; the restart's recovery removes it.
    if !when.starts_with("iteration") {
        let dir = svc.log_dir("job", id);
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().ends_with(".creating") {
                problems.push(format!("{when}: {} is left over", entry.path().display()));
            }
        }
    }
    for (counter, logs) in per_counter {
        if logs.len() > 1 {
            problems.push(format!(
                "{when}: {id} has {} files for run {counter}: {logs:?}",
                logs.len()
            ));
        }
        let log = &logs[0];
        let meta = std::fs::metadata(&log.path).ok();
        let len = meta.as_ref().map_or(0, std::fs::Metadata::len);
        let modified = meta.and_then(|m| m.modified().ok());
        if let Some(seen) = known.get(&(id.to_owned(), counter))
            && seen.status == log.status
            && seen.len == len
            && seen.modified == modified
        {
            files.logs.insert(counter, seen.clone());
            continue;
        }
        let seen = check_log(id, counter, log, when, problems, (len, modified));
        files.logs.insert(counter, seen);
    }
    check_contiguous(id, &files, when, problems);
    files
}

/// The state file of `id`, if there is one: in the exact format ([`strict_state`]) and
/// parsed, into `files`.
fn read_state(
    svc: &TestService,
    id: &str,
    when: &str,
    problems: &mut Vec<String>,
    files: &mut JobFiles,
) {
    let state_path = svc.state_path(id);
    match std::fs::read_to_string(&state_path) {
        Ok(text) => {
            if let Err(problem) = strict_state(&text) {
                problems.push(format!("{when}: state file of {id} {problem}: {text:?}"));
            }
            match JobState::parse(&text, &state_path.display().to_string()) {
                Ok(state) => files.state = Some(state),
                Err(err) => problems.push(format!("{when}: state file of {id}: {err}")),
            }
            files.state_status = text
                .lines()
                .find_map(|line| line.strip_prefix("status = "))
                .unwrap_or_default()
                .to_owned();
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => problems.push(format!("{when}: read {}: {err}", state_path.display())),
    }
}

/// One log of run `counter` of `id` not seen before as it is now (`len` bytes, changed
/// at `modified`): timestamped whole lines, the run's first line, and for a finished
/// run its last line. Answers what was seen.
fn check_log(
    id: &str,
    counter: u64,
    log: &LogFile,
    when: &str,
    problems: &mut Vec<String>,
    (len, modified): (u64, Option<SystemTime>),
) -> SeenLog {
    let content = log.content();
    // A SIGKILL can cut a write short (the kernel stops a write between pages): a
    // log still `started` right after a kill may end in the start of a line, which
    // the repair at the next start removes. Its whole lines are checked.
    let checked = if log.status == "started" && when.starts_with("iteration") {
        content
            .rfind('\n')
            .map_or(String::new(), |end| content[..=end].to_string())
    } else {
        content.clone()
    };
    if let Err(err) = check_timestamps(&checked) {
        problems.push(format!("{when}: {}: {err}", log.path.display()));
    }
    if !checked.is_empty() && !checked.ends_with('\n') {
        problems.push(format!(
            "{when}: {} ends in the middle of a line",
            log.path.display()
        ));
    }
    let texts: Vec<String> = parse_log_lines(&content)
        .into_iter()
        .map(|line| line.text)
        .collect();
    let head = format!("=== run {counter} of job {id} started by ");
    let repaired_empty = texts.len() == 1 && texts[0].contains(INTERRUPTED);
    if !texts.is_empty() && !texts[0].starts_with(&head) && !repaired_empty {
        problems.push(format!(
            "{when}: {} does not start with {head:?}:\n{content}",
            log.path.display()
        ));
    }
    match log.status.as_str() {
        "started" => {}
        "success" | "fail" => {
            let end = format!("=== run {counter} finished: {}", log.status);
            if !texts.last().is_some_and(|last| last.starts_with(&end)) {
                problems.push(format!(
                    "{when}: finished log {} does not end with {end:?}:\n{content}",
                    log.path.display()
                ));
            }
        }
        other => problems.push(format!(
            "{when}: {} has the unknown status {other:?}",
            log.path.display()
        )),
    }
    SeenLog {
        status: log.status.clone(),
        len,
        modified,
        hash: hash(&content),
        first_line: texts.first().cloned().unwrap_or_default(),
        content: (log.status == "started").then_some(content),
    }
}

/// Run numbers follow each other: the job's logs (none is deleted here) are runs 1 to
/// the newest, each once, and neither the state file nor the history names a run
/// without a log (a number no log records would be a gap once the next run follows it;
/// each log is made durably before its number shows anywhere).
fn check_contiguous(id: &str, files: &JobFiles, when: &str, problems: &mut Vec<String>) {
    let newest = files.logs.keys().next_back().copied().unwrap_or(0);
    // The gaps, as ranges of missing numbers: after a skipped block, 99 in a row.
    let mut gaps: Vec<String> = Vec::new();
    let mut expected = 1;
    for counter in files.logs.keys().copied() {
        if counter > expected {
            gaps.push(format!("{expected} to {}", counter - 1));
        }
        expected = counter + 1;
    }
    if !gaps.is_empty() {
        problems.push(format!(
            "{when}: {id} has logs up to run {newest} but none of runs {}",
            gaps.join(", ")
        ));
    }
    if let Some(state) = &files.state
        && state.counter > newest
    {
        problems.push(format!(
            "{when}: the state file of {id} has counter {} but its newest log is run \
             {newest} (a state write named a run before its log existed)",
            state.counter
        ));
    }
    let mut recorded = BTreeSet::new();
    for counter in &files.recorded {
        if !recorded.insert(*counter) {
            problems.push(format!(
                "{when}: the history of {id} records run {counter} twice"
            ));
        }
        if !files.logs.contains_key(counter) {
            problems.push(format!(
                "{when}: the history of {id} records run {counter}, which has no log"
            ));
        }
    }
}

/// The state file format of docs/formats.md, exactly: four `key = value` lines, then
/// for a queued trigger `queued`, optionally followed by `queued_event` and
/// `queued_body` (base64), then its `queued_id` (16 hex digits).
fn strict_state(text: &str) -> Result<(), String> {
    let lines: Vec<&str> = text.lines().collect();
    let keys: Vec<&str> = lines
        .iter()
        .map(|line| line.split(" = ").next().unwrap_or_default())
        .collect();
    let queue_keys_ok = match keys.get(4..) {
        None | Some([]) => true,
        Some(["queued", rest @ ..]) => matches!(
            rest.strip_suffix(&["queued_id"]).unwrap_or(rest),
            [] | ["queued_event"] | ["queued_body"] | ["queued_event", "queued_body"]
        ),
        Some(_) => false,
    };
    if keys.get(..4) != Some(&["last_run", "status", "counter", "paused"][..])
        || !queue_keys_ok
        || !text.ends_with('\n')
    {
        return Err(
            "is not the four lines last_run, status, counter, paused (and the queued trigger)"
                .into(),
        );
    }
    for line in &lines[4..] {
        if let Some(("queued_event" | "queued_body", value)) = line.split_once(" = ")
            && base64::Engine::decode(&base64::engine::general_purpose::STANDARD, value).is_err()
        {
            return Err(format!("has a queued trigger that is not base64: {line:?}"));
        }
        if let Some(("queued_id", value)) = line.split_once(" = ")
            && (value.len() != 16 || u64::from_str_radix(value, 16).is_err())
        {
            return Err(format!(
                "has a queued_id that is not 16 hex digits: {line:?}"
            ));
        }
    }
    let value = |index: usize| {
        lines[index]
            .split_once(" = ")
            .map_or(lines[index].trim_end_matches(" ="), |(_, v)| v)
            .trim()
    };
    let last_run = value(0);
    if !last_run.is_empty() && chrono::DateTime::parse_from_rfc3339(last_run).is_err() {
        return Err(format!("has last_run {last_run:?}"));
    }
    if !["", "success", "failed", "started"].contains(&value(1)) {
        return Err(format!("has status {:?}", value(1)));
    }
    if value(2).parse::<u64>().is_err() {
        return Err(format!("has counter {:?}", value(2)));
    }
    if !["true", "false"].contains(&value(3)) {
        return Err(format!("has paused {:?}", value(3)));
    }
    Ok(())
}

/// Everything the test remembers across kills.
#[derive(Debug, Default)]
pub(crate) struct History {
    /// First line of every run's log, by job and counter: a counter used twice would
    /// show a different first line.
    first_lines: BTreeMap<(String, u64), String>,
    /// Finished logs, which must never change or vanish.
    pub(crate) finished: BTreeMap<(String, u64), SeenLog>,
    /// Highest state counter seen per job.
    pub(crate) counters: BTreeMap<String, u64>,
    /// Logs left `started` by the last kill, with their content then.
    pub(crate) interrupted: BTreeMap<(String, u64), String>,
    /// State files saying `started` at the last kill (jobs without a timer only).
    started_states: BTreeSet<String>,
    // Figures for the report.
    pub(crate) repaired: usize,
    pub(crate) kills_in_runs: usize,
    pub(crate) kills_in_startup: usize,
}

impl History {
    /// Checks the files after a kill against what was seen before, then remembers them.
    pub(crate) fn after_kill(&mut self, svc: &TestService, when: &str, problems: &mut Vec<String>) {
        self.interrupted.clear();
        self.started_states.clear();
        for id in ALL_JOBS {
            let files = read_job(svc, id, &self.finished, when, problems);
            if let Some(state) = &files.state {
                let before = self.counters.get(id).copied().unwrap_or(0);
                if state.counter < before {
                    problems.push(format!(
                        "{when}: the counter of {id} went back from {before} to {}",
                        state.counter
                    ));
                }
                self.counters
                    .insert(id.to_owned(), state.counter.max(before));
                // Interrupted for real: its log (if it got one) is not finished. A log
                // already finished is the case of a_kill_between_the_log_rename_...
                let finished = files
                    .logs
                    .get(&state.counter)
                    .is_some_and(|log| log.status != "started");
                // A job with a queued trigger starts that run right after the restart,
                // so its status then tells about the new run, not the repaired one
                // (whose log is checked all the same).
                let queued = files.state.as_ref().is_some_and(|s| s.queued.is_some());
                if files.state_status == "started"
                    && WEBHOOK_JOBS.contains(&id)
                    && !finished
                    && !queued
                {
                    self.started_states.insert(id.to_owned());
                }
            }
            self.check_logs(id, &files, when, problems);
            for (counter, log) in &files.logs {
                if let Some(content) = &log.content {
                    self.interrupted
                        .insert((id.to_owned(), *counter), content.clone());
                }
            }
        }
    }

    fn check_logs(&mut self, id: &str, files: &JobFiles, when: &str, problems: &mut Vec<String>) {
        for ((job, counter), old) in &self.finished {
            if job != id {
                continue;
            }
            match files.logs.get(counter) {
                None => problems.push(format!("{when}: the finished log {id}.{counter} is gone")),
                Some(now) if now.status != old.status || now.hash != old.hash => {
                    problems.push(format!(
                        "{when}: the finished log {id}.{counter}.{} changed (now {}, {} \
                         bytes, was {} bytes)",
                        old.status, now.status, now.len, old.len
                    ));
                }
                Some(_) => {}
            }
        }
        for (counter, log) in &files.logs {
            let key = (id.to_owned(), *counter);
            if !log.first_line.is_empty() {
                match self.first_lines.get(&key) {
                    Some(seen) if *seen != log.first_line => {
                        problems.push(format!(
                            "{when}: run {counter} of {id} was used twice: first line \
                             {seen:?}, now {:?}",
                            log.first_line
                        ));
                    }
                    Some(_) => {}
                    None => {
                        self.first_lines.insert(key.clone(), log.first_line.clone());
                    }
                }
            }
            if log.status != "started" {
                self.finished.insert(key, log.clone());
            }
        }
    }

    /// Checks, right after a successful start, that what the last kill interrupted was
    /// repaired.
    pub(crate) async fn after_restart(&mut self, svc: &TestService, problems: &mut Vec<String>) {
        let interrupted = std::mem::take(&mut self.interrupted);
        for ((id, counter), before) in &interrupted {
            let Some(log) = svc.job_log(id, *counter) else {
                problems.push(format!(
                    "after restart: the log of run {counter} of {id} is gone"
                ));
                continue;
            };
            let content = log.content();
            let last = log.texts().last().cloned().unwrap_or_default();
            // A kill between the run's history line (written first) and its log's rename
            // leaves a `started` log whose end is recorded: the start finishes it as
            // recorded (ARCHITECTURE.md, "Files that must survive a crash"). Any other
            // interrupted run becomes `fail`, with a line saying it was interrupted.
            let recorded = recorded_status(svc, id, *counter);
            let repaired_right = match recorded.as_deref() {
                Some("success") => {
                    log.status == "success"
                        && last.ends_with(&format!("=== run {counter} finished: success"))
                }
                Some(_) => {
                    log.status == "fail"
                        && last.contains(&format!("=== run {counter} finished: fail: "))
                }
                None => {
                    log.status == "fail"
                        && last.starts_with(&format!("=== run {counter} finished: fail: "))
                        && last.contains(INTERRUPTED)
                }
            };
            if !repaired_right {
                problems.push(format!(
                    "after restart: interrupted run {counter} of {id} (history: {recorded:?}) \
                     is {} and ends with {last:?}",
                    log.status
                ));
            }
            if !content.starts_with(before.as_str()) {
                problems.push(format!(
                    "after restart: the repair of {id}.{counter} lost content:\nbefore:\n\
                     {before}\nafter:\n{content}"
                ));
            }
            self.repaired += 1;
        }
        let started = std::mem::take(&mut self.started_states);
        if !started.is_empty() {
            match svc.try_environment().await {
                Ok(environment) => {
                    for id in &started {
                        // Its interrupted run's recorded end, when the kill came after
                        // the history line (see above), else `failed`.
                        let newest = interrupted
                            .keys()
                            .filter(|(job, _)| job == id)
                            .map(|(_, counter)| *counter)
                            .max();
                        let expected = match newest
                            .and_then(|counter| recorded_status(svc, id, counter))
                            .as_deref()
                        {
                            Some("success") => "success",
                            _ => "failed",
                        };
                        let status = &environment["jobs"][id.as_str()]["status"];
                        if status != expected {
                            problems.push(format!(
                                "after restart: {id} was running when the controller died; \
                                 its status is {status}, not \"{expected}\""
                            ));
                        }
                    }
                }
                Err(err) => problems.push(format!("after restart: environment: {err:#}")),
            }
        }
    }
}

/// The records of job `id`'s run history that parse (a kill may tear the last line).
fn history_records(svc: &TestService, id: &str) -> Vec<serde_json::Value> {
    let path = svc
        .dir_base()
        .join(format!("var/log/svc/history/job/{id}.jsonl"));
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .collect()
}

/// The status the run history recorded for run `counter` of job `id`, if any.
fn recorded_status(svc: &TestService, id: &str, counter: u64) -> Option<String> {
    history_records(svc, id)
        .into_iter()
        .find(|record| record["counter"] == counter)
        .and_then(|record| record["status"].as_str().map(str::to_string))
}

#[test]
fn the_state_file_checker_refuses_torn_files() {
    let whole = "last_run = 2026-11-20T23:30:00Z\nstatus = success\ncounter = 3\npaused = false\n";
    assert_eq!(strict_state(whole), Ok(()));
    assert_eq!(
        strict_state("last_run = \nstatus = \ncounter = 0\npaused = true\n"),
        Ok(())
    );
    let queued = "last_run = \nstatus = \ncounter = 3\npaused = false\nqueued = webhook\n\
                  queued_body = e30=\nqueued_id = 00000000deadbeef\n";
    assert_eq!(strict_state(queued), Ok(()));
    assert!(strict_state(&queued.replace("00000000deadbeef", "deadbeef")).is_err());
    for cut in 0..whole.len() - 1 {
        assert!(
            strict_state(&whole[..cut]).is_err(),
            "a file cut at byte {cut} is refused: {:?}",
            &whole[..cut]
        );
    }
    for bad in [
        "last_run = yesterday\nstatus = success\ncounter = 3\npaused = false\n",
        "last_run = \nstatus = done\ncounter = 3\npaused = false\n",
        "last_run = \nstatus = \ncounter = -1\npaused = false\n",
        "last_run = \nstatus = \ncounter = 1\npaused = maybe\n",
        "status = \nlast_run = \ncounter = 1\npaused = false\n",
        // Earlier releases reserved run numbers in blocks; this one writes no such line.
        "last_run = \nstatus = \ncounter = 3\ncounter_reserved = 102\npaused = true\n",
        "last_run = \nstatus = \ncounter = 1\npaused = false\ncounter_reserved = 9\n",
    ] {
        assert!(strict_state(bad).is_err(), "{bad:?} is refused");
    }
}
