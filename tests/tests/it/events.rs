//! `GET /svc/api/events`: the engine's events as server-sent events, read off the real
//! controller as they come: runs started and ended (with how), queued triggers, pauses,
//! resumes and reloads, in order; a stream that asks from a stale event ID is told to
//! resync; past the share of the connection limit event streams get 503; and an open
//! stream neither outlives nor holds up a shutdown.

use nix::sys::signal::Signal;
use serde_json::Value;
use svc_tests::sse::{SseEvent, SseStream};
use svc_tests::{TestService, WAIT, hmac_sha256_hex, job_section};

fn service() -> svc_tests::TestServiceBuilder {
    TestService::builder()
        .job_file(
            "hello",
            job_section("hello", &["path = /hello", "command = echo hello"]),
        )
        .job_file(
            "broken",
            job_section("broken", &["path = /broken", "command = exit 3"]),
        )
        .job_file(
            "slow",
            job_section(
                "slow",
                &["path = /slow", "secret = slow-secret", "command = sleep 30"],
            ),
        )
}

async fn open(service: &TestService, headers: &[(&str, &str)]) -> SseStream {
    let url = format!("{}/svc/api/events", service.base_url());
    let mut stream = SseStream::open(&url, headers)
        .await
        .unwrap_or_else(|err| panic!("{err:#}"));
    let ready = stream.until("ready", WAIT).await;
    assert_eq!(ready.len(), 1, "ready comes first: {ready:?}");
    stream
}

/// The next event, which must be named `name`; its data.
async fn expect(stream: &mut SseStream, name: &str) -> (SseEvent, Value) {
    let event = match stream.next(WAIT).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the stream ended before event {name}"),
        Err(err) => panic!("waiting for event {name}: {err:#}"),
    };
    assert_eq!(event.name, name, "{event:?}");
    let data = event.json();
    (event, data)
}

fn time(data: &Value, field: &str) -> chrono::DateTime<chrono::Utc> {
    data[field]
        .as_str()
        .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
        .unwrap_or_else(|| panic!("{field} is not an RFC 3339 time: {data}"))
        .to_utc()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_pauses_resumes_and_reloads_arrive_in_order() {
    let service = service().start().await;
    let mut stream = open(&service, &[]).await;
    let mut ids = Vec::new();

    // Run now: started, then ended, with what the history keeps.
    service.run_now("hello").await.assert_status(200);
    let (event, started) = expect(&mut stream, "run_started").await;
    ids.push(event.id);
    assert_eq!(started["kind"], "job");
    assert_eq!(started["job_id"], "hello");
    assert_eq!(started["counter"], 1);
    assert_eq!(started["trigger"], "manual");
    assert_eq!(started["attempt"], 1);
    let (event, ended) = expect(&mut stream, "run_ended").await;
    ids.push(event.id);
    assert_eq!(ended["job_id"], "hello");
    assert_eq!(ended["counter"], 1);
    assert_eq!(ended["status"], "success");
    assert_eq!(ended["result"], "success");
    assert_eq!(ended["exit_code"], 0);
    assert_eq!(ended["signal"], Value::Null);
    assert!(ended["duration_ms"].is_u64(), "{ended}");
    assert_eq!(time(&ended, "started_at"), time(&started, "started_at"));
    assert!(time(&ended, "ended_at") >= time(&started, "started_at"));
    // The event comes once the end is recorded: the log has its final name already.
    service
        .job_log("hello", 1)
        .expect("log 1")
        .assert_status("success");

    service.pause("hello").await.assert_status(200);
    let (event, paused) = expect(&mut stream, "paused").await;
    ids.push(event.id);
    assert_eq!(
        (&paused["kind"], &paused["job_id"]),
        (&"job".into(), &"hello".into())
    );
    service.resume("hello").await.assert_status(200);
    let (event, resumed) = expect(&mut stream, "resumed").await;
    ids.push(event.id);
    assert_eq!(resumed["job_id"], "hello");

    // A failure says its exit code.
    service.run_now("broken").await.assert_status(200);
    let (event, _) = expect(&mut stream, "run_started").await;
    ids.push(event.id);
    let (event, failed) = expect(&mut stream, "run_ended").await;
    ids.push(event.id);
    assert_eq!(failed["job_id"], "broken");
    assert_eq!(failed["status"], "fail");
    assert_eq!(failed["exit_code"], 3);

    // A trigger of a busy job waits in the queue; a cancel ends the run as canceled.
    service.run_now("slow").await.assert_status(200);
    let (event, _) = expect(&mut stream, "run_started").await;
    ids.push(event.id);
    let body = br#"{"ref":"main"}"#;
    let signature = hmac_sha256_hex("slow-secret", body);
    service
        .trigger("/slow", body, &[("x-svc-sign", signature.as_str())])
        .await
        .assert_status(200);
    let (event, queued) = expect(&mut stream, "queued").await;
    ids.push(event.id);
    assert_eq!(queued["job_id"], "slow");
    assert_eq!(queued["trigger"], "webhook");
    service.cancel("slow").await.assert_status(200);
    let (event, canceled) = expect(&mut stream, "run_ended").await;
    ids.push(event.id);
    assert_eq!(canceled["job_id"], "slow");
    assert_eq!(canceled["status"], "canceled");
    assert_eq!(canceled["result"], "fail");

    service.sighup();
    let (event, _) = expect(&mut stream, "reloaded").await;
    ids.push(event.id);

    // Every event has an ID, in increasing order.
    let numbers: Vec<u64> = ids
        .iter()
        .map(|id| {
            id.as_deref()
                .and_then(|id| id.parse().ok())
                .unwrap_or_else(|| panic!("event IDs are numbers: {ids:?}"))
        })
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_event_id_resyncs_and_streams_are_limited() {
    // 16 connections: room for 4 event streams.
    let service = service().svc("max_connections = 16").start().await;
    // A browser reconnecting after events it did not see is told to refetch.
    let mut stale = open(&service, &[("last-event-id", "999")]).await;
    let (_, data) = expect(&mut stale, "resync").await;
    assert!(data.is_object(), "{data}");
    let mut open_streams = vec![stale];
    for _ in 1..4 {
        open_streams.push(open(&service, &[]).await);
    }
    let refused = service.get("/svc/api/events").await;
    refused.assert_status(503);
    assert_eq!(refused.name(), "ERR_UNAVAILABLE");
    // Other requests are still answered.
    service.get("/svc/api/environment").await.assert_status(200);
    // A stream that ends gives its room back.
    drop(open_streams.pop());
    let url = format!("{}/svc/api/events", service.base_url());
    svc_tests::wait_until(WAIT, "a new event stream once one closed", async || {
        SseStream::open(&url, &[]).await.is_ok()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_stream_ends_with_the_service_and_does_not_hold_it_up() {
    let mut service = service().start().await;
    let mut stream = open(&service, &[]).await;
    service.signal(Signal::SIGTERM);
    let (_, data) = expect(&mut stream, "shutdown").await;
    assert!(data.is_object(), "{data}");
    assert!(
        matches!(stream.next(WAIT).await, Ok(None)),
        "the stream ends after shutdown"
    );
    let status = service
        .wait_exit(WAIT)
        .await
        .expect("the controller exits with a stream open");
    assert!(status.success(), "exit status {status:?}");
}
