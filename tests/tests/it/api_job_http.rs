//! The HTTP API's JobHttp endpoints over real HTTP (5 to 8 of `interface.md` section 4):
//! a JobHttp's view with its secret header redacted, its recent log lines and one log by
//! counter, pause and resume with their signature refusals, and a paused JobHttp skipping
//! its ticks, always in the `{code, message, data}` wrapper.

use base64::Engine as _;
use serde_json::json;
use svc_tests::{TestService, WAIT, hmac_sha256_hex, wait_for, wait_until};

use crate::api_common::{get_plain, request, signed_query};

/// The newest run counter of JobHttp `id` with a log on disk, and whether any run is
/// still going on.
fn http_runs(svc: &TestService, id: &str) -> (u64, bool) {
    let files = svc.log_files("job_http", id);
    let newest = files.iter().map(|f| f.counter).max().unwrap_or(0);
    let running = files.iter().any(|f| f.status == "started");
    (newest, running)
}

/// Main file text of a JobHttp `name` calling the service's own Environment every second
/// with a secret bearer token.
fn self_calling_job_http(svc: &TestService, name: &str) -> String {
    format!(
        "[job.http \"{name}\"]\n\
         interval = 1s\n\
         http_url = http://{}/svc/api/environment\n\
         http_header = Authorization: Bearer topsecret\n",
        svc.listen_address()
    )
}

/// One service with the JobHttp `ping` (calling the service itself every second), through
/// the endpoints in turn: the later steps need the runs the earlier ones waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_http_view_logs_pause_and_resume() {
    let mut svc = TestService::builder().build();
    let ping = self_calling_job_http(&svc, "ping");
    std::fs::write(svc.dir_base().join("etc/svc/job_http.d/ping.conf"), ping)
        .expect("write job_http.d/ping.conf");
    svc.start().await;

    view_redacts_the_header_and_refuses_bad_ids(&svc).await;
    recent_lines_are_plain_text_oldest_first(&svc).await;
    unknown_ids_are_bad_requests_and_any_case_finds_the_job(&svc).await;
    one_log_is_served_by_counter(&svc).await;
    pause_and_resume_refuse_bad_signatures_and_ids(&svc).await;
    pause_skips_the_ticks_and_resume_runs_again(&svc).await;
}

/// Endpoint 5: the JobHttp as configured, its header's value redacted (here and in the
/// Environment); a missing, malformed or unknown ID is a bad request.
async fn view_redacts_the_header_and_refuses_bad_ids(svc: &TestService) {
    let view = get_plain(svc, "/svc/api/job_http?id=ping", false).await;
    let text = String::from_utf8_lossy(&view.body).into_owned();
    let job = view.wrapper(200)["data"].clone();
    assert_eq!(job["id"], "ping");
    assert_eq!(
        job["http_url"],
        format!("http://{}/svc/api/environment", svc.listen_address())
    );
    assert_eq!(job["http_headers"], json!(["Authorization: [redacted]"]));
    assert_eq!(job["interval"], json!(1_000_000_000u64));
    assert!(!text.contains("topsecret"), "header value redacted: {text}");
    let env = get_plain(svc, "/svc/api/environment", false).await;
    assert!(
        !String::from_utf8_lossy(&env.body).contains("topsecret"),
        "nor in the Environment"
    );
    for (query, status) in [
        ("id=", 400),
        ("", 400),
        ("id=a/b", 400),
        ("id=a%2Fb", 400),
        ("id=nope", 400),
    ] {
        get_plain(svc, &format!("/svc/api/job_http?{query}"), false)
            .await
            .wrapper(status);
    }
}

