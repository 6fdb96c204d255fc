//! Hostile HTTP clients: malformed requests of every kind over raw TCP, idle connections
//! and a client that sends its head one byte at a time. The service must keep answering
//! others, keep every answer of its API in the JSON wrapper, and close connections that
//! do not send a request head within the header read timeout (10 s).
//!
//! The malformed requests come from a seeded generator; the seed is printed, and
//! `SVC_HOSTILE_SEED=<n>` replays a run.

use std::io::Read as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use svc_tests::raw_http::{RawResponse, parse_response};
use svc_tests::{TestService, job_section};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// How long one malformed request may take before it counts as unanswered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Number of malformed requests sent.
const REQUESTS: usize = 300;
/// Malformed requests in flight at once.
const PARALLEL: usize = 16;

// ----- responses -------------------------------------------------------------------------

/// What became of one malformed request.
#[derive(Debug)]
enum Outcome {
    Answered(RawResponse),
    /// The server closed (or reset) the connection without a whole answer.
    Closed,
    /// Nothing within [`REQUEST_TIMEOUT`].
    TimedOut,
}

/// Sends `bytes` on a new connection (half-closing it afterwards when `half_close`) and
/// reads one answer.
async fn exchange(address: &str, bytes: &[u8], half_close: bool, head_request: bool) -> Outcome {
    let attempt = async {
        let Ok(mut stream) = TcpStream::connect(address).await else {
            return Outcome::Closed;
        };
        // A server may answer before everything is written; keep reading regardless.
        let (mut reader, mut writer) = stream.split();
        let write = async {
            let _ = writer.write_all(bytes).await;
            if half_close {
                let _ = writer.shutdown().await;
            }
            // Keep the write half open (when not half-closed) while the answer is read.
            std::future::pending::<()>().await;
        };
        let read = async {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 16 * 1024];
            loop {
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => {
                        return parse_response(&buf, true, head_request)
                            .map_or(Outcome::Closed, Outcome::Answered);
                    }
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(response) = parse_response(&buf, false, head_request) {
                            return Outcome::Answered(response);
                        }
                    }
                }
            }
        };
        tokio::select! {
            outcome = read => outcome,
            () = write => unreachable!("the writer never ends"),
        }
    };
    tokio::time::timeout(REQUEST_TIMEOUT, attempt)
        .await
        .unwrap_or(Outcome::TimedOut)
}

// ----- the generator ---------------------------------------------------------------------

/// One generated request.
#[derive(Debug, Clone)]
struct Hostile {
    bytes: Vec<u8>,
    /// The request target as sent (lossy), for messages.
    target: String,
    /// The path the server sees starts with `/svc/api`.
    api_path: bool,
    head_request: bool,
    half_close: bool,
    /// The protocol defects put in.
    defects: Vec<Defect>,
}

fn pick<'a, T: ?Sized>(rng: &mut StdRng, items: &'a [&'a T]) -> &'a T {
    items[rng.random_range(0..items.len())]
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.random::<u8>()).collect()
}

/// Bytes that are not valid UTF-8 (a lone continuation byte, an overlong form, ...).
fn invalid_utf8(rng: &mut StdRng) -> Vec<u8> {
    let pieces: [&[u8]; 6] = [
        b"\x80",
        b"\xc3\x28",
        b"\xe2\x82",
        b"\xf0\x28\x8c\xbc",
        b"\xff\xfe",
        b"\xc0\xaf",
    ];
    pieces[rng.random_range(0..pieces.len())].to_vec()
}

const ROUTES: &[&str] = &[
    "/svc/api/environment",
    "/svc/api/job_exec/pause",
    "/svc/api/job_exec/resume",
    "/svc/api/job_exec/cancel",
    "/svc/api/job/pause",
    "/svc/api/job/resume",
    "/svc/api/job_exec/log",
    "/svc/api/job/log",
    "/svc/api/job_http",
    "/svc/api/job_http/logs",
    "/svc/api/job_http/log",
    "/svc/api/job_http/pause",
    "/svc/api/job_http/resume",
    "/svc/api/job/run/deploy",
    "/svc/api/job_exec/run/deploy",
    "/svc/api/job/run/",
    "/svc/api/nothing",
    "/svc/api/",
    "/svc/api",
];

const ELSEWHERE: &[&str] = &[
    "/",
    "/svc",
    "/svc/",
    "/svc/doc",
    "/svc/job/deploy",
    "/index.html",
    "/../../etc/passwd",
    "/svc/../svc/api/environment",
];

