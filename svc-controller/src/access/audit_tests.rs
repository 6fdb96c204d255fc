//! The audit log's tests: records, rotation, paging, torn lines.

use super::*;

fn entry(n: usize) -> Entry {
    Entry::answered(
        Actor::Account {
            name: format!("user{n}"),
        },
        Action::Pause,
        Some(JobRef {
            kind: "job_exec".into(),
            id: "deploy".into(),
        }),
        Some("192.0.2.1".into()),
        200,
        "",
    )
}

/// The current audit file of `dir`: its text and each line parsed.
fn current_lines(dir: &Path) -> (String, Vec<serde_json::Value>) {
    let text = fs::read_to_string(dir.join(AUDIT_FILE)).expect("read");
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    (text, lines)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn lines_are_json_with_the_documented_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let log = AuditLog::start(dir.path(), 1 << 20).expect("start");
        log.record(entry(1));
        log.record(Entry::answered(
            Actor::Signed,
            Action::Reload,
            None,
            Some("2001:db8::1".into()),
            403,
            "role viewer may not reload",
        ));
        log.record(Entry {
            actor: Actor::Signal,
            action: Action::Reload,
            job: None,
            address: None,
            result: Outcome::Ok,
            status: None,
            reason: None,
        });
        log.shutdown().await;
    });
    let (_, lines) = current_lines(dir.path());
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(
        lines[0]["actor"],
        serde_json::json!({"kind": "account", "name": "user1"})
    );
    assert_eq!(lines[0]["action"], "pause");
    assert_eq!(
        lines[0]["job"],
        serde_json::json!({"kind": "job_exec", "id": "deploy"})
    );
    assert_eq!(lines[0]["address"], "192.0.2.1");
    assert_eq!(lines[0]["result"], "ok");
    assert_eq!(lines[0]["status"], 200);
    assert!(lines[0].get("reason").is_none());
    let time = lines[0]["time"].as_str().expect("time");
    assert!(time.ends_with('Z'), "{time}");
    chrono::DateTime::parse_from_rfc3339(time).expect("RFC 3339");
    assert_eq!(lines[1]["actor"], serde_json::json!({"kind": "signed"}));
    assert_eq!(lines[1]["result"], "refused");
    assert_eq!(lines[1]["reason"], "role viewer may not reload");
    assert!(lines[1].get("job").is_none());
    assert_eq!(lines[2]["actor"], serde_json::json!({"kind": "signal"}));
    assert_eq!(lines[2]["address"], serde_json::Value::Null);
    assert_eq!(lines[2]["seq"], 3);
}

#[test]
fn rotation_keeps_five_files_and_seq_carries_on_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let line_len = {
        let record = Record {
            seq: 10,
            time: "2025-01-01T00:00:00.000Z".into(),
            entry: entry(1),
            node: None,
            repeated: None,
        };
        serde_json::to_vec(&record).expect("json").len() as u64 + 1
    };
    // Room for three lines per file.
    let max = line_len * 3 + 5;
    runtime().block_on(async {
        let log = AuditLog::start(dir.path(), max).expect("start");
        for n in 1..=20 {
            log.record(entry(n));
        }
        log.shutdown().await;
        // A restart takes the numbering up again.
        let log = AuditLog::start(dir.path(), max).expect("restart");
        for n in 21..=22 {
            log.record(entry(n));
        }
        log.flush().await;
        log.shutdown().await;
    });
    let seqs = |index: usize| -> Vec<u64> {
        fs::read_to_string(file_path(dir.path(), index))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Record>(l).expect("record").seq)
            .collect()
    };
    // 22 entries, three per file: the current file and five rotated ones hold the
    // newest 16 or so; the oldest are gone.
    assert_eq!(seqs(0), [22]);
    assert_eq!(seqs(1), [19, 20, 21]);
    assert_eq!(seqs(2), [16, 17, 18]);
    assert_eq!(seqs(5), [7, 8, 9]);
    assert!(!file_path(dir.path(), 6).exists());
    for index in 0..=KEEP_ROTATED {
        let size = fs::metadata(file_path(dir.path(), index))
            .expect("file")
            .len();
        assert!(size <= max, "file {index}: {size} > {max}");
    }

    // Pages go newest first through the current and the rotated files.
    let first = read_page(dir.path(), None, 4).expect("page");
    let got: Vec<u64> = first.records.iter().map(|r| r.seq).collect();
    assert_eq!(got, [22, 21, 20, 19]);
    assert_eq!(first.next_before, Some(19));
    let second = read_page(dir.path(), first.next_before, 4).expect("page");
    let got: Vec<u64> = second.records.iter().map(|r| r.seq).collect();
    assert_eq!(got, [18, 17, 16, 15]);
    let rest = read_page(dir.path(), Some(9), 100).expect("page");
    let got: Vec<u64> = rest.records.iter().map(|r| r.seq).collect();
    assert_eq!(got, [8, 7]);
    assert_eq!(rest.next_before, None);
    assert_eq!(rest.records[0].entry, entry(8));
}

