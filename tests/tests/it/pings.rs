//! Health pings (`ping_url`), end to end: the real controller tells a loopback receiver
//! (`svc_tests::sink`) of each run's start and end, healthchecks.io style: `/start`, then
//! the URL itself on success or `/<exit code>` on failure, with the end of the log as
//! body; a ping the receiver refuses is tried again; a receiver that never answers holds
//! up no run and no stop; the log never shows the check's secret.

use std::time::{Duration, Instant};

use svc_tests::sink::{Received, Sink};
use svc_tests::{TestService, WAIT, job_section, wait_until};

/// The secret part of the checks' URLs, as healthchecks.io hands them out.
const UUID: &str = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278";
const UUID_2: &str = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f";

/// The paths of `requests`.
fn paths(requests: &[Received]) -> Vec<&str> {
    requests.iter().map(|r| r.path.as_str()).collect()
}

/// A job with `command` whose check is `url`.
fn pinged_job(name: &str, command: &str, url: &str) -> String {
    job_section(
        name,
        &[
            &format!("path = /{name}"),
            &format!("command = {command}"),
            &format!("ping_url = {url}"),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_pings_its_start_then_success_or_its_exit_code() {
    let sink = Sink::start(0).await;
    let good_url = sink.url(&format!("/ping/{UUID}"));
    let bad_url = sink.url(&format!("/ping/{UUID_2}"));
    let mut svc = TestService::builder()
        .job_file("good", pinged_job("good", "echo all fine", &good_url))
        .job_file(
            "bad",
            pinged_job("bad", "echo out of disk >&2; exit 3", &bad_url),
        )
        .start()
        .await;

    svc.run_now("good").await.assert_status(200);
    svc.wait_run_finished("good", 1, WAIT)
        .await
        .assert_status("success");
    let requests = sink.wait_requests(2).await;
    assert_eq!(
        paths(&requests),
        [format!("/ping/{UUID}/start"), format!("/ping/{UUID}")],
        "the start, then the success"
    );
    let (start, end) = (&requests[0], &requests[1]);
    for request in [start, end] {
        assert_eq!(request.method, "POST");
        let agent = request.headers.get("user-agent").map(String::as_str);
        assert!(
            agent.is_some_and(|a| a.starts_with("svc/")),
            "User-Agent: {agent:?}"
        );
    }
    assert_eq!(start.text(), "", "a start has no body");
    assert!(
        end.headers["content-type"].starts_with("text/plain"),
        "{:?}",
        end.headers
    );
    let body = end.text();
    assert!(body.lines().any(|l| l.ends_with(" all fine")), "{body}");
    assert!(
        body.lines()
            .any(|l| l.contains("=== run 1 finished: success")),
        "the end of the log: {body}"
    );

    svc.run_now("bad").await.assert_status(200);
    svc.wait_run_finished("bad", 1, WAIT)
        .await
        .assert_status("fail");
    let requests = sink.wait_requests(4).await;
    assert_eq!(
        paths(&requests[2..]),
        [format!("/ping/{UUID_2}/start"), format!("/ping/{UUID_2}/3")],
        "the start, then the exit code"
    );
    let body = requests[3].text();
    assert!(
        body.lines().any(|l| l.ends_with(" 2> out of disk")),
        "stderr, marked: {body}"
    );

    // Nothing more: one start and one end per run.
    assert_eq!(sink.received().len(), 4);
    // The sink has the requests once they are read, the controller counts them as sent
    // once it has read the answer: polled, not read once.
    wait_until(WAIT, "4 pings counted as sent", async || {
        svc.get("/svc/api/metrics")
            .await
            .raw
            .contains("svc_pings_total{result=\"sent\"} 4")
    })
    .await;
    assert_eq!(svc.stop().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_ping_is_tried_again_and_its_secret_stays_out_of_the_log() {
    // The first request (the start) is answered 500.
    let sink = Sink::start(1).await;
    let mut svc = TestService::builder()
        .job_file(
            "nightly",
            pinged_job("nightly", "true", &sink.url(&format!("/ping/{UUID}"))),
        )
        .start()
        .await;
    svc.run_now("nightly").await.assert_status(200);
    svc.wait_run_finished("nightly", 1, WAIT)
        .await
        .assert_status("success");
    // The retry waits 2 s; the end waits behind it, so the order holds.
    let requests = sink.wait_requests(3).await;
    assert_eq!(
        paths(&requests),
        [
            format!("/ping/{UUID}/start"),
            format!("/ping/{UUID}/start"),
            format!("/ping/{UUID}"),
        ],
        "the refused start again, then the end"
    );
    let stderr = svc.stderr();
    let retried = stderr
        .lines()
        .find(|line| line.contains("health ping failed; trying again"))
        .unwrap_or_else(|| panic!("the failed attempt is logged: {stderr}"));
    for part in [
        "job=\"nightly\"",
        "counter=1",
        "ping=\"start\"",
        "attempt=1",
        "HTTP 500",
    ] {
        assert!(retried.contains(part), "{part} in {retried}");
    }
    // The whole URL is the check's credential: its host, and nothing of its path.
    let shown = sink.url("/[redacted]");
    assert!(retried.contains(&shown), "{shown} in {retried}");
    assert!(
        !retried.contains("/ping"),
        "no part of the path in {retried}"
    );
    assert_eq!(svc.stop().await.code(), Some(0));
    assert!(
        !svc.stderr().contains(UUID),
        "the check's secret is never logged: {}",
        svc.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_never_answers_holds_up_no_run_nor_the_stop() {
    let silent = Sink::silent().await;
    let mut svc = TestService::builder()
        .job_file(
            "busy",
            pinged_job("busy", "echo done", &silent.url(&format!("/ping/{UUID}"))),
        )
        .start()
        .await;
    svc.run_now("busy").await.assert_status(200);
    svc.wait_run_finished("busy", 1, WAIT)
        .await
        .assert_status("success");
    // The start is held by the receiver (for up to 10 s per attempt) ...
    silent.wait_requests(1).await;
    // ... and the next runs start and end all the same.
    for counter in 2..=3 {
        svc.run_now("busy").await.assert_status(200);
        svc.wait_run_finished("busy", counter, WAIT)
            .await
            .assert_status("success");
    }
    svc.wait_job_status("busy", "success", WAIT).await;
    // One ping of the job at a time, in order: while the start of run 1 is held (or
    // tried again), nothing else of the job is sent.
    let start = format!("/ping/{UUID}/start");
    assert!(
        paths(&silent.received()).iter().all(|p| *p == start),
        "{:?}",
        paths(&silent.received())
    );

    // The stop drops what is under way or waiting, and says so.
    let asked = Instant::now();
    let status = svc.stop().await;
    assert_eq!(status.code(), Some(0));
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    wait_until(WAIT, "the dropped pings logged", async || {
        svc.stderr()
            .contains("health pings not sent: the service stopped before they could be")
    })
    .await;
}