const QUERY_PIECES: &[&str] = &[
    "id=hello",
    "id=",
    "id=%zz",
    "id=%",
    "id=%C3%28",
    "id=a/b",
    "counter=1",
    "counter=x",
    "counter=99999999999999999999999",
    "id=hello&counter=1",
    "id=ping",
    "%",
    "&&&",
    "=",
    "id=hello%00",
];

/// A request target that hyper accepts (printable ASCII), hostile in its content: odd
/// segments, bad percent-encoding, percent-encoded invalid UTF-8, long paths, queries.
fn target(rng: &mut StdRng) -> Vec<u8> {
    let mut path: Vec<u8> = if rng.random_bool(0.75) {
        pick(rng, ROUTES).as_bytes().to_vec()
    } else {
        pick(rng, ELSEWHERE).as_bytes().to_vec()
    };
    match rng.random_range(0..10) {
        0 => path.extend_from_slice(b"/%zz"),
        1 => path.extend_from_slice(b"/%"),
        2 => path.extend_from_slice(b"/%C3%28/%ff%fe"),
        3 => {
            // Any of the characters a path may hold, `%` included (often badly).
            const CHARS: &[u8] = b"abcXYZ019-._~!$&'()*+,;=:@%/";
            path.push(b'/');
            let len = rng.random_range(1..40);
            path.extend((0..len).map(|_| CHARS[rng.random_range(0..CHARS.len())]));
        }
        4 => path.extend(std::iter::repeat_n(b'a', rng.random_range(1000..20_000))),
        _ => {}
    }
    if rng.random_bool(0.6) {
        path.push(b'?');
        let count = rng.random_range(1..4);
        for index in 0..count {
            if index > 0 {
                path.push(b'&');
            }
            path.extend_from_slice(pick(rng, QUERY_PIECES).as_bytes());
        }
    }
    path
}

const METHODS: &[&str] = &[
    "GET", "GET", "GET", "POST", "POST", "POST", "POST", "PUT", "DELETE", "HEAD", "OPTIONS",
    "PATCH", "TRACE", "BREW", "get",
];

/// What makes a request invalid at the protocol level (hyper refuses most of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A method that is not a token.
    Method,
    /// Raw bytes that are not UTF-8, or control characters, in the target.
    Target,
    Version,
    /// A Content-Length that is absurd, negative, not a number or given twice.
    ContentLength,
    /// Chunked encoding with a bad chunk size.
    Chunk,
    /// A header line without a colon, with a bad name, or folded.
    HeaderLine,
    /// More header lines than hyper takes.
    ManyHeaders,
    /// The request stops in the middle and the client goes away.
    Truncated,
    /// A Content-Length larger than the body sent (the client then waits).
    ShortBody,
}

const DEFECTS: &[Defect] = &[
    Defect::Method,
    Defect::Target,
    Defect::Version,
    Defect::ContentLength,
    Defect::Chunk,
    Defect::HeaderLine,
    Defect::ManyHeaders,
    Defect::Truncated,
    Defect::ShortBody,
];

