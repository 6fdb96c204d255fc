//! `GET /svc/api/metrics`: webhook runs, their results and durations, refused webhooks and
//! answered requests show up in the text exposition; read with a real OpenMetrics parser,
//! every per-job series tells the runs made; and the shipped monitoring files (Grafana
//! dashboard, Prometheus alert rules) pass Prometheus's own checks and use only series
//! the controller exports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use svc_tests::prom::{Exposition, parse_openmetrics, promtool};
use svc_tests::sink::Sink;
use svc_tests::{TestService, WAIT, fresh_epoch, job_section, wait_for};

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
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
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
    assert_eq!(
        sample(
            &text,
            r#"svc_runs_total{kind="job",job_id="m_ok",result="fail"}"#
        ),
        None,
        "the successful job has no failed run:\n{text}"
    );
    let count = sample(&text, r#"svc_run_duration_seconds_count{kind="job"}"#);
    assert!(
        count.is_some_and(|count| count >= 2.0),
        "two job durations observed ({count:?}):\n{text}"
    );
    assert!(
        has_line(&text, "svc_run_duration_seconds_bucket{"),
        "histogram buckets:\n{text}"
    );
    assert_eq!(
        sample(&text, r#"svc_webhook_rejections_total{reason="signature"}"#),
        Some(1.0),
        "one refused signature:\n{text}"
    );
    // Per job: runs by how they ended, the last success, the last duration.
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
        assert_eq!(sample(&text, series), Some(want), "{series}:\n{text}");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let last_success = sample(
        &text,
        r#"svc_job_last_success_timestamp_seconds{kind="job",job_id="m_ok"}"#,
    )
    .unwrap_or_default();
    assert!(
        (now - 600.0..=now + 1.0).contains(&last_success),
        "last success {last_success}, now {now}:\n{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"svc_job_last_success_timestamp_seconds{kind="job",job_id="m_fail"}"#
        ),
        None,
        "a job that never succeeded has no last success:\n{text}"
    );
    let duration = sample(
        &text,
        r#"svc_job_last_run_duration_seconds{kind="job",job_id="m_fail"}"#,
    );
    assert!(
        duration.is_some_and(|d| (0.0..60.0).contains(&d)),
        "last run duration {duration:?}:\n{text}"
    );
    let triggers = sample(
        &text,
        r#"svc_http_requests_total{route="/svc/api/job/run/{*path}",status="200"}"#,
    );
    assert!(
        triggers.is_some_and(|count| count >= 2.0),
        "two accepted triggers counted under the route template ({triggers:?}):\n{text}"
    );
    let refused = sample(
        &text,
        r#"svc_http_requests_total{route="/svc/api/job/run/{*path}",status="401"}"#,
    );
    assert_eq!(refused, Some(1.0), "the refused trigger:\n{text}");
    assert!(
        !text.contains("route=\"/svc/api/job/run/m"),
        "raw paths never become labels:\n{text}"
    );
    assert!(
        sample(&text, "svc_run_queue_length").is_some(),
        "queue length gauge:\n{text}"
    );
    let version = sample(
        &text,
        &format!(
            r#"svc_build_info{{version="{}"}}"#,
            env!("CARGO_PKG_VERSION")
        ),
    );
    assert_eq!(version, Some(1.0), "build info:\n{text}");
    let start = sample(&text, "svc_start_time_seconds").unwrap_or_default();
    let now = chrono::Utc::now().timestamp() as f64;
    assert!(
        start > now - 600.0 && start <= now + 1.0,
        "start time {start} near now {now}:\n{text}"
    );
}

/// Seconds since the Unix epoch, now.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// A scrape, read by the OpenMetrics parser.
async fn scrape(svc: &TestService) -> Exposition {
    let (status, content_type, text) = metrics(svc).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "content type {content_type:?}"
    );
    parse_openmetrics(&text)
}

/// The per-job labels.
fn job(id: &str) -> [(&str, &str); 2] {
    [("kind", "job"), ("job_id", id)]
}

/// `svc_job_runs_total` of one job and status.
fn runs_of(metrics: &Exposition, id: &str, status: &str) -> Option<f64> {
    metrics.value(
        "svc_job_runs_total",
        &[("kind", "job"), ("job_id", id), ("status", status)],
    )
}

