//! How a run's output lands in its log, read back through the log endpoint as a client
//! reads it: standard error lines marked `2> ` after their time, standard output lines
//! unmarked, a line written in pieces kept whole, partial lines at a command's end and
//! very long lines cut without losing their mark (docs/formats.md).

use svc_tests::{LogLine, TestService, WAIT, job_section, parse_log_lines};

/// Length of the long stderr line: past the 64 KiB a partial line may wait for its
/// newline, so the log cuts it.
const LONG: usize = 100_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_lines_are_marked_and_lines_stay_whole() {
    let long =
        format!("command = head -c {LONG} /dev/zero | tr '\\0' e >&2; echo >&2; echo after-long");
    let svc = TestService::builder()
        .job_file(
            "mixed",
            job_section(
                "mixed",
                &[
                    "path = /mixed",
                    // Each stream written in several pieces, by several processes, the
                    // two streams interleaved.
                    "command = echo out-1; echo err-1 >&2; printf 'out-'; printf 'err-' >&2; \
                     printf '2\\n'; printf '2\\n' >&2; echo '2> looks marked'",
                    // A stderr line without its newline when the command ends, and a
                    // stdout one.
                    "command = printf 'err-no-newline' >&2; printf 'out-no-newline'",
                    &long,
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/mixed", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("mixed", 1, WAIT)
        .await
        .assert_status("success");

    let content = svc.log_content("mixed", 1).await;
    svc_tests::check_timestamps(&content).expect("every line has its time");
    let texts: Vec<String> = parse_log_lines(&content)
        .into_iter()
        .map(|LogLine { text, .. }| text)
        .collect();
    let has = |line: &str| texts.iter().any(|t| t == line);
    for line in [
        "out-1",
        "2> err-1",
        "out-2",
        "2> err-2",
        "2> err-no-newline",
        "out-no-newline",
        "after-long",
    ] {
        assert!(has(line), "no line {line:?} in:\n{content}");
    }
    // Stdout text that happens to start like the marker is written as it came: the
    // mark is the log's, never added to stdout, and a stderr line gets it once.
    assert!(has("2> looks marked"), "{content}");
    assert!(
        !texts.iter().any(|t| t.starts_with("2> 2> ")),
        "marked twice:\n{content}"
    );
    // Within a stream, the order is the command's.
    let at = |line: &str| texts.iter().position(|t| t == line);
    assert!(at("out-1") < at("out-2") && at("2> err-1") < at("2> err-2"));

    // The long line is cut into several log lines, each marked, none of it lost.
    let only_e = |t: &str| !t.is_empty() && t.bytes().all(|b| b == b'e');
    let parts: Vec<&String> = texts
        .iter()
        .filter(|t| only_e(t.strip_prefix("2> ").unwrap_or(t)))
        .collect();
    // Cut every 64 KiB, wherever the pipe happened to split it.
    let lengths: Vec<usize> = parts.iter().map(|t| t.len() - "2> ".len()).collect();
    assert_eq!(lengths, [65_536, LONG - 65_536], "the long line's parts");
    assert!(
        parts.iter().all(|t| t.starts_with("2> e")),
        "every part of the long stderr line is marked"
    );
    let total: usize = parts.iter().map(|t| t.len() - "2> ".len()).sum();
    assert_eq!(total, LONG, "the long line's bytes, all of them");
    // svc's own lines are not marked.
    assert!(texts[0].starts_with("=== run 1 "), "{content}");
    assert!(
        texts
            .last()
            .is_some_and(|t| t.starts_with("=== run 1 finished: success")),
        "{content}"
    );
}
