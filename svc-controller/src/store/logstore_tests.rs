//! Unit tests of `logstore.rs`.

use super::*;

/// Status and whole content of the log of run `counter`, which must exist.
fn read_all(logs: &LogDir, counter: u64) -> (LogStatus, Vec<u8>) {
    let (status, mut file) = logs.open(counter).expect("open").expect("present");
    let mut content = Vec::new();
    file.read_to_end(&mut content).expect("read");
    (status, content)
}

#[test]
fn the_last_lines_and_a_cut_first_line() {
    let bytes = b"a\nb\nc\nd\n";
    assert_eq!(last_lines(bytes, 1024, 50), vec!["a", "b", "c", "d"]);
    assert_eq!(last_lines(bytes, 1024, 2), vec!["c", "d"]);
    // As long as what was asked for: it may start in the middle of a line.
    assert_eq!(last_lines(b"rt of a line\nb\n", 15, 50), vec!["b"]);
    assert_eq!(last_lines(bytes, 8, 50), vec!["b", "c", "d"]);
    assert_eq!(last_lines(b"no newline", 1024, 50), vec!["no newline"]);
    assert_eq!(last_lines(b"", 0, 50), Vec::<String>::new());
    assert_eq!(
        last_lines(b"bad \xff byte\n", 1024, 50),
        vec!["bad \u{fffd} byte"]
    );
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_string)
        .collect()
}

fn assert_timestamped(line: &str) {
    assert!(
        NaiveDateTime::parse_from_str(&line[..19], LINE_TIME_FORMAT).is_ok()
            && &line[19..20] == " ",
        "line without a time prefix: {line:?}"
    );
}

#[test]
fn a_run_log_is_written_line_by_line_and_renamed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().join("job"), "backup");
    let mut log = logs.create(7, "=== run 7 started").expect("create");
    assert!(dir.path().join("job/backup.7.started").exists());
    assert!(!dir.path().join("job/backup.7.creating").exists());
    log.output(OutputKind::Stdout, b"hel").expect("out");
    log.output(OutputKind::Stderr, b"oops\n").expect("out");
    log.output(OutputKind::Stdout, b"lo\nworld").expect("out");
    log.line("=== run 7 finished: success").expect("line");
    let (meta, _) = log.finish(RunResult::Success).expect("finish");
    assert_eq!(meta.status, LogStatus::Finished(RunResult::Success));
    let content = fs::read(dir.path().join("job/backup.7.success")).expect("read");
    let lines = lines(&content);
    let texts: Vec<_> = lines.iter().map(|l| &l[20..]).collect();
    assert_eq!(
        texts,
        [
            "=== run 7 started",
            "2> oops",
            "hello",
            "world",
            "=== run 7 finished: success"
        ]
    );
    lines.iter().for_each(|l| assert_timestamped(l));
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_log_made_ahead_has_no_name_until_its_run_begins_and_then_its_header() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().join("job"), "backup");
    logs.create(1, "=== run 1 started").expect("the first log");
    let ahead = logs.make_ahead().expect("O_TMPFILE on this file system");
    let inode = ahead.file.metadata().expect("fstat").ino();
    assert_eq!(names_in(&dir.path().join("job")), ["backup.1.started"]);

    let mut log = logs
        .create_with(2, "=== run 2 started", Some(ahead))
        .expect("create");
    let path = dir.path().join("job/backup.2.started");
    assert_eq!(fs::metadata(&path).expect("named").ino(), inode);
    assert_eq!(
        names_in(&dir.path().join("job")),
        ["backup.1.started", "backup.2.started"],
        "no temporary name"
    );
    log.line("=== run 2 finished: success").expect("line");
    log.finish(RunResult::Success).expect("finish");
    let texts: Vec<String> =
        lines(&fs::read(dir.path().join("job/backup.2.success")).expect("read"))
            .iter()
            .map(|line| line[20..].to_string())
            .collect();
    assert_eq!(texts, ["=== run 2 started", "=== run 2 finished: success"]);
}

#[test]
fn a_log_made_ahead_and_never_named_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().join("job"), "backup");
    logs.create(1, "=== run 1 started").expect("the first log");
    drop(logs.make_ahead().expect("O_TMPFILE on this file system"));
    assert_eq!(names_in(&dir.path().join("job")), ["backup.1.started"]);
    // A job without a log directory yet gets none made ahead: its first log makes it.
    let fresh = LogDir::new(dir.path().join("new"), "backup");
    assert!(fresh.make_ahead().is_none());
    assert!(!dir.path().join("new").exists());
}