/// Endpoint 6, once two runs are over (so the lines of more than one log are served):
/// at most 100 lines, the request line and the answer's status there, no secret, plain
/// text rather than base64, and run numbers and timestamps oldest first.
async fn recent_lines_are_plain_text_oldest_first(svc: &TestService) {
    let lines: Vec<String> = wait_for(WAIT, "two JobHttp runs in the recent lines", async || {
        let answer = get_plain(svc, "/svc/api/job_http/logs?id=ping", false).await;
        let data = answer.wrapper(200)["data"].clone();
        let lines: Vec<String> = data
            .as_array()
            .expect("data is an array")
            .iter()
            .map(|line| {
                line.as_str()
                    .unwrap_or_else(|| panic!("every line is a string: {data}"))
                    .to_owned()
            })
            .collect();
        let finished = lines
            .iter()
            .filter(|line| line.contains("=== run ") && line.contains(" finished"))
            .count();
        (finished >= 2).then_some(lines)
    })
    .await;
    let all = lines.join("\n");
    assert!(lines.len() <= 100, "at most 100 lines: {}", lines.len());
    let request_line = format!(
        "GET http://{}/svc/api/environment?_svc_epoch=",
        svc.listen_address()
    );
    assert!(
        lines.iter().any(|line| line.contains(&request_line)),
        "the request line is there ({request_line}):\n{all}"
    );
    assert!(
        lines.iter().any(|line| line.contains("HTTP/1.1 200")),
        "the response status is there:\n{all}"
    );
    assert!(!all.contains("topsecret"), "no secret in the lines:\n{all}");
    assert!(
        !all.contains("ZXZlbn") && lines.iter().all(|l| !l.ends_with('=')),
        "plain text, not base64:\n{all}"
    );
    // Oldest first: run numbers and timestamps never go back.
    let runs: Vec<u64> = lines
        .iter()
        .filter_map(|line| {
            let rest = line.split("=== run ").nth(1)?;
            rest.split(' ').next()?.parse().ok()
        })
        .collect();
    assert!(runs.len() >= 2, "run lines: {all}");
    assert!(
        runs.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {runs:?}"
    );
    let times: Vec<_> = svc_tests::parse_log_lines(&all)
        .into_iter()
        .filter_map(|line| line.time)
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "timestamps oldest first:\n{all}"
    );
}

/// As the spec and upstream: an unknown JobHttp ID is a bad request (endpoints 5-8), named
/// `ERR_INVALID_JOB_ID`; IDs are looked up in any case, as upstream's clients send them
/// lower-cased.
async fn unknown_ids_are_bad_requests_and_any_case_finds_the_job(svc: &TestService) {
    for path in ["/svc/api/job_http", "/svc/api/job_http/logs"] {
        for query in ["id=", "id=a/b", "id=nope"] {
            let answer = get_plain(svc, &format!("{path}?{query}"), false)
                .await
                .wrapper(400);
            assert_eq!(answer["name"], "ERR_INVALID_JOB_ID", "{path}?{query}");
        }
    }
    assert_eq!(
        get_plain(svc, "/svc/api/job_http?id=PING", false)
            .await
            .wrapper(200)["data"]["id"],
        "ping"
    );
}

/// One JobHttp log by counter: the file's bytes in base64, gzipped when asked; an unknown
/// counter is 404, a malformed one 400.
async fn one_log_is_served_by_counter(svc: &TestService) {
    let file = svc
        .log_files("job_http", "ping")
        .into_iter()
        .find(|f| f.status == "success")
        .expect("a finished JobHttp log");
    let answer = get_plain(
        svc,
        &format!("/svc/api/job_http/log?id=ping&counter={}", file.counter),
        true,
    )
    .await;
    assert_eq!(answer.content_encoding.as_deref(), Some("gzip"));
    let log = answer.wrapper(200)["data"].clone();
    assert_eq!(log["job_id"], "ping");
    assert_eq!(log["counter"], json!(file.counter));
    let content = base64::engine::general_purpose::STANDARD
        .decode(log["content"].as_str().expect("content"))
        .expect("base64");
    assert_eq!(content, std::fs::read(&file.path).expect("read the log"));
    get_plain(svc, "/svc/api/job_http/log?id=ping&counter=99999", false)
        .await
        .wrapper(404);
    get_plain(svc, "/svc/api/job_http/log?id=ping&counter=x", false)
        .await
        .wrapper(400);
}

/// Endpoints 7 and 8, refusals: unsigned, wrongly signed or signed for another query is
/// 401 (never showing the expected signature), a bad ID 400; none of them pauses.
async fn pause_and_resume_refuse_bad_signatures_and_ids(svc: &TestService) {
    for path in ["/svc/api/job_http/pause", "/svc/api/job_http/resume"] {
        let expected = hmac_sha256_hex(svc.secret(), "id=ping");
        let unsigned = request(svc, "POST", &format!("{path}?id=ping"), &[], Vec::new()).await;
        unsigned.wrapper(401);
        let wrong = request(
            svc,
            "POST",
            &format!("{path}?id=ping"),
            &[("X-Svc-Sign", &hmac_sha256_hex("wrong", "id=ping"))],
            Vec::new(),
        )
        .await;
        wrong.wrapper(401);
        // Signed for another query.
        request(
            svc,
            "POST",
            &format!("{path}?id=ping"),
            &[("X-Svc-Sign", &hmac_sha256_hex(svc.secret(), "id=pong"))],
            Vec::new(),
        )
        .await
        .wrapper(401);
        for answer in [&unsigned, &wrong] {
            assert!(!String::from_utf8_lossy(&answer.body).contains(&expected));
        }
        signed_query(svc, path, "id=").await.wrapper(400);
        signed_query(svc, path, "id=a/b").await.wrapper(400);
        signed_query(svc, path, "id=nope").await.wrapper(400);
    }
    assert_ne!(
        get_plain(svc, "/svc/api/job_http?id=ping", false)
            .await
            .json()["data"]["status"],
        "paused"
    );
}