/// The statuses a run is counted under.
const STATUSES: [&str; 5] = ["success", "fail", "canceled", "timeout", "interrupted"];

/// The jobs of [`every_series_tells_the_runs_made`], each ending its runs one way.
const JOBS: [&str; 4] = ["p_ok", "p_fail", "p_timeout", "p_cancel"];

/// Runs of every status and a refused trigger, then the exposition read with the
/// Prometheus client's OpenMetrics parser: each family has its type, help and unit, and
/// each per-job series counts exactly the runs made, with a last success within the
/// test's time span and durations the commands took. The queue gauges are read while a
/// trigger waits, and again once it is gone. A JobHttp call going on meanwhile shows in
/// its job's `svc_job_running`, not in `svc_runs_running`: it holds no permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn every_series_tells_the_runs_made() {
    let began = unix_now();
    // Never answers: the JobHttp call to it goes on until the test ends.
    let silent = Sink::silent().await;
    let mut svc = TestService::builder()
        .svc("max_job_running = 4")
        .job_file(
            "p_ok",
            job_section("p_ok", &["path = /p_ok", "command = sleep 0.05"]),
        )
        // The interval series of a daily schedule. Paused from the start (its state file
        // says so), so that no run of it, were the test to span 04:00 UTC, adds to the
        // counts, the running gauge and the duration histogram checked below.
        .job_file(
            "p_timer",
            job_section("p_timer", &["schedule = 0 4 * * *", "command = true"]),
        )
        .job_file(
            "p_fail",
            job_section("p_fail", &["path = /p_fail", "command = exit 3"]),
        )
        .job_file(
            "p_timeout",
            job_section(
                "p_timeout",
                &["path = /p_timeout", "command = sleep 30", "timeout = 1s"],
            ),
        )
        .job_file(
            "p_cancel",
            job_section("p_cancel", &["path = /p_cancel", "command = sleep 30"]),
        )
        .job_http_file(
            "p_http",
            format!(
                "[job.http \"p_http\"]\nhttp_url = {}\n",
                silent.url("/hold")
            ),
        )
        .build();
    let state = svc.state_path("p_timer");
    std::fs::create_dir_all(state.parent().expect("the state directory"))
        .expect("create the state directory");
    std::fs::write(
        &state,
        "last_run = \nstatus = \ncounter = 0\npaused = true\n",
    )
    .expect("write p_timer's state file");
    svc.start().await;

    // Before any run: every job's runs by status start at zero, the setting is there.
    // The timer task exports the interval as it starts, just after the controller.
    let start = wait_for(WAIT, "p_timer's interval in the metrics", async || {
        let metrics = scrape(&svc).await;
        metrics
            .value("svc_job_interval_seconds", &job("p_timer"))
            .is_some()
            .then_some(metrics)
    })
    .await;
    for id in JOBS {
        for status in STATUSES {
            assert_eq!(
                runs_of(&start, id, status),
                Some(0.0),
                "{id} {status} before any run: {start:#?}"
            );
        }
        assert_eq!(start.value("svc_job_queued", &job(id)), Some(0.0), "{id}");
        assert_eq!(start.value("svc_job_running", &job(id)), Some(0.0), "{id}");
        assert_eq!(start.value("svc_job_paused", &job(id)), Some(0.0), "{id}");
    }
    assert_eq!(start.value("svc_max_job_running", &[]), Some(4.0));
    assert_eq!(
        start.value("svc_job_interval_seconds", &job("p_timer")),
        Some(86_400.0),
        "a daily schedule's gap"
    );
    assert_eq!(
        start.value("svc_job_paused", &job("p_timer")),
        Some(1.0),
        "paused before its timer could fire"
    );
    for id in ["p_ok", "p_fail"] {
        assert_eq!(
            start.value("svc_job_interval_seconds", &job(id)),
            None,
            "{id}: a job without a timer has no interval"
        );
    }

    // Two successes, a failure, a timeout.
    for counter in 1..=2 {
        svc.trigger("/p_ok", b"{}", &[]).await.assert_status(200);
        svc.wait_run_finished("p_ok", counter, WAIT)
            .await
            .assert_status("success");
    }
    svc.trigger("/p_fail", b"{}", &[]).await.assert_status(200);
    svc.trigger("/p_timeout", b"{}", &[])
        .await
        .assert_status(200);
    svc.wait_run_finished("p_fail", 1, WAIT)
        .await
        .assert_status("fail");
    svc.wait_run_finished("p_timeout", 1, WAIT).await;

    // A JobHttp call that goes on (it takes no max_job_running permit).
    svc.job_http_trigger(&format!("id=p_http&_svc_epoch={}", fresh_epoch()))
        .await
        .assert_status(200);
    // A run that goes on, a trigger queued behind it, one more refused: the queue is
    // full.
    svc.trigger("/p_cancel", b"{}", &[])
        .await
        .assert_status(200);
    svc.wait_run_started("p_cancel", 1, WAIT).await;
    svc.trigger("/p_cancel", b"{}", &[])
        .await
        .assert_status(200);
    let busy = svc.trigger("/p_cancel", b"{}", &[]).await;
    assert_eq!(
        busy.status, 429,
        "a third trigger of a busy job: {}",
        busy.raw
    );
    // The other runs' logs have their final names; the engine records their ends
    // right after, so the count of running runs comes down to p_cancel's alone: the
    // JobHttp call, going on too, holds no permit and is not counted.
    let http_job = [("kind", "job_http"), ("job_id", "p_http")];
    let full = wait_for(
        WAIT,
        "the queued trigger, one run and the JobHttp call in the metrics",
        async || {
            let metrics = scrape(&svc).await;
            let full = metrics.value("svc_job_queued", &job("p_cancel")) == Some(1.0)
                && metrics.value("svc_job_running", &http_job) == Some(1.0)
                && metrics.value("svc_runs_running", &[]) == Some(1.0);
            full.then_some(metrics)
        },
    )
    .await;
    assert_eq!(full.value("svc_job_running", &job("p_cancel")), Some(1.0));
    assert_eq!(full.value("svc_job_running", &job("p_ok")), Some(0.0));
    assert_eq!(full.value("svc_job_queued", &job("p_ok")), Some(0.0));
    assert_eq!(
        full.value("svc_run_queue_length", &[]),
        Some(1.0),
        "{full:#?}"
    );
    assert_eq!(
        full.value("svc_triggers_refused_total", &[("reason", "busy")]),
        Some(1.0)
    );

    // The cancellation ends the run and empties the queue.
    svc.cancel("p_cancel").await.assert_status(200);
    svc.wait_run_finished("p_cancel", 1, WAIT).await;
    // And a paused job's trigger is refused.
    svc.pause("p_fail").await.assert_status(200);
    svc.trigger("/p_fail", b"{}", &[]).await.assert_status(412);

    // Exactly the runs made, every other status still zero.
    let expected = |id: &str, status: &str| match (id, status) {
        ("p_ok", "success") => 2.0,
        ("p_fail", "fail") | ("p_timeout", "timeout") | ("p_cancel", "canceled") => 1.0,
        _ => 0.0,
    };
    let counted = |metrics: &Exposition| {
        JOBS.iter().all(|id| {
            STATUSES
                .iter()
                .all(|status| runs_of(metrics, id, status) == Some(expected(id, status)))
        })
    };
    // Each end is counted once its log has its final name; polled until all are.
    let metrics = wait_for(WAIT, "every run's end in the metrics", async || {
        let metrics = scrape(&svc).await;
        let done = counted(&metrics) && metrics.value("svc_runs_running", &[]) == Some(0.0);
        done.then_some(metrics)
    })
    .await;
    let ended = unix_now();
    for id in JOBS {
        for status in STATUSES {
            assert_eq!(
                runs_of(&metrics, id, status),
                Some(expected(id, status)),
                "svc_job_runs_total of {id}, {status}: {metrics:#?}"
            );
        }
    }
    assert_eq!(
        metrics.value(
            "svc_runs_total",
            &[("kind", "job"), ("job_id", "p_ok"), ("result", "success")]
        ),
        Some(2.0)
    );
    for (id, result, want) in [("p_timeout", "fail", 1.0), ("p_cancel", "fail", 1.0)] {
        assert_eq!(
            metrics.value(
                "svc_runs_total",
                &[("kind", "job"), ("job_id", id), ("result", result)]
            ),
            Some(want),
            "a {id} run is a failure in the log's terms"
        );
    }

    // The last success: p_ok's, within the test's span; no other job has one.
    let last_success = metrics
        .value("svc_job_last_success_timestamp_seconds", &job("p_ok"))
        .unwrap_or_default();
    assert!(
        (began..=ended).contains(&last_success),
        "last success {last_success} outside the test's {began}..{ended}"
    );
    for id in ["p_fail", "p_timeout", "p_cancel"] {
        assert_eq!(
            metrics.value("svc_job_last_success_timestamp_seconds", &job(id)),
            None,
            "{id} never succeeded"
        );
    }
    for (id, ok) in [
        ("p_ok", 1.0),
        ("p_fail", 0.0),
        ("p_timeout", 0.0),
        ("p_cancel", 0.0),
    ] {
        assert_eq!(
            metrics.value("svc_job_last_run_success", &job(id)),
            Some(ok),
            "{id}"
        );
    }

    // Durations: what the commands took, bounded by the test's own span.
    let span = ended - began;
    for (id, at_least) in [
        ("p_ok", 0.05),
        ("p_fail", 0.0),
        ("p_timeout", 1.0),
        ("p_cancel", 0.0),
    ] {
        let duration = metrics
            .value("svc_job_last_run_duration_seconds", &job(id))
            .unwrap_or(-1.0);
        assert!(
            duration >= at_least && duration < span,
            "last run duration of {id}: {duration} (at least {at_least}, test span {span})"
        );
    }
    assert!(
        metrics
            .value("svc_job_last_run_duration_seconds", &job("p_timeout"))
            .is_some_and(|d| d < 30.0),
        "the timeout ended the 30 s sleep"
    );
    let histogram_count = metrics
        .value("svc_run_duration_seconds_count", &[("kind", "job")])
        .unwrap_or_default();
    assert_eq!(histogram_count, 5.0, "five runs in the duration histogram");

    // The queue is empty again; the pause shows; the refusals are counted by reason.
    assert_eq!(metrics.value("svc_job_queued", &job("p_cancel")), Some(0.0));
    assert_eq!(metrics.value("svc_run_queue_length", &[]), Some(0.0));
    assert_eq!(metrics.value("svc_job_paused", &job("p_fail")), Some(1.0));
    assert_eq!(metrics.value("svc_job_paused", &job("p_ok")), Some(0.0));
    assert_eq!(
        metrics.value("svc_triggers_refused_total", &[("reason", "paused")]),
        Some(1.0)
    );
    assert_eq!(
        metrics.value("svc_triggers_refused_total", &[("reason", "busy")]),
        Some(1.0)
    );
    assert_eq!(
        metrics.value("svc_triggers_dropped_total", &[("reason", "canceled")]),
        Some(1.0),
        "the cancellation dropped the queued trigger"
    );

    // Types, units and help as documented.
    for (name, kind, unit) in [
        ("svc_job_runs", "counter", ""),
        ("svc_runs", "counter", ""),
        ("svc_job_last_success_timestamp_seconds", "gauge", "seconds"),
        ("svc_job_last_run_duration_seconds", "gauge", "seconds"),
        ("svc_job_last_run_success", "gauge", ""),
        ("svc_job_interval_seconds", "gauge", "seconds"),
        ("svc_job_queued", "gauge", ""),
        ("svc_job_running", "gauge", ""),
        ("svc_job_paused", "gauge", ""),
        ("svc_job_cpu_seconds", "counter", "seconds"),
        ("svc_job_last_run_peak_memory_bytes", "gauge", "bytes"),
        ("svc_run_queue_length", "gauge", ""),
        ("svc_runs_running", "gauge", ""),
        ("svc_max_job_running", "gauge", ""),
        ("svc_triggers_refused", "counter", ""),
        ("svc_triggers_dropped", "counter", ""),
        ("svc_run_duration_seconds", "histogram", "seconds"),
        ("svc_start_time_seconds", "gauge", "seconds"),
        ("svc_build_info", "gauge", ""),
    ] {
        let family = metrics
            .family(name)
            .unwrap_or_else(|| panic!("no family {name}: {metrics:#?}"));
        assert_eq!(family.kind, kind, "type of {name}");
        assert_eq!(family.unit, unit, "unit of {name}");
        assert!(!family.help.is_empty(), "{name} has a help text");
    }
    // No per-job series is labelled `job`: Prometheus sets that label itself.
    for family in &metrics.families {
        for sample in &family.samples {
            assert!(
                !sample.labels.contains_key("job"),
                "{} has a job label: {:?}",
                sample.name,
                sample.labels
            );
        }
    }

    // The shipped dashboard and alert rules select only series this scrape has.
    let exported = metrics.sample_names();
    for file in ["grafana-dashboard.json", "prometheus-alerts.yml"] {
        let text = read_monitoring_file(file);
        let unknown: Vec<String> = series_names(&text)
            .into_iter()
            .filter(|name| !exported.contains(name))
            .collect();
        assert!(
            unknown.is_empty(),
            "{file} uses series the controller does not export: {unknown:?}; exported: {exported:?}"
        );
    }
}