#[test]
fn a_cut_line_is_skipped_and_an_empty_directory_is_an_empty_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(
        read_page(dir.path(), None, 10).expect("page"),
        Page {
            records: Vec::new(),
            next_before: None
        }
    );
    runtime().block_on(async {
        let log = AuditLog::start(dir.path(), 1 << 20).expect("start");
        log.record(entry(1));
        log.shutdown().await;
    });
    // A crash cut the next line short.
    let path = dir.path().join(AUDIT_FILE);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    file.write_all(b"{\"seq\":2,\"ti").expect("write");
    drop(file);
    let page = read_page(dir.path(), None, 10).expect("page");
    assert_eq!(page.records.len(), 1);
    runtime().block_on(async {
        let log = AuditLog::start(dir.path(), 1 << 20).expect("restart");
        log.record(entry(2));
        log.shutdown().await;
    });
    let page = read_page(dir.path(), None, 10).expect("page");
    let seqs: Vec<u64> = page.records.iter().map(|r| r.seq).collect();
    // The restart ended the cut line, and numbering goes on from the last whole one.
    assert_eq!(seqs, [2, 1]);
}

/// A client repeating a refused request: its first refusal is a line, the rest one line
/// with their count, written when the window ends or a reader flushes; the actions of
/// others between them are each a line of their own.
#[test]
fn repeated_refusals_are_one_line_with_their_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let busy = Entry::answered(
        Actor::Webhook { delivery: None },
        Action::Trigger,
        Some(JobRef {
            kind: "job_exec".into(),
            id: "build".into(),
        }),
        Some("192.0.2.9".into()),
        429,
        "job is running and a run is already queued",
    );
    runtime().block_on(async {
        let log = AuditLog::start(dir.path(), 1 << 20).expect("start");
        for _ in 0..500 {
            log.record(busy.clone());
        }
        log.record(entry(1));
        log.record(busy.clone());
        log.flush().await;
        log.record(busy.clone());
        log.shutdown().await;
    });
    let (text, lines) = current_lines(dir.path());
    // Quick as the writer is, a window (1 s) ends within the loop only on a machine that
    // stalls: then more lines, each refusal still counted once. Usually: the first
    // refusal, the pause, the count of the 500 others at the flush, the one after it.
    let refusals: u64 = lines
        .iter()
        .filter(|l| l["status"] == 429)
        .map(|l| l.get("repeated").and_then(|n| n.as_u64()).unwrap_or(1))
        .sum();
    assert_eq!(refusals, 502, "{text}");
    assert!(
        lines.len() <= 10,
        "{} lines for 502 refusals: {text}",
        lines.len()
    );
    assert_eq!(lines[0]["status"], 429);
    assert_eq!(lines[0].get("repeated"), None);
    assert_eq!(lines.iter().filter(|l| l["action"] == "pause").count(), 1);
    let counted: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l.get("repeated").is_some())
        .collect();
    assert!(!counted.is_empty(), "{text}");
    for line in counted {
        assert_eq!(line["reason"], "job is running and a run is already queued");
        assert_eq!(
            line["actor"],
            serde_json::json!({"kind": "webhook", "delivery": null})
        );
    }
    let last = lines.last().expect("lines");
    assert_eq!(
        (last["status"].as_u64(), last.get("repeated")),
        (Some(429), None),
        "the refusal after the flush opens a window: {text}"
    );
    let seqs: Vec<u64> = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=lines.len() as u64).collect::<Vec<_>>());
}
