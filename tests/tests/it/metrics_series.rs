//! `GET /svc/api/metrics` read with a real OpenMetrics parser: after runs of every status
//! and refused triggers, every per-job series tells the runs made, the queue gauges what
//! waits and runs, each family has the type, unit and help documented, and the shipped
//! monitoring files use only series the controller exports.

use svc_tests::prom::Exposition;
use svc_tests::sink::Sink;
use svc_tests::{TestService, WAIT, fresh_epoch, job_section, wait_for};

use crate::metrics::{job, runs_of, scrape, unix_now};
use crate::metrics_monitoring::{read_monitoring_file, series_names};

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
async fn every_series_tells_the_runs_made() {
    let began = unix_now();
    // Never answers: the JobHttp call to it goes on until the test ends.
    let silent = Sink::silent().await;
    let svc = start_service(&silent).await;
    every_series_starts_at_zero(&svc).await;

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

    the_queue_gauges_show_a_full_queue(&svc).await;
    // The cancellation ends the run and empties the queue.
    svc.cancel("p_cancel").await.assert_status(200);
    svc.wait_run_finished("p_cancel", 1, WAIT).await;
    // And a paused job's trigger is refused.
    svc.pause("p_fail").await.assert_status(200);
    svc.trigger("/p_fail", b"{}", &[]).await.assert_status(412);

    // Exactly the runs made, every other status still zero.
    let counted = |metrics: &Exposition| {
        JOBS.iter().all(|id| {
            STATUSES
                .iter()
                .all(|status| runs_of(metrics, id, status) == Some(runs_made(id, status)))
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
    assert_exactly_the_runs_made(&metrics);
    assert_last_success_and_durations(&metrics, began, ended);
    assert_queue_pause_and_refusals(&metrics);
    assert_families_as_documented(&metrics);
    assert_monitoring_files_use_exported_series(&metrics);
}

/// The service of [`every_series_tells_the_runs_made`], started: a job for each way a
/// run ends, a JobHttp calling `silent` (which never answers), and `p_timer`, whose daily
/// schedule gives the interval series. That one is paused from the start (its state file
/// says so), so that no run of it, were the test to span 04:00 UTC, adds to the counts,
/// the running gauge and the duration histogram checked.
async fn start_service(silent: &Sink) -> TestService {
    let mut svc = TestService::builder()
        .svc("max_job_running = 4")
        .job_file(
            "p_ok",
            job_section("p_ok", &["path = /p_ok", "command = sleep 0.05"]),
        )
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
    svc
}

/// Before any run: every job's runs by status start at zero, nothing is queued, running
/// or paused but `p_timer`, the setting is there, and only the timer has an interval
/// (which its task exports as it starts, just after the controller).
async fn every_series_starts_at_zero(svc: &TestService) {
    let start = wait_for(WAIT, "p_timer's interval in the metrics", async || {
        let metrics = scrape(svc).await;
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
}

/// A JobHttp call that goes on (it takes no `max_job_running` permit); a run that goes
/// on, a trigger queued behind it, one more refused: the queue is full, and the gauges
/// say so.
async fn the_queue_gauges_show_a_full_queue(svc: &TestService) {
    svc.job_http_trigger(&format!("id=p_http&_svc_epoch={}", fresh_epoch()))
        .await
        .assert_status(200);
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
            let metrics = scrape(svc).await;
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
}

/// How many runs of job `id` ended with `status` in the test.
fn runs_made(id: &str, status: &str) -> f64 {
    match (id, status) {
        ("p_ok", "success") => 2.0,
        ("p_fail", "fail") | ("p_timeout", "timeout") | ("p_cancel", "canceled") => 1.0,
        _ => 0.0,
    }
}

/// Exactly the runs made by status, every other status still zero; and by result, a
/// timeout and a cancellation being failures in the log's terms.
fn assert_exactly_the_runs_made(metrics: &Exposition) {
    for id in JOBS {
        for status in STATUSES {
            assert_eq!(
                runs_of(metrics, id, status),
                Some(runs_made(id, status)),
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
}

/// The last success: `p_ok`'s, within the test's span (`began` to `ended`); no other
/// job has one; the last run's result of each. Durations: what the commands took,
/// bounded by the test's own span, and five runs in the histogram.
fn assert_last_success_and_durations(metrics: &Exposition, began: f64, ended: f64) {
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
}

/// The queue is empty again; the pause shows; the refusals are counted by reason, and
/// the cancellation dropped the queued trigger.
fn assert_queue_pause_and_refusals(metrics: &Exposition) {
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
}

/// Types, units and help as documented; no per-job series is labelled `job`: Prometheus
/// sets that label itself.
fn assert_families_as_documented(metrics: &Exposition) {
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
}

/// The shipped dashboard and alert rules select only series this scrape has.
fn assert_monitoring_files_use_exported_series(metrics: &Exposition) {
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