#[test]
fn a_log_made_ahead_elsewhere_is_not_used() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let before = LogDir::new(dir.path().join("before"), "backup");
    before.create(1, "=== run 1 started").expect("a log");
    let ahead = before.make_ahead().expect("O_TMPFILE on this file system");
    let inode = ahead.file.metadata().expect("fstat").ino();
    // A reload moved the job's logs meanwhile.
    let after = LogDir::new(dir.path().join("after"), "backup");
    after
        .create_with(2, "=== run 2 started", Some(ahead))
        .expect("create");
    let path = dir.path().join("after/backup.2.started");
    assert_ne!(fs::metadata(&path).expect("made").ino(), inode);
    assert_eq!(names_in(&dir.path().join("before")), ["backup.1.started"]);
}

/// The log lines `chunks` make, in order, with the stamp `T`, then those a flush
/// writes.
fn split(chunks: &[(OutputKind, &[u8])]) -> Vec<String> {
    let mut splitter = LineSplitter::default();
    let mut out = Vec::new();
    for (kind, data) in chunks {
        splitter.push(*kind, data, "T", &mut out);
    }
    splitter
        .flush("T")
        .into_iter()
        .for_each(|mut rest| out.append(&mut rest));
    lines(&out)
}

#[test]
fn stderr_lines_are_marked_once_whatever_the_chunks() {
    use OutputKind::{Body, Stderr, Stdout};
    assert_eq!(
        split(&[(Stderr, b"one line\n")]),
        ["T 2> one line"],
        "marked after the time"
    );
    assert_eq!(
        split(&[(Stderr, b"sp"), (Stderr, b"li"), (Stderr, b"t\nnext\n")]),
        ["T 2> split", "T 2> next"],
        "a line over three chunks is marked once"
    );
    assert_eq!(
        split(&[(Stdout, b"out\n"), (Body, b"{}\n")]),
        ["T out", "T {}"],
        "stdout and a body are not marked"
    );
    assert_eq!(
        split(&[(Stderr, b"\n")]),
        ["T 2> "],
        "an empty line keeps its marker"
    );
}

#[test]
fn interleaved_outputs_never_merge() {
    use OutputKind::{Stderr, Stdout};
    // A stdout line cut by a stderr line: each completes on its own.
    assert_eq!(
        split(&[
            (Stdout, b"hel"),
            (Stderr, b"warn"),
            (Stdout, b"lo\n"),
            (Stderr, b"ing\n"),
        ]),
        ["T hello", "T 2> warning"]
    );
    // Partial lines left at the end: each flushed as a line of its own, stdout
    // first, the stderr one marked.
    assert_eq!(
        split(&[(Stderr, b"no newline"), (Stdout, b"half")]),
        ["T half", "T 2> no newline"]
    );
    // A 2> in stdout's text is not taken for a marker, nor doubled in stderr's.
    assert_eq!(
        split(&[(Stdout, b"2> x\n"), (Stderr, b"2> y\n")]),
        ["T 2> x", "T 2> 2> y"]
    );
}

#[test]
fn a_long_stderr_line_is_cut_and_each_part_marked() {
    let mut splitter = LineSplitter::default();
    let mut out = Vec::new();
    let long = vec![b'e'; MAX_PARTIAL_LINE + 5];
    splitter.push(OutputKind::Stderr, &long[..100], "T", &mut out);
    assert!(out.is_empty(), "a partial line waits");
    splitter.push(OutputKind::Stderr, &long[100..], "T", &mut out);
    assert_eq!(
        splitter.pending(OutputKind::Stderr),
        5,
        "what is past the cut waits"
    );
    splitter.push(OutputKind::Stderr, b"tail\n", "T", &mut out);
    let got = lines(&out);
    assert_eq!(got.len(), 2, "the cut part, then the rest");
    assert_eq!(got[0].len(), "T 2> ".len() + MAX_PARTIAL_LINE);
    assert!(got[0].starts_with("T 2> eee"));
    assert_eq!(got[1], "T 2> eeeeetail");
}

#[test]
fn a_long_line_is_cut_at_the_same_places_however_it_is_chunked() {
    let mut line = vec![b'x'; 2 * MAX_PARTIAL_LINE + 7];
    line.push(b'\n');
    let whole = {
        let mut splitter = LineSplitter::default();
        let mut out = Vec::new();
        splitter.push(OutputKind::Stdout, &line, "T", &mut out);
        out
    };
    for chunk in [
        1,
        1000,
        MAX_PARTIAL_LINE - 1,
        MAX_PARTIAL_LINE,
        MAX_PARTIAL_LINE + 1,
    ] {
        let mut splitter = LineSplitter::default();
        let mut out = Vec::new();
        for piece in line.chunks(chunk) {
            splitter.push(OutputKind::Stdout, piece, "T", &mut out);
        }
        assert_eq!(out, whole, "chunks of {chunk}");
    }
    let got = lines(&whole);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].len(), "T ".len() + MAX_PARTIAL_LINE);
    assert_eq!(got[2], format!("T {}", "x".repeat(7)));
    // A line of exactly the limit is one line, with no empty line after it.
    let mut exact = vec![b'y'; MAX_PARTIAL_LINE];
    exact.push(b'\n');
    let mut splitter = LineSplitter::default();
    let mut out = Vec::new();
    splitter.push(OutputKind::Stdout, &exact, "T", &mut out);
    assert_eq!(lines(&out).len(), 1);
}