/// The shipped monitoring files' sources.
fn monitoring_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/monitoring")
}

fn read_monitoring_file(name: &str) -> String {
    let path = monitoring_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
}

/// Every `svc_…` series name in `text` (PromQL in a dashboard or rule file).
fn series_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("svc_") {
        // Only a whole identifier: `svc_` not preceded by a word character.
        let preceded = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !preceded {
            names.insert(name.clone());
        }
        rest = &rest[at + name.len()..];
    }
    names
}

/// Runs `promtool` with `args` in the monitoring directory; panics with its output when
/// it fails, or with how to install it when it is missing.
fn run_promtool(args: &[&str]) {
    let promtool = promtool().unwrap_or_else(|err| panic!("{err}"));
    let output = Command::new(&promtool)
        .args(args)
        .current_dir(monitoring_dir())
        .output()
        .unwrap_or_else(|err| panic!("run promtool {args:?}: {err}"));
    assert!(
        output.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The alert rules pass `promtool check rules`, and their unit tests (input series,
/// expected alerts) pass `promtool test rules`.
#[test]
fn alert_rules_pass_promtool() {
    run_promtool(&["check", "rules", "prometheus-alerts.yml"]);
    run_promtool(&["test", "rules", "prometheus-alerts.test.yml"]);
}

/// The dashboard is JSON Grafana can import: a datasource variable that every panel and
/// query uses, a job selector, and panels whose every query is valid PromQL (checked
/// by `promtool`, as recording rules, with the template variables filled in).
#[test]
fn dashboard_is_valid_and_its_queries_parse() {
    let text = read_monitoring_file("grafana-dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&text).unwrap_or_else(|err| panic!("the dashboard's JSON: {err}"));
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating variables");
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    assert_eq!(variable("datasource")["type"], "datasource");
    assert_eq!(variable("datasource")["query"], "prometheus");
    assert_eq!(variable("job_id")["type"], "query");
    assert_eq!(variable("job_id")["multi"], true);

    let datasource = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    let mut exprs = Vec::new();
    let mut titles = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or_default().to_owned();
        assert_eq!(panel["datasource"], datasource, "panel {title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title} has queries");
        for target in targets {
            assert_eq!(target["datasource"], datasource, "a query of {title}");
            let expr = target["expr"].as_str().expect("a query's expr");
            exprs.push(expr.to_owned());
        }
        titles.insert(title);
    }
    for wanted in [
        "Runs by status",
        "Failure rate",
        "Last success age",
        "Last run duration",
        "Queue and run slots",
        "Refused and dropped triggers",
    ] {
        assert!(titles.contains(wanted), "no panel {wanted:?} in {titles:?}");
    }

    // Each query as a recording rule: promtool parses it as Prometheus would.
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(n, expr)| {
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$instance", ".*")
                .replace("$job_id", ".*");
            serde_json::json!({"record": format!("dashboard:query_{n}"), "expr": expr})
        })
        .collect();
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("dashboard-queries.yml");
    // JSON is YAML: promtool reads it as a rule file.
    std::fs::write(&path, file.to_string()).expect("write the queries");
    let path = path.to_str().expect("a UTF-8 temporary path");
    run_promtool(&["check", "rules", path]);
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
