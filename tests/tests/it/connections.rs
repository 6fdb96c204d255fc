//! Connection limits and deadlines: a body dripped a byte at a time is cut at
//! `http_body_timeout`; past `max_connections` the oldest idle connection makes room for
//! a new one, and when every connection is busy the newcomer gets 503 with
//! `Retry-After` at once instead of waiting in the kernel's backlog; the open-file limit
//! is raised for connections and given back to jobs.

use std::time::{Duration, Instant};

use svc_tests::raw_http::{self, RawResponse};
use svc_tests::{TestService, WAIT, job_section};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// Longest wait for an answer that should come at once.
const ANSWER: Duration = Duration::from_secs(10);

fn service(extra_main: &[&str]) -> svc_tests::TestServiceBuilder {
    let mut builder = TestService::builder().job_file(
        "hook",
        job_section(
            "hook",
            &[
                "path = /hook",
                "secret = hook-secret",
                "command = ulimit -Sn",
            ],
        ),
    );
    for line in extra_main {
        builder = builder.svc(*line);
    }
    builder
}

/// Sends the head of a signed-looking webhook announcing a `length`-byte body.
async fn webhook_head(svc: &TestService, length: usize, expect_continue: bool) -> TcpStream {
    let mut stream = TcpStream::connect(svc.listen_address())
        .await
        .expect("connect");
    let expect = if expect_continue {
        "Expect: 100-continue\r\n"
    } else {
        ""
    };
    let head = format!(
        "POST /svc/api/job/run/hook HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\nX-Svc-Sign: 00\r\n{expect}\r\n",
        svc.listen_address()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
}

/// Sends a GET of the Environment on `stream` and reads the answer.
async fn get_environment(stream: &mut TcpStream, address: &str) -> Option<RawResponse> {
    let request = format!("GET /svc/api/environment HTTP/1.1\r\nHost: {address}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return None;
    }
    raw_http::read_response(stream, ANSWER).await
}

/// True when the server has closed `stream` (read gives end of file or an error now).
fn is_closed(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 16];
    match stream.try_read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(err) => err.kind() != std::io::ErrorKind::WouldBlock,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_dripped_past_http_body_timeout_is_cut_off() {
    let svc = service(&["http_body_timeout = 2s"]).start().await;
    let length = 1000;
    let mut stream = webhook_head(&svc, length, false).await;
    let (mut reader, mut writer) = stream.split();
    let started = Instant::now();
    // One byte every 100 ms: each well within the 60 s allowed between reads, the whole
    // body would take 100 s.
    let drip = async {
        let mut sent = 0;
        while sent < length {
            if writer.write_all(b" ").await.is_err() {
                break;
            }
            sent += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        sent
    };
    let answer = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            let n = tokio::io::AsyncReadExt::read(&mut reader, &mut chunk)
                .await
                .unwrap_or(0);
            buf.extend_from_slice(&chunk[..n]);
            if n == 0 || raw_http::parse_response(&buf, false, false).is_some() {
                return raw_http::parse_response(&buf, true, false);
            }
        }
    };
    let cut = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::select! {
            answer = answer => answer,
            sent = drip => panic!("all {sent} bytes were accepted"),
        }
    })
    .await
    .expect("the dripping client was not cut off within 30 s");
    let after = started.elapsed();
    let answer = cut.expect("an answer before the close");
    assert_eq!(answer.status, 408, "{}", answer.text());
    assert!(
        answer.text().contains("http_body_timeout"),
        "{}",
        answer.text()
    );
    assert!(
        after >= Duration::from_secs(2),
        "cut after {after:?}, before the 2 s deadline"
    );
    // The service goes on answering.
    svc.environment().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_the_oldest_idle_connection_makes_room() {
    let svc = service(&["max_connections = 4"]).start().await;
    let address = svc.listen_address().to_owned();
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(&address).await.expect("connect"));
    }
    // Served at once although four idle connections fill the limit (before, it waited
    // for a slot until the header timeout closed one, 10 s later).
    let mut fresh = TcpStream::connect(&address).await.expect("connect");
    let answer = get_environment(&mut fresh, &address)
        .await
        .expect("an answer past the limit");
    assert_eq!(answer.status, 200, "{}", answer.text());

    // Exactly the oldest made room; the others are still open.
    svc_tests::wait_until(ANSWER, "the oldest idle connection to close", async || {
        is_closed(&idle[0])
    })
    .await;
    for (index, stream) in idle.iter().enumerate().skip(1) {
        assert!(!is_closed(stream), "idle connection {index} was closed too");
    }
    let text = reqwest::get(format!("{}/svc/api/metrics", svc.base_url()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        text.contains("svc_http_connections_shed_total{reason=\"idle_closed\"}"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_connection_is_busy_a_new_one_gets_503_at_once() {
    let svc = service(&["max_connections = 3"]).start().await;
    let address = svc.listen_address().to_owned();
    // Three uploads in their handlers (the service asked for their bodies).
    let mut busy = Vec::new();
    for _ in 0..3 {
        let mut stream = webhook_head(&svc, 10, true).await;
        let interim = raw_http::read_response(&mut stream, ANSWER)
            .await
            .expect("100 Continue");
        assert_eq!(interim.status, 100);
        busy.push(stream);
    }
    let mut refused = TcpStream::connect(&address).await.expect("connect");
    let answer = get_environment(&mut refused, &address)
        .await
        .expect("an answer, not a silent close");
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert!(
        answer.text().contains("too many connections"),
        "{}",
        answer.text()
    );

    // One upload ends (a wrong signature): its connection is idle again, and the next
    // newcomer is served in its place.
    busy[0].write_all(b"{\"a\":100}\n").await.expect("body");
    let answer = raw_http::read_response(&mut busy[0], ANSWER)
        .await
        .expect("the upload's answer");
    assert_eq!(answer.status, 401, "{}", answer.text());
    svc_tests::wait_until(WAIT, "a newcomer to be served", async || {
        let mut stream = TcpStream::connect(&address).await.expect("connect");
        get_environment(&mut stream, &address)
            .await
            .is_some_and(|answer| answer.status == 200)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_file_limit_is_raised_for_connections_and_given_back_to_jobs() {
    use nix::sys::resource::{Resource, getrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    // As systemd starts services: a low soft limit under a high hard one, set for the
    // controller alone (util-linux's prlimit), since every test of this binary shares
    // its process's limits.
    let low = 512.min(hard);
    let nofile = format!("--nofile={low}:{hard}");
    let svc = service(&[])
        .wrapper(&["prlimit", &nofile, "--"])
        .start()
        .await;

    let pid = svc.pid().expect("pid");
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .expect("open files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        fields[3],
        hard.to_string(),
        "the controller's soft limit: {line}"
    );

    let accepted = svc.trigger_with_secret("/hook", b"{}", "hook-secret").await;
    accepted.assert_status(200);
    svc.wait_run_finished("hook", 1, WAIT).await;
    let log = svc.log_content("hook", 1).await;
    assert!(
        log.lines()
            .any(|line| line.trim_end().ends_with(&format!(" {low}"))
                || line.trim() == low.to_string()),
        "the job's soft limit is not {low}: {log}"
    );
}
