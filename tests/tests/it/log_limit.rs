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

/// VmHWM (peak resident memory) of `pid` in KiB.
fn peak_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

/// A service whose job `old` has a finished log of about `mib` MiB, written before the
/// service starts (as an older version, or upstream, could have left it); its content.
async fn with_an_old_log(mib: usize) -> (TestService, String) {
    let builder = TestService::builder().job_file(
        "old",
        job_section("old", &["path = /old", "command = true"]),
    );
    let dir = builder.dir_base().join("var/log/svc/job/old");
    std::fs::create_dir_all(&dir).expect("log dir");
    let line = "2026-11-01 10:00:00 UTC 0123456789012345678901234567890123456789\n";
    let content = line.repeat(mib * 1024 * 1024 / line.len());
    std::fs::write(dir.join("old.1.success"), &content).expect("write the log");
    (builder.start().await, content)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_log_is_streamed_not_loaded() {
    // A 40 MiB log from before log_max_size (an older version, or taken over from
    // upstream): read whole, its base64 and the JSON holding it would cost ~150 MiB.
    let (svc, content) = with_an_old_log(40).await;
    let pid = svc.pid().expect("pid");
    let before = peak_kib(pid);

    let read = svc.log_content("old", 1).await;
    assert_eq!(read.len(), content.len());
    assert!(read == content, "the log read back differs");
    let after = peak_kib(pid);
    println!("controller peak RSS {before} KiB before the read, {after} KiB after");
    assert!(
        after < before + 16 * 1024,
        "reading a 40 MiB log raised the controller's peak RSS from {before} to {after} KiB"
    );
}

/// Bytes waiting to be read on `stream`'s socket.
fn queued(stream: &tokio::net::TcpStream) -> usize {
    use std::os::fd::AsRawFd as _;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which lives for the call; the
    // descriptor is the stream's own, open while it is borrowed.
    let done = unsafe { libc::ioctl(stream.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(done, 0, "FIONREAD");
    usize::try_from(n).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_streams_nobody_reads_cost_a_bounded_amount() {
    // The review's memory finding: 64 clients that opened the stream of a finished
    // 10 MiB log and never read took the controller from 11 MB to 762 MB (the rest of
    // the log was read at once and queued as base64 events).
    let (svc, content) = with_an_old_log(10).await;
    let pid = svc.pid().expect("pid");
    let before = peak_kib(pid);

    let mut clients = Vec::new();
    for _ in 0..64 {
        let mut stream = tokio::net::TcpStream::connect(svc.listen_address())
            .await
            .expect("connect");
        let request = format!(
            "GET /svc/api/job_exec/log/stream?id=old&counter=1 HTTP/1.1\r\nHost: {}\r\n\r\n",
            svc.listen_address()
        );
        tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
            .await
            .expect("write");
        clients.push(stream);
    }
    // The server has written all it will once no client's queue grows any more (the
    // sockets' buffers are full): then whatever it holds for them is at its peak.
    // (Or once the bound is passed already: the assertion below then says by how much.)
    let mut last: Vec<usize> = vec![0; clients.len()];
    svc_tests::wait_until(
        WAIT,
        "every stream to stall on its full socket",
        async || {
            let now: Vec<usize> = clients.iter().map(queued).collect();
            let stalled = now.iter().all(|n| *n > 0) && now == last;
            last = now;
            stalled || peak_kib(pid) >= before + 16 * 1024
        },
    )
    .await;
    let after = peak_kib(pid);
    println!("controller peak RSS {before} KiB before 64 unread streams, {after} KiB with them");
    assert!(
        after < before + 16 * 1024,
        "64 unread streams of a 10 MiB log raised the peak RSS from {before} to {after} KiB"
    );
    // The service still answers, and a reader still gets the whole log.
    assert_eq!(svc.log_content("old", 1).await.len(), content.len());
    drop(clients);
}
