//! More hostile HTTP clients (see also `hostile_http.rs`):
//!
//! - 300 connections at once, half idle and half sending their head one byte a second,
//!   are all closed by the header read timeout (10 s) while a normal client keeps getting
//!   quick answers;
//! - bodies over the limit get 413 without the controller's memory growing with the size
//!   the client announces (20 MB to a 1 MiB route, a 200 MB claim to a 25 MiB route).
//!
//! No signing oracle: `hostile_signatures.rs`. The tests of both files measure time and
//! memory, so they run one at a time.

use std::time::{Duration, Instant};

use serde_json::Value;
use svc_tests::{TestService, hmac_sha256_hex, job_section};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The tests of this file and of `hostile_signatures.rs` run one after the other: they
/// measure latency and memory.
pub(crate) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: i32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|err| panic!("read /proc/{pid}/status: {err}"));
    text.lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The median of `values` (sorted in place).
pub(crate) fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

// ----- many slow and idle connections ---------------------------------------------------

const IDLE: usize = 150;
const SLOW: usize = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_slow_and_idle_connections_are_closed_while_a_client_is_served() {
    let _serial = SERIAL.lock().await;
    let svc = TestService::builder().start().await;
    let address = svc.listen_address().to_owned();
    let opened = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..IDLE + SLOW {
        let slow = index >= IDLE;
        let stream = TcpStream::connect(&address).await.expect("connect");
        tasks.spawn(hold_until_closed(stream, slow, address.clone(), opened));
    }
    let all_open = opened.elapsed();
    let mut latencies = serve_a_client_meanwhile(&svc, opened).await;

    let mut closed_after = Vec::new();
    let mut slow_count = 0;
    while let Some(joined) = tasks.join_next().await {
        let (slow, after, answer) = joined.expect("a connection task");
        let answer = String::from_utf8_lossy(&answer).into_owned();
        assert_ne!(
            answer,
            "still open",
            "a {} connection is still open after 20 s",
            if slow { "slow" } else { "idle" }
        );
        assert!(
            !answer.contains(" 200 "),
            "no answer to an incomplete head: {answer:?}"
        );
        slow_count += usize::from(slow);
        closed_after.push(after);
    }
    closed_after.sort_unstable();
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    let answers = latencies.len();
    let median_latency = median(&mut latencies);
    println!(
        "{IDLE} idle + {SLOW} slow-header connections opened in {all_open:?}; closed between \
         {:?} and {:?}; {answers} environment answers meanwhile, median {median_latency:?}, \
         slowest {slowest:?}",
        closed_after[0],
        closed_after[closed_after.len() - 1],
    );
    assert_eq!(slow_count, SLOW);
    assert!(
        closed_after[0] >= Duration::from_secs(9),
        "a connection was closed after {:?}, before the 10 s header timeout",
        closed_after[0]
    );
    assert!(
        closed_after[closed_after.len() - 1]
            <= Duration::from_secs(10) + all_open * 2 + Duration::from_millis(2500),
        "the last connection was closed after {:?}",
        closed_after[closed_after.len() - 1]
    );
    assert!(answers >= 20, "only {answers} answers in 12 s");
    assert!(
        slowest < Duration::from_secs(1),
        "an environment answer took {slowest:?} with {} hostile connections open",
        IDLE + SLOW
    );
    svc.environment().await;
}

