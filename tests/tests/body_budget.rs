//! The webhook route refuses before it reads a body: an unknown path or a missing auth
//! header gets its answer without `100 Continue`, and bodies in flight share one budget
//! (`max_body_in_flight`), past which a request gets 503 with `Retry-After`.

use std::time::Duration;

use svc_tests::raw_http::{self, RawResponse};
use svc_tests::{TestService, WAIT, job_section, wait_until};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// Reads one response (or an interim `100 Continue`) off `stream`, for at most 10 s.
async fn read_response(stream: &mut TcpStream) -> RawResponse {
    raw_http::read_response(stream, Duration::from_secs(10))
        .await
        .expect("an answer before the connection closed")
}

/// Sends a request head announcing a `length`-byte body, with `Expect: 100-continue`.
async fn send_head(svc: &TestService, path: &str, length: usize, extra: &str) -> TcpStream {
    let mut stream = TcpStream::connect(svc.listen_address())
        .await
        .expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\nExpect: 100-continue\r\n{extra}\r\n",
        svc.listen_address()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
}

fn service(extra_main: &str) -> svc_tests::TestServiceBuilder {
    let builder = TestService::builder().job_file(
        "hook",
        job_section(
            "hook",
            &["path = /hook", "secret = hook-secret", "command = true"],
        ),
    );
    if extra_main.is_empty() {
        builder
    } else {
        builder.svc(extra_main)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_come_before_the_body_and_without_100_continue() {
    let svc = service("").start().await;
    let big = 25 * 1024 * 1024;
    let mut unknown = send_head(&svc, "/svc/api/job/run/nobody", big, "").await;
    let answer = read_response(&mut unknown).await;
    assert_eq!(answer.status, 404, "{}", answer.text());

    let mut unsigned = send_head(&svc, "/svc/api/job/run/hook", big, "").await;
    let answer = read_response(&mut unsigned).await;
    assert_eq!(answer.status, 401, "{}", answer.text());
    assert!(answer.text().contains("x-svc-sign"), "{}", answer.text());

    // With the header the job needs, the service asks for the body.
    let mut signed = send_head(&svc, "/svc/api/job/run/hook", 2, "X-Svc-Sign: 00\r\n").await;
    let answer = read_response(&mut signed).await;
    assert_eq!(answer.status, 100, "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_in_flight_share_one_budget() {
    let svc = service("max_body_in_flight = 1M").start().await;
    let signed = "X-Svc-Sign: 00\r\n";
    // A slow upload holds 900 KB of the 1 MiB budget while its body trickles in.
    let mut slow = send_head(&svc, "/svc/api/job/run/hook", 900_000, signed).await;
    assert_eq!(read_response(&mut slow).await.status, 100);
    slow.write_all(&[b' '; 1000])
        .await
        .expect("part of the body");

    let mut second = send_head(&svc, "/svc/api/job/run/hook", 200_000, signed).await;
    let refused = read_response(&mut second).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("1"));
    // A small body still fits.
    let small = svc.trigger_with_secret("/hook", b"{}", "hook-secret").await;
    small.assert_status(200);

    // The slow client goes away: its share comes back.
    drop(slow);
    wait_until(WAIT, "the budget to be free again", async || {
        let mut retry = send_head(&svc, "/svc/api/job/run/hook", 200_000, signed).await;
        read_response(&mut retry).await.status == 100
    })
    .await;
}