#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
fn generate(rng: &mut StdRng, address: &str) -> Hostile {
    // About half the requests are well framed (hostile only in their content), the rest
    // have one or two protocol defects.
    let mut defects = Vec::new();
    for _ in 0..[0, 0, 0, 0, 0, 1, 1, 1, 2, 2][rng.random_range(0..10)] {
        defects.push(DEFECTS[rng.random_range(0..DEFECTS.len())]);
    }
    let has = |defect: Defect| defects.contains(&defect);

    let method: Vec<u8> = if has(Defect::Method) {
        match rng.random_range(0..4) {
            0 => {
                let len = rng.random_range(1..10);
                random_bytes(rng, len)
            }
            1 => b"G@T".to_vec(),
            2 => b"\"GET\"".to_vec(),
            _ => std::iter::repeat_n(b'X', rng.random_range(100..5000)).collect(),
        }
    } else {
        pick(rng, METHODS).as_bytes().to_vec()
    };
    let mut target = target(rng);
    if has(Defect::Target) {
        match rng.random_range(0..5) {
            0 => {
                target.push(b'/');
                target.extend(invalid_utf8(rng));
            }
            1 => target.extend_from_slice(b"?id=\x01\x7f<>\"{}"),
            4 => {
                target.extend_from_slice(b"?id=");
                target.extend(invalid_utf8(rng));
            }
            2 => target = [b"http://localhost".as_slice(), &target].concat(),
            _ => target = random_bytes(rng, 12),
        }
    }
    const BAD_VERSIONS: &[&[u8]] = &[b"HTTP/2.0", b"HTTP/9.9", b"HTTX/1.1", b"", b"HTTP/1.1x"];
    let version: &[u8] = if has(Defect::Version) {
        pick(rng, BAD_VERSIONS)
    } else if rng.random_bool(0.1) {
        b"HTTP/1.0"
    } else {
        b"HTTP/1.1"
    };
    let mut request = Vec::new();
    request.extend_from_slice(&method);
    request.push(b' ');
    request.extend_from_slice(&target);
    if !version.is_empty() {
        request.push(b' ');
        request.extend_from_slice(version);
    }
    request.extend_from_slice(b"\r\n");

    let mut headers: Vec<Vec<u8>> = Vec::new();
    if rng.random_bool(0.95) {
        headers.push(format!("Host: {address}").into_bytes());
    }
    if rng.random_bool(0.5) {
        headers.push(b"Connection: close".to_vec());
    }
    // Hostile but well-formed headers.
    for _ in 0..rng.random_range(0..4) {
        match rng.random_range(0..8) {
            0 => headers.push([b"X-Svc-Sign: ".as_slice(), &invalid_utf8(rng)].concat()),
            1 => headers.push(format!("X-Svc-Sign: {}", "0".repeat(64)).into_bytes()),
            2 => headers.push(b"Content-Type: application/x-www-form-urlencoded".to_vec()),
            3 => {
                // Visible ASCII and any byte from 0x80 up (obs-text): allowed in a value.
                let mut value = random_bytes(rng, 40);
                value.retain(|b| (0x20..0x7f).contains(b) || *b >= 0x80);
                headers.push([b"X-Junk: ".as_slice(), &value].concat());
            }
            4 => headers.push(
                [
                    b"X-Big: ".as_slice(),
                    &vec![b'b'; rng.random_range(20_000..200_000)],
                ]
                .concat(),
            ),
            5 => headers.push(b"Accept-Encoding: gzip".to_vec()),
            6 => headers.push(
                [
                    b"X-Hub-Signature-256: sha256=".as_slice(),
                    &invalid_utf8(rng),
                ]
                .concat(),
            ),
            _ => headers.push(b"X-GitHub-Event: push".to_vec()),
        }
    }
    if has(Defect::HeaderLine) {
        headers.push(
            pick(
                rng,
                &[
                    b"no colon in this line".as_slice(),
                    b"Bad Name: x",
                    b" folded: continuation",
                    b": empty name",
                    b"X-Nul: a\x00b",
                ],
            )
            .to_vec(),
        );
    }
    if has(Defect::ManyHeaders) {
        for index in 0..rng.random_range(110..300) {
            headers.push(format!("X-Many-{index}: {index}").into_bytes());
        }
    }

    let body_len = match rng.random_range(0..20) {
        0 => 1024 * 1024 + rng.random_range(1..4096),
        1..=8 => 0,
        _ => rng.random_range(1..4096),
    };
    let body = if rng.random_bool(0.5) {
        random_bytes(rng, body_len)
    } else {
        let mut body = format!("_svc_epoch={}&id=", chrono::Utc::now().timestamp()).into_bytes();
        body.extend(random_bytes(rng, body_len.min(64)));
        body
    };
    // Chunked framing exists from HTTP/1.1 on; with 1.0 it is a defect.
    let chunked = has(Defect::Chunk) || (version == b"HTTP/1.1" && rng.random_bool(0.1));
    if chunked {
        headers.push(b"Transfer-Encoding: chunked".to_vec());
    } else if has(Defect::ContentLength) {
        match rng.random_range(0..4) {
            0 => headers.push(b"Content-Length: 99999999999999999999999".to_vec()),
            1 => headers.push(b"Content-Length: -1".to_vec()),
            2 => headers.push(b"Content-Length: abc".to_vec()),
            _ => {
                headers.push(format!("Content-Length: {}", body.len()).into_bytes());
                headers.push(format!("Content-Length: {}", body.len() + 1).into_bytes());
            }
        }
    } else if has(Defect::ShortBody) {
        headers.push(format!("Content-Length: {}", body.len() + 100).into_bytes());
    } else if !body.is_empty() || rng.random_bool(0.5) {
        headers.push(format!("Content-Length: {}", body.len()).into_bytes());
    }
    for header in &headers {
        request.extend_from_slice(header);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    if chunked {
        if has(Defect::Chunk) {
            request.extend_from_slice(b"zz\r\n");
        } else {
            request.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        }
        request.extend_from_slice(&body);
        request.extend_from_slice(b"\r\n0\r\n\r\n");
    } else if !has(Defect::ContentLength) || rng.random_bool(0.5) {
        request.extend_from_slice(&body);
    }

    let truncated = has(Defect::Truncated);
    if truncated {
        let cut = rng.random_range(0..request.len());
        request.truncate(cut);
    }
    let path = target.strip_prefix(b"http://localhost").unwrap_or(&target);
    Hostile {
        target: String::from_utf8_lossy(&target[..target.len().min(120)]).into_owned(),
        api_path: path.starts_with(b"/svc/api"),
        head_request: method == b"HEAD",
        half_close: truncated,
        defects,
        bytes: request,
    }
}

// ----- tests -----------------------------------------------------------------------------

/// Checks the answer to a request for a `/svc/api` path that the router saw; returns a
/// description of what is wrong, if anything.
fn check_api_answer(response: &RawResponse) -> Option<String> {
    // The two API answers that are deliberately not JSON.
    let content_type = response.header("content-type").unwrap_or_default();
    if response.status == 200
        && (content_type.starts_with("application/openmetrics-text")
            || content_type.starts_with("text/event-stream"))
    {
        return None;
    }
    let body = match response.header("content-encoding") {
        Some("gzip") => {
            let mut out = Vec::new();
            if flate2::read::GzDecoder::new(&response.body[..])
                .read_to_end(&mut out)
                .is_err()
            {
                return Some("a gzip body that does not decode".to_owned());
            }
            out
        }
        _ => response.body.clone(),
    };
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return Some(format!(
            "{} answered with a body that is not JSON: {:?}",
            response.status,
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ));
    };
    if json["code"] != response.status {
        return Some(format!(
            "{} answered with code {} ({json})",
            response.status, json["code"]
        ));
    }
    if !json["message"].is_string() || json.get("data").is_none() {
        return Some(format!("not the wrapper: {json}"));
    }
    if !content_type.starts_with("application/json") {
        return Some(format!("content-type {content_type:?}"));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn malformed_requests_get_wrapped_answers_or_protocol_refusals() {
    let seed: u64 = std::env::var("SVC_HOSTILE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("hostile requests seed: {seed} (replay with SVC_HOSTILE_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);

    let svc = TestService::builder()
        .job_file(
            "jobs",
            [
                job_section("hello", &["interval = 1h", "command = echo hello"]),
                job_section("deploy", &["path = /deploy", "command = true"]),
            ]
            .join("\n"),
        )
        .start()
        .await;
    let pid = svc.pid().expect("the controller runs");
    let address = svc.listen_address().to_owned();
    let requests: Vec<Hostile> = (0..REQUESTS)
        .map(|_| generate(&mut rng, &address))
        .collect();

    let started = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, hostile) in requests.into_iter().enumerate() {
        let permit = slots.clone().acquire_owned().await.expect("semaphore");
        let address = address.clone();
        tasks.spawn(async move {
            let outcome = exchange(
                &address,
                &hostile.bytes,
                hostile.half_close,
                hostile.head_request,
            )
            .await;
            drop(permit);
            (index, hostile, outcome)
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        results.push(joined.expect("a request task"));
    }
    results.sort_by_key(|(index, _, _)| *index);

    let mut wrapped = 0;
    let mut other = 0;
    let mut head_answers = 0;
    let mut refused: std::collections::BTreeMap<u16, usize> = Default::default();
    let (mut closed, mut timed_out) = (0, 0);
    let mut problems = Vec::new();
    for (index, hostile, outcome) in &results {
        let name = format!(
            "#{index} {:?} (defects {:?})",
            hostile.target, hostile.defects
        );
        // A well-framed request is never refused by hyper: its content, however hostile,
        // reaches the router, which answers in the wrapper.
        let well_framed = hostile.defects.is_empty();
        match outcome {
            Outcome::Answered(response) if hostile.head_request => {
                head_answers += 1;
                if response.status >= 500 {
                    problems.push(format!("{name}: server error {}", response.status));
                }
            }
            Outcome::Answered(response) if response.body.is_empty() => {
                *refused.entry(response.status).or_default() += 1;
                if !matches!(response.status, 400 | 408 | 413 | 414 | 431 | 501 | 505) {
                    problems.push(format!("{name}: {} with an empty body", response.status));
                } else if well_framed && hostile.api_path {
                    problems.push(format!(
                        "{name}: a well-framed request refused by hyper with {}: {:?}",
                        response.status,
                        String::from_utf8_lossy(&hostile.bytes[..hostile.bytes.len().min(400)])
                    ));
                }
            }
            Outcome::Answered(response) => {
                if response.status >= 500 {
                    problems.push(format!(
                        "{name}: server error {}: {:?}",
                        response.status,
                        String::from_utf8_lossy(&response.body)
                    ));
                }
                if hostile.api_path {
                    if let Some(problem) = check_api_answer(response) {
                        problems.push(format!("{name}: {problem}"));
                    }
                    wrapped += 1;
                } else {
                    other += 1;
                }
            }
            Outcome::Closed | Outcome::TimedOut if well_framed && hostile.api_path => {
                problems.push(format!("{name}: a well-framed request got no answer"));
            }
            Outcome::Closed => closed += 1,
            Outcome::TimedOut => timed_out += 1,
        }
    }
    let well_framed = results
        .iter()
        .filter(|(_, h, _)| h.defects.is_empty())
        .count();
    println!(
        "{REQUESTS} hostile requests ({well_framed} well framed) in {:?}: {wrapped} API \
         answers with a body, {other} other answers with a body, {head_answers} answers to \
         HEAD, refused by hyper with an empty body (by status): {refused:?}, {closed} closed \
         without an answer, {timed_out} unanswered within {REQUEST_TIMEOUT:?}",
        started.elapsed()
    );
    assert!(
        problems.is_empty(),
        "seed {seed}: {} bad answers:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        wrapped >= REQUESTS / 4,
        "seed {seed}: too few API answers ({wrapped}) for the test to mean anything"
    );

    assert!(
        svc_tests::proc::is_alive(pid),
        "the controller is still running"
    );
    let env = svc.environment().await;
    assert!(env["jobs"]["hello"].is_object(), "{env}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_while_others_are_served() {
    let svc = TestService::builder().start().await;
    let address = svc.listen_address().to_owned();

    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(TcpStream::connect(&address).await.expect("connect"));
    }
    let opened = Instant::now();
    let mut watched = TcpStream::connect(&address).await.expect("connect");
    let closed = tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        loop {
            match watched.read(&mut buf).await {
                Ok(0) | Err(_) => return opened.elapsed(),
                Ok(_) => {}
            }
        }
    });

    // Meanwhile a normal client is served promptly.
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("{}/svc/api/environment", svc.base_url());
    let mut answers = 0;
    let mut slowest = Duration::ZERO;
    while !closed.is_finished() && opened.elapsed() < Duration::from_secs(16) {
        let start = Instant::now();
        let response = client.get(&url).send().await.expect("environment answers");
        assert_eq!(response.status(), 200);
        response.bytes().await.expect("read the environment");
        let took = start.elapsed();
        slowest = slowest.max(took);
        assert!(
            took < Duration::from_secs(1),
            "an environment answer took {took:?} with 101 idle connections open"
        );
        answers += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        closed.is_finished(),
        "the idle connection is still open {:?} after it was opened",
        opened.elapsed()
    );
    let after = closed.await.expect("the watcher");
    println!(
        "idle connection closed after {after:?}; {answers} answers meanwhile, slowest {slowest:?}"
    );
    assert!(
        after >= Duration::from_secs(9) && after <= Duration::from_secs(15),
        "the idle connection was closed after {after:?}, expected about 10 s"
    );
    assert!(answers >= 10, "only {answers} answers while waiting");

    // The other idle connections were closed by then too (they opened a little earlier).
    for (index, mut stream) in idle.into_iter().enumerate() {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "idle connection {index} is still open: {read:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_header_client_is_cut_off_by_the_header_timeout() {
    let svc = TestService::builder().start().await;
    let stream = TcpStream::connect(svc.listen_address())
        .await
        .expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    let closed = tokio::spawn(async move {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => return (started.elapsed(), buf),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    });
    let head = format!(
        "GET /svc/api/environment HTTP/1.1\r\nHost: {}\r\nX-Slow: ",
        svc.listen_address()
    );
    let mut sent = 0;
    for byte in head.bytes().chain(std::iter::repeat(b'a')) {
        if closed.is_finished() || started.elapsed() > Duration::from_secs(17) {
            break;
        }
        if writer.write_all(&[byte]).await.is_err() {
            break;
        }
        sent += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (after, answer) = tokio::time::timeout(Duration::from_secs(2), closed)
        .await
        .expect("the server closed the slow connection")
        .expect("the reader");
    println!(
        "slow client cut off after {after:?} and {sent} bytes; answer: {:?}",
        String::from_utf8_lossy(&answer)
    );
    assert!(
        after >= Duration::from_secs(9) && after <= Duration::from_secs(15),
        "the slow client was cut off after {after:?}, expected about 10 s"
    );
    assert!(
        !String::from_utf8_lossy(&answer).contains(" 200 "),
        "no answer to an incomplete head"
    );
    // The service is fine.
    svc.environment().await;
    drop(writer);
}