/// One hostile connection to `host`: idle, or when `slow` sending a request head one
/// byte a second that never ends. Returns when the server closed it (or after 20 s):
/// (slow?, time since `opened`, what the server sent, or `still open`).
async fn hold_until_closed(
    stream: TcpStream,
    slow: bool,
    host: String,
    opened: Instant,
) -> (bool, Duration, Vec<u8>) {
    let (mut reader, mut writer) = stream.into_split();
    let head = format!("GET /svc/api/environment HTTP/1.1\r\nHost: {host}\r\nX-Slow: ");
    // Never ends: after a write error it waits like an idle connection.
    let write = async {
        if slow {
            for byte in head.bytes().chain(std::iter::repeat(b'a')) {
                if writer.write_all(&[byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        std::future::pending::<()>().await
    };
    let read = async {
        let mut buf = [0u8; 1024];
        let mut answer = Vec::new();
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return answer,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    };
    let limit = Duration::from_secs(20);
    let answer = tokio::select! {
        answer = read => answer,
        _ = write => unreachable!("the writer never ends"),
        () = tokio::time::sleep(limit) => b"still open".to_vec(),
    };
    (slow, opened.elapsed(), answer)
}

/// Meanwhile (until 12 s after `opened`) a normal client is served promptly, on new
/// connections each time, every answer the Environment in its wrapper; returns how long
/// each answer took.
async fn serve_a_client_meanwhile(svc: &TestService, opened: Instant) -> Vec<Duration> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("{}/svc/api/environment", svc.base_url());
    let mut latencies = Vec::new();
    while opened.elapsed() < Duration::from_secs(12) {
        let start = Instant::now();
        let response = client.get(&url).send().await.expect("environment answers");
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.expect("the environment is JSON");
        assert_eq!(body["code"], 200, "{body}");
        latencies.push(start.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    latencies
}

// ----- oversized bodies -----------------------------------------------------------------

/// What became of a request with a large body.
#[derive(Debug)]
struct BigBody {
    status: Option<u16>,
    body: String,
    /// Body bytes written before the answer came (or the connection broke).
    sent: u64,
    took: Duration,
}

/// Sends `POST path` announcing `claimed` bytes of body (`Content-Length`, or chunked when
/// `None`), writes up to `send` bytes of it in 64 KiB pieces while reading the answer.
/// The client's send buffer, fixed: the kernel would grow it to `tcp_wmem`'s maximum
/// (4 MiB here) whatever the server does, and hide in it how much the server read.
const CLIENT_SEND_BUFFER: u32 = 64 * 1024;

/// A connection whose count of bytes sent tells how much the server took in: with the
/// send buffer fixed, and the receive window growing only as the server reads, the bytes
/// a client gets off its hands are what the server read plus a few hundred KiB in flight.
async fn small_send_buffer_connect(address: &str) -> TcpStream {
    let address: std::net::SocketAddr = address.parse().expect("an IP address and port");
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .expect("a socket");
    socket
        .set_send_buffer_size(CLIENT_SEND_BUFFER)
        .expect("SO_SNDBUF");
    socket.connect(address).await.expect("connect")
}

async fn post_big(
    address: &str,
    path: &str,
    headers: &[(&str, String)],
    claimed: Option<u64>,
    send: u64,
) -> BigBody {
    let started = Instant::now();
    let stream = small_send_buffer_connect(address).await;
    let (mut reader, mut writer) = stream.into_split();
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    match claimed {
        Some(length) => head.push_str(&format!("Content-Length: {length}\r\n")),
        None => head.push_str("Transfer-Encoding: chunked\r\n"),
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    // Never ends: once the body is written, or a write fails, it waits for the answer.
    let write = async move {
        if writer.write_all(head.as_bytes()).await.is_err() {
            return std::future::pending::<()>().await;
        }
        let piece = vec![b'x'; 64 * 1024];
        let chunk_head = format!("{:x}\r\n", piece.len());
        let mut written = 0u64;
        while written < send {
            let result = if claimed.is_some() {
                writer.write_all(&piece).await
            } else {
                let mut framed = chunk_head.clone().into_bytes();
                framed.extend_from_slice(&piece);
                framed.extend_from_slice(b"\r\n");
                writer.write_all(&framed).await
            };
            if result.is_err() {
                break;
            }
            written += piece.len() as u64;
            counter.store(written, std::sync::atomic::Ordering::SeqCst);
        }
        std::future::pending::<()>().await
    };
    let read = async {
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return answer,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
            if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if length.is_some_and(|length| answer.len() >= end + 4 + length) {
                    return answer;
                }
            }
        }
    };
    let answer = tokio::select! {
        answer = read => answer,
        () = write => unreachable!("the writer never ends"),
        () = tokio::time::sleep(Duration::from_secs(60)) => Vec::new(),
    };
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok());
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    BigBody {
        status,
        body,
        sent: sent.load(std::sync::atomic::Ordering::SeqCst),
        took: started.elapsed(),
    }
}

/// Samples `VmRSS` of `pid` every 5 ms while `work` runs; returns its output and the
/// highest sample.
async fn peak_rss_during<T>(pid: i32, work: impl std::future::Future<Output = T>) -> (T, u64) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            peak = peak.max(status_kib(pid, "VmRSS"));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        peak.max(status_kib(pid, "VmRSS"))
    });
    let output = work.await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let peak = sampler.await.expect("the sampler");
    (output, peak)
}

fn assert_wrapped_413(what: &str, answer: &BigBody) {
    assert_eq!(answer.status, Some(413), "{what}: {answer:?}");
    let json: Value = serde_json::from_str(&answer.body)
        .unwrap_or_else(|err| panic!("{what}: the 413 body is not JSON ({err}): {answer:?}"));
    assert_eq!(json["code"], 413, "{what}: {json}");
    assert!(json["message"].is_string(), "{what}: {json}");
}

