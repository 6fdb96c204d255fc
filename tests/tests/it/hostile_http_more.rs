//! More hostile HTTP clients (see also hostile_http.rs):
//!
//! - 300 connections at once, half idle and half sending their head one byte a second,
//!   are all closed by the header read timeout (10 s) while a normal client keeps getting
//!   quick answers;
//! - bodies over the limit get 413 without the controller's memory growing with the size
//!   the client announces (20 MB to a 1 MiB route, a 200 MB claim to a 25 MiB route);
//! - no signing oracle: 401 answers never carry the expected signature, the secret or the
//!   body, and the time a wrong signature takes does not depend on how many of its
//!   leading bytes are right.
//!
//! The tests of this file measure time and memory, so they run one at a time.

use std::time::{Duration, Instant};

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::Value;
use svc_tests::{TestService, hmac_sha1_hex, hmac_sha256_hex, job_section};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The tests of this file run one after the other: they measure latency and memory.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

// ----- many slow and idle connections ---------------------------------------------------

const IDLE: usize = 150;
const SLOW: usize = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn hundreds_of_slow_and_idle_connections_are_closed_while_a_client_is_served() {
    let _serial = SERIAL.lock().await;
    let svc = TestService::builder().start().await;
    let address = svc.listen_address().to_owned();
    let opened = Instant::now();

    // Each connection task returns when the server closed it: (slow?, time since opened,
    // bytes it managed to send).
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..IDLE + SLOW {
        let slow = index >= IDLE;
        let stream = TcpStream::connect(&address).await.expect("connect");
        let host = address.clone();
        tasks.spawn(async move {
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
        });
    }
    let all_open = opened.elapsed();

    // Meanwhile a normal client is served promptly, on new connections each time.
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

// ----- no signing oracle ----------------------------------------------------------------

/// Messages a 401 may carry.
const SAFE_401: &[&str] = &[
    "signature does not match",
    "missing signature header x-svc-sign",
    "signature in header x-svc-sign is not valid hex",
    "missing signature header x-hub-signature-256",
    "signature in header x-hub-signature-256 is not valid hex",
    "signature in header x-hub-signature is not valid hex",
    "missing signature header x-payload-signature",
    "missing signature header x-payload-nonce",
    "signature in header x-payload-signature is not valid base64",
    "missing or invalid _svc_epoch",
    "_svc_epoch is more than 5 minutes away from the server clock",
];

/// A webhook request: path, what is wrong with it, its headers.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, String)>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn unauthorized_answers_never_echo_expected_values() {
    let _serial = SERIAL.lock().await;
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let public = base64::engine::general_purpose::STANDARD.encode(key.verifying_key().as_bytes());
    let own_secret = "job-own-secret-value-0123456789";
    let svc = TestService::builder()
        .job_file(
            "jobs",
            [
                job_section(
                    "hmac",
                    &[
                        "path = /hmac",
                        "command = true",
                        &format!("secret = {own_secret}"),
                    ],
                ),
                job_section("main", &["path = /main", "command = true"]),
                job_section(
                    "gh",
                    &[
                        "path = /gh",
                        "auth_kind = codehost",
                        "command = true",
                        &format!("secret = {own_secret}"),
                    ],
                ),
                job_section(
                    "srht",
                    &[
                        "path = /srht",
                        "auth_kind = patchhost",
                        "command = true",
                        &format!("public_key = {public}"),
                    ],
                ),
            ]
            .join("\n"),
        )
        .start()
        .await;
    let main_secret = svc.secret();
    let body = br#"{"ref":"refs/heads/main","marker":"body-marker-4242"}"#;
    let good_own = hmac_sha256_hex(own_secret, body);
    let good_main = hmac_sha256_hex(&main_secret, body);
    let good_sha1 = hmac_sha1_hex(own_secret, body);
    let mut nonce_signed = body.to_vec();
    nonce_signed.extend_from_slice(b"nonce-1");
    let good_ed =
        base64::engine::general_purpose::STANDARD.encode(key.sign(&nonce_signed).to_bytes());

    // One wrong byte, a truncated value, garbage, nothing, the other algorithm's value.
    let wrong = |good: &str| {
        let mut chars: Vec<char> = good.chars().collect();
        chars[0] = if chars[0] == '0' { '1' } else { '0' };
        chars.into_iter().collect::<String>()
    };
    let mut cases: Vec<Case> = vec![
        (
            "/hmac",
            "one wrong digit",
            vec![("x-svc-sign", wrong(&good_own))],
        ),
        (
            "/hmac",
            "truncated",
            vec![("x-svc-sign", good_own[..40].to_owned())],
        ),
        (
            "/hmac",
            "main secret's",
            vec![("x-svc-sign", good_main.clone())],
        ),
        ("/hmac", "not hex", vec![("x-svc-sign", "zz".repeat(32))]),
        ("/hmac", "missing", vec![]),
        (
            "/main",
            "one wrong digit",
            vec![("x-svc-sign", wrong(&good_main))],
        ),
        (
            "/main",
            "prefixed, wrong",
            vec![("x-svc-sign", format!("sha256={}", wrong(&good_main)))],
        ),
        (
            "/gh",
            "sha256 wrong",
            vec![(
                "x-hub-signature-256",
                format!("sha256={}", wrong(&good_own)),
            )],
        ),
        (
            "/gh",
            "sha1 wrong",
            vec![("x-hub-signature", format!("sha1={}", wrong(&good_sha1)))],
        ),
        ("/gh", "missing", vec![]),
        (
            "/srht",
            "signature of another nonce",
            vec![
                ("x-payload-signature", good_ed.clone()),
                ("x-payload-nonce", "nonce-2".into()),
            ],
        ),
        (
            "/srht",
            "not base64",
            vec![
                ("x-payload-signature", "!!!".into()),
                ("x-payload-nonce", "n".into()),
            ],
        ),
        (
            "/srht",
            "missing nonce",
            vec![("x-payload-signature", good_ed.clone())],
        ),
    ];
    let mut forbidden: Vec<String> = vec![
        main_secret.clone(),
        own_secret.to_owned(),
        good_own.clone(),
        good_main.clone(),
        good_sha1.clone(),
        good_ed.clone(),
        "body-marker-4242".to_owned(),
    ];
    // Half of an expected value is an oracle too.
    for good in [&good_own, &good_main, &good_sha1] {
        forbidden.push(good[..16].to_owned());
        forbidden.push(good[good.len() - 16..].to_owned());
    }
    let mut checked = 0;
    for (path, what, headers) in cases.drain(..) {
        let header_refs: Vec<(&str, &str)> =
            headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let response = svc.trigger_unsigned(path, body, &header_refs).await;
        response.assert_status(401);
        check_401(
            &format!("{path} ({what})"),
            &response.raw,
            response.message(),
            &forbidden,
        );
        checked += 1;
    }

    // The signed API calls.
    let (form, signature) = svc.job_exec_form("main");
    for action in ["pause", "resume", "cancel"] {
        for sign in [wrong(&signature), signature[..32].to_owned(), String::new()] {
            let response = svc
                .post(
                    &format!("/svc/api/job_exec/{action}"),
                    form.as_bytes(),
                    &[
                        ("content-type", "application/x-www-form-urlencoded"),
                        ("X-Svc-Sign", &sign),
                    ],
                )
                .await;
            response.assert_status(401);
            let mut forbidden = forbidden.clone();
            forbidden.push(signature.clone());
            forbidden.push(signature[..16].to_owned());
            check_401(
                &format!("{action} with {sign:?}"),
                &response.raw,
                response.message(),
                &forbidden,
            );
            checked += 1;
        }
    }
    println!("{checked} 401 answers checked: none echoes a secret, signature or body");
}