#[test]
fn a_flush_leaves_nothing_and_a_clear_drops_everything() {
    let mut splitter = LineSplitter::default();
    let mut out = Vec::new();
    splitter.push(OutputKind::Stderr, b"a", "T", &mut out);
    splitter.push(OutputKind::Stdout, b"b", "T", &mut out);
    splitter.clear();
    assert!(splitter.flush("T").is_empty());
    splitter.push(OutputKind::Stderr, b"c", "T", &mut out);
    assert_eq!(splitter.flush("T"), vec![b"T 2> c\n".to_vec()]);
    assert!(splitter.flush("T").is_empty(), "flushed once");
    assert!(out.is_empty());
}

#[test]
fn very_long_lines_are_cut_not_buffered_forever() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "j");
    let mut log = logs.create(1, "h").expect("create");
    log.output(OutputKind::Stdout, &vec![b'x'; MAX_PARTIAL_LINE + 10])
        .expect("out");
    // The first MAX_PARTIAL_LINE bytes are written as a line; the rest waits.
    assert_eq!(log.lines.pending(OutputKind::Stdout), 10);
    let content = fs::read(logs.path(1, LogStatus::Started)).expect("read");
    assert_eq!(content.len(), 22 + 20 + MAX_PARTIAL_LINE + 1);
}

#[test]
fn scan_lists_only_this_jobs_logs_in_counter_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "a");
    for name in [
        "a.10.success",
        "a.9.fail",
        "a.11.started",
        "a.x.success",
        "a.12.weird",
        "ab.1.success",
        "b.1.success",
        ".tmp-123",
    ] {
        fs::write(dir.path().join(name), b"").expect("write");
    }
    let got = logs.scan().expect("scan");
    let counters: Vec<_> = got.iter().map(|l| (l.counter, l.status.as_str())).collect();
    assert_eq!(counters, [(9, "fail"), (10, "success"), (11, "started")]);
    assert!(
        LogDir::new(dir.path().join("none"), "a")
            .scan()
            .expect("scan")
            .is_empty()
    );
}

#[test]
fn retention_deletes_the_oldest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "a");
    for counter in 1..=5 {
        logs.create(counter, "h")
            .expect("create")
            .finish(RunResult::Success)
            .expect("finish");
    }
    let mut list = logs.scan().expect("scan");
    logs.enforce_retention(&mut list, 2).expect("retention");
    assert_eq!(list.iter().map(|l| l.counter).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(logs.scan().expect("scan"), list);
}

#[test]
fn interrupted_runs_become_failures_with_a_final_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "a");
    let mut log = logs.create(3, "=== run 3 started").expect("create");
    log.output(OutputKind::Stdout, b"half a li").expect("out");
    log.file
        .write_all(b"half a li")
        .expect("simulate crash mid-line");
    drop(log);
    let mut list = logs.scan().expect("scan");
    assert_eq!(
        logs.recover_interrupted(&mut list, &HashMap::new())
            .expect("recover"),
        [(3, false)]
    );
    assert_eq!(list[0].status, LogStatus::Finished(RunResult::Fail));
    let (status, content) = read_all(&logs, 3);
    assert_eq!(status.as_str(), "fail");
    let lines = lines(&content);
    let last = lines.last().expect("a last line");
    assert!(last.ends_with("interrupted, the controller stopped before the run ended"));
    // The torn write ("half a li" without its time or newline) is gone: every line
    // is whole and timestamped.
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        assert_timestamped(line);
    }
    assert!(!String::from_utf8_lossy(&content).contains("half a li"));
    assert!(logs.first_line_time(3, status).is_some());
}