/// Memory growth allowed while refusing a body, in KiB.
const FEW_MB: u64 = 8 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_get_413_without_memory_growing_with_their_size() {
    let _serial = SERIAL.lock().await;
    let svc = TestService::builder()
        .job_file(
            "deploy",
            job_section("deploy", &["path = /deploy", "command = true"]),
        )
        .start()
        .await;
    let pid = svc.pid().expect("the controller runs");
    let address = svc.listen_address().to_owned();
    // Warm up the paths measured, then take the baseline.
    for _ in 0..3 {
        let small = post_big(&address, "/svc/api/job_exec/pause", &[], Some(10), 10).await;
        assert_eq!(small.status, Some(401), "{small:?}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let baseline = status_kib(pid, "VmRSS");

    // 20 MB sent for real to a route that takes 1 MiB.
    let (api, api_peak) = peak_rss_during(
        pid,
        post_big(
            &address,
            "/svc/api/job_exec/pause",
            &[("X-Svc-Sign", "00".into())],
            Some(20_000_000),
            20_000_000,
        ),
    )
    .await;
    assert_wrapped_413("20 MB to /svc/api/job_exec/pause", &api);
    // The same, chunked: no length announced.
    let (chunked, chunked_peak) = peak_rss_during(
        pid,
        post_big(&address, "/svc/api/job_exec/pause", &[], None, 20_000_000),
    )
    .await;
    assert_wrapped_413("20 MB chunked to /svc/api/job_exec/pause", &chunked);

    // A 200 MB claim to the webhook route (limit 25 MiB); the client would send it all.
    let signature = hmac_sha256_hex(svc.secret(), b"irrelevant");
    let (hook, hook_peak) = peak_rss_during(
        pid,
        post_big(
            &address,
            "/svc/api/job/run/deploy",
            &[("X-Svc-Sign", signature)],
            Some(200_000_000),
            200_000_000,
        ),
    )
    .await;
    assert_wrapped_413("a 200 MB claim to /svc/api/job/run/deploy", &hook);

    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = status_kib(pid, "VmRSS");
    println!(
        "VmRSS baseline {baseline} KiB; 20 MB to a 1 MiB route: 413 after {} KiB sent in {:?}, \
         peak {api_peak} KiB; 20 MB chunked: 413 after {} KiB in {:?}, peak {chunked_peak} KiB; \
         200 MB claim to the 25 MiB route: 413 after {} KiB sent in {:?}, peak {hook_peak} KiB; \
         2 s later {after} KiB",
        api.sent / 1024,
        api.took,
        chunked.sent / 1024,
        chunked.took,
        hook.sent / 1024,
        hook.took,
    );
    for (what, peak) in [
        ("20 MB to a 1 MiB route", api_peak),
        ("20 MB chunked to a 1 MiB route", chunked_peak),
    ] {
        assert!(
            peak < baseline + FEW_MB,
            "{what}: VmRSS rose from {baseline} KiB to {peak} KiB"
        );
    }
    // At most the route's limit is ever read, never the size announced.
    assert!(
        hook_peak < baseline + 25 * 1024 + FEW_MB,
        "200 MB claim: VmRSS rose from {baseline} KiB to {hook_peak} KiB"
    );
    assert!(
        hook.sent < 25 * 1024 * 1024,
        "the server took {} bytes of a body over its 25 MiB limit before answering",
        hook.sent
    );
    assert!(
        after < baseline + 25 * 1024 + FEW_MB,
        "VmRSS {after} KiB two seconds later (baseline {baseline} KiB)"
    );
    svc.environment().await;
}

/// A `Content-Length` above the route's limit is refused from the head alone, before
/// the body is read: a 200 MB claim to a webhook costs neither memory nor reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_length_over_the_limit_is_refused_before_the_body_is_read() {
    let _serial = SERIAL.lock().await;
    let svc = TestService::builder()
        .job_file(
            "deploy",
            job_section("deploy", &["path = /deploy", "command = true"]),
        )
        .start()
        .await;
    let pid = svc.pid().expect("the controller runs");
    let address = svc.listen_address().to_owned();
    let baseline = status_kib(pid, "VmRSS");
    let (hook, peak) = peak_rss_during(
        pid,
        post_big(
            &address,
            "/svc/api/job/run/deploy",
            &[("X-Svc-Sign", "00".into())],
            Some(200_000_000),
            200_000_000,
        ),
    )
    .await;
    assert_wrapped_413("a 200 MB claim", &hook);
    println!(
        "413 after {} KiB sent; VmRSS {baseline} -> {peak} KiB",
        hook.sent / 1024
    );
    assert!(peak < baseline + FEW_MB, "VmRSS {baseline} -> {peak} KiB");
    // What is in flight: the client's send buffer (the kernel doubles what is set) and
    // the server's first receive window, which grows only as the server reads.
    assert!(
        hook.sent < 1024 * 1024,
        "the server took {} bytes first",
        hook.sent
    );
}
