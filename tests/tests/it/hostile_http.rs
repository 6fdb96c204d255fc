//! Hostile HTTP clients: malformed requests of every kind over raw TCP, idle connections
//! and a client that sends its head one byte at a time. The service must keep answering
//! others, keep every answer of its API in the JSON wrapper, and close connections that
//! do not send a request head within the header read timeout (10 s).
//!
//! The malformed requests come from a seeded generator (`hostile_requests.rs`); the seed
//! is printed, and `SVC_HOSTILE_SEED=<n>` replays a run.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use svc_tests::raw_http::{RawResponse, parse_response};
use svc_tests::{TestService, job_section};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::hostile_requests::{Hostile, generate};

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
    let results = send_all(&address, requests).await;
    let mut tally = Tally::default();
    for (index, hostile, outcome) in &results {
        tally.judge(*index, hostile, outcome);
    }
    let Tally {
        wrapped,
        other,
        head_answers,
        refused,
        closed,
        timed_out,
        problems,
    } = tally;
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

/// Sends every request to `address`, [`PARALLEL`] at once, each on its own connection;
/// answers each with its index and outcome, in the order of `requests`.
async fn send_all(address: &str, requests: Vec<Hostile>) -> Vec<(usize, Hostile, Outcome)> {
    let slots = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, hostile) in requests.into_iter().enumerate() {
        let permit = slots.clone().acquire_owned().await.expect("semaphore");
        let address = address.to_owned();
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
    results
}

/// What the answers to the hostile requests were, counted, and every bad one.
#[derive(Debug, Default)]
struct Tally {
    /// Answers with a body to a request for an API path.
    wrapped: usize,
    /// Answers with a body to a request for another path.
    other: usize,
    /// Answers to HEAD requests.
    head_answers: usize,
    /// Answers without a body (hyper's refusals), by status.
    refused: BTreeMap<u16, usize>,
    /// Connections closed without an answer.
    closed: usize,
    /// Requests unanswered within [`REQUEST_TIMEOUT`].
    timed_out: usize,
    problems: Vec<String>,
}

impl Tally {
    /// Counts request `index` and its outcome. A server error is a problem; so is an
    /// empty answer other than a protocol refusal. A well-framed request is never refused
    /// by hyper: its content, however hostile, reaches the router, which answers in the
    /// wrapper ([`check_api_answer`]); it always gets an answer.
    fn judge(&mut self, index: usize, hostile: &Hostile, outcome: &Outcome) {
        let name = format!(
            "#{index} {:?} (defects {:?})",
            hostile.target, hostile.defects
        );
        let well_framed = hostile.defects.is_empty();
        let problems = &mut self.problems;
        match outcome {
            Outcome::Answered(response) if hostile.head_request => {
                self.head_answers += 1;
                if response.status >= 500 {
                    problems.push(format!("{name}: server error {}", response.status));
                }
            }
            Outcome::Answered(response) if response.body.is_empty() => {
                *self.refused.entry(response.status).or_default() += 1;
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
                    self.wrapped += 1;
                } else {
                    self.other += 1;
                }
            }
            Outcome::Closed | Outcome::TimedOut if well_framed && hostile.api_path => {
                problems.push(format!("{name}: a well-framed request got no answer"));
            }
            Outcome::Closed => self.closed += 1,
            Outcome::TimedOut => self.timed_out += 1,
        }
    }
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
