//! A run's log keeps at most `log_max_size` bytes of output, cut on a line boundary with
//! a line that says so, and still ends with the run's result.

use svc_tests::{TestService, WAIT, job_section};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_past_log_max_size_is_cut_with_a_marker() {
    let svc = TestService::builder()
        .svc("log_max_size = 1M")
        .job_file(
            "loud",
            job_section(
                "loud",
                &[
                    "path = /loud",
                    // About 3 MB of output in 50-byte lines.
                    "command = yes 0123456789012345678901234567890123456789012345678 | head -c 3000000",
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/loud", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("loud", 1, WAIT).await;
    log.assert_status("success");
    let size = std::fs::metadata(&log.path).expect("log file").len();
    assert!(
        size <= (1 << 20) + 1024,
        "the log holds {size} bytes, past the limit"
    );
    let texts = log.texts();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("output cut at 1048576 bytes (log_max_size)")),
        "a line says the output was cut"
    );
    let last = texts.last().cloned().unwrap_or_default();
    assert!(last.starts_with("=== run 1 finished: success"), "{last}");
    svc_tests::check_timestamps(&log.content()).expect("every line has its time");
}