fn check_401(what: &str, raw: &str, message: &str, forbidden: &[String]) {
    assert!(
        SAFE_401.contains(&message),
        "{what}: unexpected 401 message {message:?} ({raw})"
    );
    for value in forbidden {
        assert!(
            !raw.to_ascii_lowercase()
                .contains(&value.to_ascii_lowercase()),
            "{what}: the 401 answer contains {value:?}: {raw}"
        );
    }
}

/// Requests per kind of wrong signature.
const TIMING_SAMPLES: usize = 300;
/// Largest median difference accepted between the two kinds of a pair: 2 ms, or a
/// twentieth of the median answer time when a loaded machine makes answers slower (its
/// noise grows with them; a comparison that leaks takes longer the more bytes are right,
/// by far less than either).
const TIMING_BOUND: Duration = Duration::from_millis(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_signature_time_does_not_depend_on_the_matching_prefix() {
    let _serial = SERIAL.lock().await;
    let svc = TestService::builder()
        .job_file(
            "main",
            job_section("main", &["path = /main", "command = true"]),
        )
        .start()
        .await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("{}/svc/api/job_exec/pause", svc.base_url());
    let (form, good) = svc.job_exec_form("main");
    let mut bytes = hex::decode(&good).expect("hex signature");
    // 0 leading bytes right: the first byte differs. 31 right: only the last differs.
    bytes[0] ^= 0xff;
    let none_right = hex::encode(&bytes);
    bytes[0] ^= 0xff;
    bytes[31] ^= 0xff;
    let all_but_one = hex::encode(&bytes);
    let send = async |signature: &str| {
        let start = Instant::now();
        let response = client
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("X-Svc-Sign", signature)
            .body(form.clone())
            .send()
            .await
            .expect("pause answers");
        let status = response.status();
        let text = response.text().await.expect("body");
        let took = start.elapsed();
        assert_eq!(status, 401, "{text}");
        assert!(text.contains("signature does not match"), "{text}");
        took
    };
    for _ in 0..50 {
        send(&none_right).await;
        send(&all_but_one).await;
    }
    let mut zero = Vec::with_capacity(TIMING_SAMPLES);
    let mut thirty_one = Vec::with_capacity(TIMING_SAMPLES);
    for round in 0..TIMING_SAMPLES {
        // Interleaved, alternating which goes first.
        if round % 2 == 0 {
            zero.push(send(&none_right).await);
            thirty_one.push(send(&all_but_one).await);
        } else {
            thirty_one.push(send(&all_but_one).await);
            zero.push(send(&none_right).await);
        }
    }
    // Each pair was sent back to back, so the load of the moment weighs on both: the
    // median of the pairs' differences, not the difference of the medians.
    let mut paired: Vec<i128> = zero
        .iter()
        .zip(&thirty_one)
        .map(|(t0, t31)| t31.as_nanos() as i128 - t0.as_nanos() as i128)
        .collect();
    paired.sort_unstable();
    let difference = Duration::from_nanos(paired[paired.len() / 2].unsigned_abs() as u64);
    let (m0, m31) = (median(&mut zero), median(&mut thirty_one));
    let bound = TIMING_BOUND.max(m0.max(m31) / 20);
    println!(
        "wrong signatures, {TIMING_SAMPLES} requests each: median {m0:?} with 0 leading bytes \
         right, {m31:?} with 31; median difference of the pairs {difference:?} (bound \
         {bound:?})"
    );
    assert!(
        difference < bound,
        "median difference of the pairs {difference:?}: median with 0 right bytes {m0:?}, \
         with 31 {m31:?}"
    );
    // The right signature still works (the test measured the real check).
    let response = svc
        .post(
            "/svc/api/job_exec/pause",
            form.as_bytes(),
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("X-Svc-Sign", &good),
            ],
        )
        .await;
    response.assert_status(200);
}
