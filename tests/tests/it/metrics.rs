//! `GET /svc/api/metrics`: webhook runs, their results and durations, refused webhooks and
//! answered requests show up in the text exposition, and a removed job's series go with
//! it. Every per-job series read with a real OpenMetrics parser: `metrics_series.rs`; the
//! shipped monitoring files: `metrics_monitoring.rs`.

use svc_tests::prom::{Exposition, parse_openmetrics};
use svc_tests::{TestService, WAIT, job_section, wait_for};

/// Value of the sample whose series is exactly `series` (name and labels as rendered),
/// or `None` when the exposition has no such line.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// True when some line starts with `prefix` (a sample of that name, any labels).
fn has_line(text: &str, prefix: &str) -> bool {
    text.lines().any(|line| line.starts_with(prefix))
}

/// `GET /svc/api/metrics` without the harness's JSON handling: `(status, content type, body)`.
async fn metrics(svc: &TestService) -> (u16, String, String) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("build the HTTP client");
    let response = client
        .get(format!("{}/svc/api/metrics", svc.base_url()))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET /svc/api/metrics: {err}"));
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .text()
        .await
        .unwrap_or_else(|err| panic!("read the metrics body: {err}"));
    (status, content_type, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_runs_rejections_and_requests() {
    let svc = TestService::builder()
        .job_file(
            "m_ok",
            job_section("m_ok", &["path = /m", "command = true"]),
        )
        .job_file(
            "m_fail",
            job_section("m_fail", &["path = /m_fail", "command = false"]),
        )
        .start()
        .await;

    svc.trigger("/m", b"{}", &[]).await.assert_status(200);
    svc.trigger("/m_fail", b"{}", &[]).await.assert_status(200);
    svc.wait_run_finished("m_ok", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_run_finished("m_fail", 1, WAIT)
        .await
        .assert_status("fail");

    let bad = svc
        .trigger("/m", b"{}", &[("x-svc-sign", &"0".repeat(64))])
        .await;
    assert_eq!(bad.status, 401, "badly signed trigger: {}", bad.raw);
    // A trigger of a paused job is refused by the engine, and counted by reason.
    svc.pause("m_fail").await.assert_status(200);
    svc.trigger("/m_fail", b"{}", &[]).await.assert_status(412);

    let ok_series = r#"svc_runs_total{kind="job",job_id="m_ok",result="success"}"#;
    let fail_series = r#"svc_runs_total{kind="job",job_id="m_fail",result="fail"}"#;
    // The log gets its final name as the run ends; the counters follow right after.
    let (status, content_type, text) =
        wait_for(WAIT, "both runs counted in the metrics", async || {
            let (status, content_type, text) = metrics(&svc).await;
            (sample(&text, ok_series).is_some() && sample(&text, fail_series).is_some())
                .then_some((status, content_type, text))
        })
        .await;

    assert_eq!(status, 200, "{text}");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "content type {content_type:?}"
    );
    for series in [ok_series, fail_series] {
        let value = sample(&text, series).unwrap_or_default();
        assert!(value >= 1.0, "{series} = {value}:\n{text}");
    }
    assert_runs_durations_and_refusals(&text);
    assert_per_job_series(&text);
    assert_requests_and_the_process(&text);
}

/// In the text of [`metrics_count_runs_rejections_and_requests`]: no failed run of the
/// successful job, both runs' durations in the histogram (with its buckets), the refused
/// signature, the runs by how they ended and the trigger refused because of the pause.
fn assert_runs_durations_and_refusals(text: &str) {
    assert_eq!(
        sample(
            text,
            r#"svc_runs_total{kind="job",job_id="m_ok",result="fail"}"#
        ),
        None,
        "the successful job has no failed run:\n{text}"
    );
    let count = sample(text, r#"svc_run_duration_seconds_count{kind="job"}"#);
    assert!(
        count.is_some_and(|count| count >= 2.0),
        "two job durations observed ({count:?}):\n{text}"
    );
    assert!(
        has_line(text, "svc_run_duration_seconds_bucket{"),
        "histogram buckets:\n{text}"
    );
    assert_eq!(
        sample(text, r#"svc_webhook_rejections_total{reason="signature"}"#),
        Some(1.0),
        "one refused signature:\n{text}"
    );
    for (series, want) in [
        (
            r#"svc_job_runs_total{kind="job",job_id="m_ok",status="success"}"#,
            1.0,
        ),
        (
            r#"svc_job_runs_total{kind="job",job_id="m_fail",status="fail"}"#,
            1.0,
        ),
        (r#"svc_triggers_refused_total{reason="paused"}"#, 1.0),
    ] {
        assert_eq!(sample(text, series), Some(want), "{series}:\n{text}");
    }
}

/// Per job, in the same text: the last success (recent, and none for the job that never
/// succeeded) and the last run's duration.
fn assert_per_job_series(text: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let last_success = sample(
        text,
        r#"svc_job_last_success_timestamp_seconds{kind="job",job_id="m_ok"}"#,
    )
    .unwrap_or_default();
    assert!(
        (now - 600.0..=now + 1.0).contains(&last_success),
        "last success {last_success}, now {now}:\n{text}"
    );
    assert_eq!(
        sample(
            text,
            r#"svc_job_last_success_timestamp_seconds{kind="job",job_id="m_fail"}"#
        ),
        None,
        "a job that never succeeded has no last success:\n{text}"
    );
    let duration = sample(
        text,
        r#"svc_job_last_run_duration_seconds{kind="job",job_id="m_fail"}"#,
    );
    assert!(
        duration.is_some_and(|d| (0.0..60.0).contains(&d)),
        "last run duration {duration:?}:\n{text}"
    );
}

/// In the same text: the answered triggers by route template (never by raw path), with
/// the refused one; the queue length; the build info and the start time.
fn assert_requests_and_the_process(text: &str) {
    let triggers = sample(
        text,
        r#"svc_http_requests_total{route="/svc/api/job/run/{*path}",status="200"}"#,
    );
    assert!(
        triggers.is_some_and(|count| count >= 2.0),
        "two accepted triggers counted under the route template ({triggers:?}):\n{text}"
    );
    let refused = sample(
        text,
        r#"svc_http_requests_total{route="/svc/api/job/run/{*path}",status="401"}"#,
    );
    assert_eq!(refused, Some(1.0), "the refused trigger:\n{text}");
    assert!(
        !text.contains("route=\"/svc/api/job/run/m"),
        "raw paths never become labels:\n{text}"
    );
    assert!(
        sample(text, "svc_run_queue_length").is_some(),
        "queue length gauge:\n{text}"
    );
    let version = sample(
        text,
        &format!(
            r#"svc_build_info{{version="{}"}}"#,
            env!("CARGO_PKG_VERSION")
        ),
    );
    assert_eq!(version, Some(1.0), "build info:\n{text}");
    let start = sample(text, "svc_start_time_seconds").unwrap_or_default();
    let now = chrono::Utc::now().timestamp() as f64;
    assert!(
        start > now - 600.0 && start <= now + 1.0,
        "start time {start} near now {now}:\n{text}"
    );
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// A scrape, read by the OpenMetrics parser.
pub(crate) async fn scrape(svc: &TestService) -> Exposition {
    let (status, content_type, text) = metrics(svc).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "content type {content_type:?}"
    );
    parse_openmetrics(&text)
}

/// The per-job labels.
pub(crate) fn job(id: &str) -> [(&str, &str); 2] {
    [("kind", "job"), ("job_id", id)]
}

/// `svc_job_runs_total` of one job and status.
pub(crate) fn runs_of(metrics: &Exposition, id: &str, status: &str) -> Option<f64> {
    metrics.value(
        "svc_job_runs_total",
        &[("kind", "job"), ("job_id", id), ("status", status)],
    )
}

/// A reload that removes a job removes its series: the exposition follows the
/// configuration, and dashboards and alerts stop showing a job that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_job_leaves_no_series() {
    let svc = TestService::builder()
        .job_file(
            "r_keep",
            job_section("r_keep", &["path = /r_keep", "command = true"]),
        )
        .job_file(
            "r_gone",
            job_section("r_gone", &["interval = 1h", "command = true"]),
        )
        .start()
        .await;
    // The interval job runs at start: wait for its success in the metrics.
    let before = wait_for(WAIT, "r_gone's run in the metrics", async || {
        let metrics = scrape(&svc).await;
        (runs_of(&metrics, "r_gone", "success") == Some(1.0)
            && metrics
                .value("svc_job_interval_seconds", &job("r_gone"))
                .is_some())
        .then_some(metrics)
    })
    .await;
    assert_eq!(
        before.value("svc_job_interval_seconds", &job("r_gone")),
        Some(3600.0)
    );

    let file = svc.job_d().join("r_gone.conf");
    std::fs::remove_file(&file).unwrap_or_else(|err| panic!("remove {}: {err}", file.display()));
    svc.sighup();
    let after = wait_for(WAIT, "r_gone's series gone after the reload", async || {
        let metrics = scrape(&svc).await;
        let gone = metrics.families.iter().all(|family| {
            family
                .samples
                .iter()
                .all(|sample| sample.labels.get("job_id").map(String::as_str) != Some("r_gone"))
        });
        gone.then_some(metrics)
    })
    .await;
    assert_eq!(
        runs_of(&after, "r_keep", "success"),
        Some(0.0),
        "the other job's series stay"
    );
    assert_eq!(after.value("svc_job_queued", &job("r_keep")), Some(0.0));
}