/// A kill while a log is created leaves at most a `.creating` file, which the
/// start's one pass over the directory removes; a repair cut short before its rename
/// is finished without a second final line.
#[test]
fn recovery_after_a_kill_in_create_or_in_an_earlier_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "a");
    fs::write(logs.creating_path(4), "").expect("a creation cut short");
    let mut log = logs.create(5, "=== run 5 started").expect("create");
    log.output(OutputKind::Stdout, b"out\n").expect("out");
    drop(log);
    let listed = logs.list().expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(logs.creating_path(4).exists(), "a listing leaves it");
    let mut list = logs.scan().expect("scan");
    assert_eq!(list.len(), 1, "{list:?}");
    assert!(!logs.creating_path(4).exists(), "the scan removed it");
    // The first repair wrote its line, then the controller died before the rename:
    // simulate with a line written by hand.
    let started = logs.path(5, LogStatus::Started);
    let mut file = OpenOptions::new()
        .append(true)
        .open(&started)
        .expect("open");
    file.write_all(format_line(Utc::now(), "=== run 5 finished: fail: interrupted").as_bytes())
        .expect("write");
    assert_eq!(
        logs.recover_interrupted(&mut list, &HashMap::new())
            .expect("recover"),
        [(5, false)]
    );
    let (_, content) = read_all(&logs, 5);
    let lines = lines(&content);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].ends_with("=== run 5 started"), "{lines:?}");
    assert!(lines[2].ends_with("=== run 5 finished: fail: interrupted"));

    // A run that wrote its success line but whose state was never saved (killed
    // before the rename) is interrupted: the failure line goes after it.
    let mut log = logs.create(6, "=== run 6 started").expect("create");
    log.line("=== run 6 finished: success").expect("line");
    drop(log);
    let mut list = logs.scan().expect("scan");
    assert_eq!(
        logs.recover_interrupted(&mut list, &HashMap::new())
            .expect("recover"),
        [(6, false)]
    );
    let (_, content) = read_all(&logs, 6);
    let last = String::from_utf8_lossy(&content)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(last.contains("finished: fail: interrupted"), "{last}");
}

#[test]
fn a_run_whose_end_was_recorded_is_finished_as_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "a");
    // Killed after the history line was queued and before the rename: the run wrote
    // its last line; the log keeps it and gets the recorded result.
    let mut log = logs.create(1, "=== run 1 started").expect("create");
    log.line("=== run 1 finished: success").expect("line");
    drop(log);
    // Killed before the run's last line reached the log: it is written now.
    let mut log = logs.create(2, "=== run 2 started").expect("create");
    log.output(OutputKind::Stdout, b"half a li").expect("out");
    drop(log);
    let recorded = HashMap::from([
        (1, (RunResult::Success, String::new())),
        (2, (RunResult::Fail, "exit code 3".to_string())),
    ]);
    let mut list = logs.scan().expect("scan");
    assert_eq!(
        logs.recover_interrupted(&mut list, &recorded)
            .expect("recover"),
        [(1, true), (2, true)]
    );
    assert_eq!(
        list.iter().map(|l| l.status).collect::<Vec<_>>(),
        [
            LogStatus::Finished(RunResult::Success),
            LogStatus::Finished(RunResult::Fail)
        ]
    );
    let (_, one) = read_all(&logs, 1);
    let one = lines(&one);
    assert_eq!(one.len(), 2, "{one:?}");
    assert!(one[1].ends_with("=== run 1 finished: success"), "{one:?}");
    let (_, two) = read_all(&logs, 2);
    let two = String::from_utf8_lossy(&two).into_owned();
    assert!(!two.contains("half a li"), "the torn line goes: {two}");
    assert!(
        two.trim_end()
            .ends_with("=== run 2 finished: fail: exit code 3"),
        "{two}"
    );
}

#[test]
fn output_is_cut_at_the_limit_on_a_line_boundary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "a").with_max_output(100);
    let mut log = logs.create(1, "=== run 1 started").expect("create");
    for _ in 0..10 {
        log.output(OutputKind::Stdout, b"0123456789\n")
            .expect("out");
    }
    log.output(OutputKind::Stdout, b"partial after the cut")
        .expect("out");
    log.line("=== run 1 finished: success").expect("line");
    log.finish(RunResult::Success).expect("finish");
    let (_, content) = read_all(&logs, 1);
    let lines = lines(&content);
    // 100 bytes hold three 31-byte output lines.
    assert_eq!(lines.len(), 1 + 3 + 2, "{lines:?}");
    assert!(lines[1..4].iter().all(|l| l.ends_with("0123456789")));
    assert!(
        lines[4].contains("output cut at 100 bytes (log_max_size)"),
        "{lines:?}"
    );
    assert!(lines[5].ends_with("=== run 1 finished: success"));
    for line in &lines {
        assert_timestamped(line);
    }
}

#[test]
fn read_tail_returns_at_most_max_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = LogDir::new(dir.path().to_path_buf(), "a");
    fs::write(logs.path(1, LogStatus::Started), vec![b'z'; 5000]).expect("write");
    assert_eq!(
        logs.read_tail(1, LogStatus::Started, 2048)
            .expect("tail")
            .len(),
        2048
    );
    // Whatever the status, found by counter.
    assert_eq!(
        logs.read_end(1, 100).expect("end").expect("present").len(),
        100
    );
    assert!(logs.read_end(2, 100).expect("end").is_none());
}