/// Endpoints 7 and 8: paused, the JobHttp starts no run (two ticks of its 1 s interval
/// skipped) and shows `paused`; resumed, it shows `started` and runs again, with success.
async fn pause_skips_the_ticks_and_resume_runs_again(svc: &TestService) {
    let paused = signed_query(svc, "/svc/api/job_http/pause", "id=ping")
        .await
        .wrapper(200);
    assert_eq!(paused["data"]["id"], "ping", "data is the JobHttp");
    assert_eq!(paused["data"]["status"], "paused");
    // A run that was going on may end; after that nothing new starts.
    wait_until(WAIT, "no JobHttp run going on", async || {
        !http_runs(svc, "ping").1
    })
    .await;
    let (before, _) = http_runs(svc, "ping");
    // Two ticks of its 1 s interval came and were skipped.
    svc_tests::ticks::wait_ticks_skipped(svc, "paused", 2, WAIT).await;
    let (after, running) = http_runs(svc, "ping");
    assert_eq!(
        (after, running),
        (before, false),
        "no JobHttp run while paused (two ticks skipped)"
    );
    let view = get_plain(svc, "/svc/api/job_http?id=ping", false).await;
    assert_eq!(view.wrapper(200)["data"]["status"], "paused");

    let resumed = signed_query(svc, "/svc/api/job_http/resume", "id=ping")
        .await
        .wrapper(200);
    assert_eq!(resumed["data"]["id"], "ping");
    assert_eq!(resumed["data"]["status"], "started");
    wait_until(WAIT, "a JobHttp run after resume", async || {
        let (newest, running) = http_runs(svc, "ping");
        newest > before && !running
    })
    .await;
    let (newest, _) = http_runs(svc, "ping");
    svc.log_files("job_http", "ping")
        .into_iter()
        .find(|f| f.counter == newest)
        .expect("the new run's log")
        .assert_status("success");
}

/// A JobHttp whose call hangs (a server that accepts and never answers, within a 60 s
/// `http_timeout`) is cancelled by a signed `job_http/cancel`: the call ends at once, the
/// run is recorded as canceled, the action is audited; a second cancel finds nothing
/// going on (200, nothing changes), and a replayed one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_going_on_is_cancelled_at_once_recorded_and_audited() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = silent.local_addr().expect("address");
    let svc = TestService::builder()
        .job_http_file(
            "hang",
            format!(
                "[job.http \"hang\"]\ninterval = 1h\nhttp_url = http://{address}/slow\n\
                 http_timeout = 60s\n"
            ),
        )
        .start()
        .await;
    // The first call (at the start) reaches the server, which keeps it unanswered.
    let (held, _) = tokio::time::timeout(WAIT, silent.accept())
        .await
        .expect("the call within the wait")
        .expect("accept");
    let query = format!("id=hang&_svc_epoch={}", chrono::Utc::now().timestamp());
    let sent = std::time::Instant::now();
    let answer = signed_query(&svc, "/svc/api/job_http/cancel", &query).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let runs = wait_for(
        WAIT,
        "the cancelled call's end in the history",
        async || {
            // The history holds runs once they ended, newest first.
            let runs = svc.runs("job_http", "hang", "").await;
            runs.data().as_array()?.first().cloned()
        },
    )
    .await;
    let took = sent.elapsed();
    assert_eq!(runs["status"], "canceled", "{runs}");
    assert!(
        took < std::time::Duration::from_secs(10),
        "ended {took:?} after the cancel, not at its 60 s timeout"
    );
    drop(held);
    // Nothing going on now: 200 and nothing changes; the same signature again: refused.
    let query = format!(
        "id=hang&_svc_epoch={}&_svc_nonce=2",
        chrono::Utc::now().timestamp()
    );
    assert_eq!(
        signed_query(&svc, "/svc/api/job_http/cancel", &query)
            .await
            .status,
        200
    );
    assert_eq!(
        signed_query(&svc, "/svc/api/job_http/cancel", &query)
            .await
            .status,
        401
    );
    let audit = svc.get("/svc/api/audit?limit=10").await;
    let cancels: Vec<&serde_json::Value> = audit.data()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|entry| entry["action"] == "cancel" && entry["job"]["id"] == "hang")
        .collect();
    // The two accepted; the replay proved nothing of its sender, so it is only counted.
    assert_eq!(cancels.len(), 2, "{}", audit.raw);
    println!("a hanging JobHttp call ended {took:?} after its cancel");
}
