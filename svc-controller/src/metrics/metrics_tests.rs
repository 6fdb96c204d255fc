//! The metrics tests: the exposition of each family, its labels, and the facade.

use super::*;

/// The record of a run that succeeded or failed after `duration`, ended at
/// 2026-11-26T10:00:00.5Z.
fn end(success: bool, duration: Duration) -> RunRecord {
    let ended_at = DateTime::from_timestamp(1_795_687_200, 500_000_000).unwrap_or_default();
    RunRecord {
        counter: 1,
        status: if success {
            RunStatus::Success
        } else {
            RunStatus::Fail
        },
        trigger: "timer".into(),
        delivery: None,
        cause: None,
        attempt: 1,
        started_at: ended_at,
        ended_at,
        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        exit_code: None,
        signal: None,
        http_status: None,
        summary: String::new(),
        usage: None,
        reason: None,
    }
}

#[test]
fn each_job_has_its_runs_by_status_its_last_success_and_last_duration() {
    let m = fresh();
    m.run_finished("job", "a", &end(true, Duration::from_millis(20)));
    for status in [RunStatus::Timeout, RunStatus::Canceled, RunStatus::Timeout] {
        m.run_finished(
            "job",
            "a",
            &RunRecord {
                status,
                ..end(false, Duration::from_millis(1500))
            },
        );
    }
    let earlier = DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default();
    m.job_loaded("job", "b", Some((RunResult::Success, earlier)));
    m.trigger_refused("busy");
    let text = m.render();
    for line in [
        "# TYPE svc_job_runs counter\n",
        "svc_job_runs_total{kind=\"job\",job_id=\"a\",status=\"success\"} 1\n",
        "svc_job_runs_total{kind=\"job\",job_id=\"a\",status=\"timeout\"} 2\n",
        "svc_job_runs_total{kind=\"job\",job_id=\"a\",status=\"canceled\"} 1\n",
        "# TYPE svc_job_last_success_timestamp_seconds gauge\n",
        // The failures after it leave the last success as it was.
        "svc_job_last_success_timestamp_seconds{kind=\"job\",job_id=\"a\"} 1795687200.5\n",
        "svc_job_last_success_timestamp_seconds{kind=\"job\",job_id=\"b\"} 1700000000.0\n",
        "# TYPE svc_job_last_run_duration_seconds gauge\n",
        "svc_job_last_run_duration_seconds{kind=\"job\",job_id=\"a\"} 1.5\n",
        "svc_triggers_refused_total{reason=\"busy\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

/// Whether `text` has job a's `svc_runs_total` of both results.
fn text_has_both_results(text: &str) -> bool {
    ["success", "fail"].iter().all(|result| {
        text.contains(&format!(
            "svc_runs_total{{kind=\"job\",job_id=\"a\",result=\"{result}\"}}"
        ))
    })
}

/// The last success is when the run ended, as its end records it; a job loaded at
/// start has only when its last run began (all its state keeps), and a later
/// failure leaves either as it was. One rule for both.
#[test]
fn the_last_success_is_the_end_of_a_run_or_the_begin_of_a_loaded_one() {
    let m = fresh();
    let began = DateTime::from_timestamp(1_795_687_000, 0).unwrap_or_default();
    m.run_finished(
        "job",
        "ended",
        &RunRecord {
            started_at: began,
            ..end(true, Duration::from_secs(200))
        },
    );
    m.job_loaded("job", "loaded", Some((RunResult::Success, began)));
    for id in ["ended", "loaded"] {
        m.run_finished("job", id, &end(false, Duration::from_millis(20)));
    }
    let text = m.render();
    for line in [
        "svc_job_last_success_timestamp_seconds{kind=\"job\",job_id=\"ended\"} 1795687200.5\n",
        "svc_job_last_success_timestamp_seconds{kind=\"job\",job_id=\"loaded\"} 1795687000.0\n",
        "svc_job_last_run_success{kind=\"job\",job_id=\"ended\"} 0\n",
        "svc_job_last_run_success{kind=\"job\",job_id=\"loaded\"} 0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

/// A job loaded at start shows its runs by status from zero and what its state file
/// says of its last run; a reload that removes it takes every series of it away.
#[test]
fn a_loaded_job_starts_at_zero_and_a_removed_one_leaves_no_series() {
    let m = fresh();
    let began = DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default();
    m.job_loaded("job", "a", Some((RunResult::Fail, began)));
    let text = m.render();
    for status in ["success", "fail", "canceled", "timeout", "interrupted"] {
        let line =
            format!("svc_job_runs_total{{kind=\"job\",job_id=\"a\",status=\"{status}\"}} 0\n");
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
    assert!(
        text.contains("svc_job_last_run_success{kind=\"job\",job_id=\"a\"} 0\n"),
        "{text}"
    );
    assert!(!text.contains("svc_job_last_success_timestamp"), "{text}");

    m.run_finished("job", "a", &end(true, Duration::from_millis(20)));
    m.set_job_interval("job", "a", Some(Duration::from_secs(90)));
    m.apply_queue_snapshot(&QueueSnapshot {
        waiting: 1,
        running: 1,
        jobs: vec![JobQueueState {
            kind: "job",
            job_id: "a".into(),
            queued: true,
            running: true,
            paused: false,
        }],
    });
    let text = m.render();
    for line in [
        "svc_job_runs_total{kind=\"job\",job_id=\"a\",status=\"success\"} 1\n",
        "svc_job_last_run_success{kind=\"job\",job_id=\"a\"} 1\n",
        "svc_job_interval_seconds{kind=\"job\",job_id=\"a\"} 90.0\n",
        "svc_job_queued{kind=\"job\",job_id=\"a\"} 1\n",
        "svc_job_running{kind=\"job\",job_id=\"a\"} 1\n",
        "svc_runs_running 1\n",
        "svc_run_queue_length 1\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }

    // A failure too, so that both results of `svc_runs_total` have a series.
    m.run_finished("job", "a", &end(false, Duration::from_millis(20)));
    assert!(
        text_has_both_results(&m.render()),
        "both results before the removal"
    );
    m.job_removed("job", "a");
    // The next count no longer lists it either.
    m.apply_queue_snapshot(&QueueSnapshot::default());
    let text = m.render();
    assert!(!text.contains("job_id=\"a\""), "{text}");
    assert!(text.contains("svc_runs_running 0\n"), "{text}");
}

#[test]
fn a_job_without_timer_has_no_interval() {
    let m = fresh();
    m.set_job_interval("job_http", "h", Some(Duration::from_millis(1500)));
    assert!(
        m.render()
            .contains("svc_job_interval_seconds{kind=\"job_http\",job_id=\"h\"} 1.5\n")
    );
    m.set_job_interval("job_http", "h", None);
    assert!(!m.render().contains("svc_job_interval_seconds{"));
}

/// A private registry, so that assertions do not depend on other tests.
fn fresh() -> Metrics {
    Metrics::new(1_700_000_000.5)
}

#[test]
fn runs_are_counted_by_kind_job_and_result() {
    let m = fresh();
    m.run_finished("job", "a", &end(true, Duration::from_millis(20)));
    m.run_finished("job", "a", &end(true, Duration::from_millis(20)));
    m.run_finished("job", "a", &end(false, Duration::from_secs(2)));
    m.run_finished("job_http", "h", &end(true, Duration::from_secs(7200)));
    let text = m.render();
    assert!(text.contains("# TYPE svc_runs counter\n"), "{text}");
    for line in [
        "svc_runs_total{kind=\"job\",job_id=\"a\",result=\"success\"} 2\n",
        "svc_runs_total{kind=\"job\",job_id=\"a\",result=\"fail\"} 1\n",
        "svc_runs_total{kind=\"job_http\",job_id=\"h\",result=\"success\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn durations_fall_into_the_job_buckets() {
    let m = fresh();
    m.run_finished("job", "a", &end(true, Duration::from_millis(20)));
    m.run_finished("job", "a", &end(false, Duration::from_secs(2)));
    m.run_finished("job_http", "h", &end(true, Duration::from_secs(7200)));
    let text = m.render();
    assert!(
        text.contains("# TYPE svc_run_duration_seconds histogram\n"),
        "{text}"
    );
    assert!(
        text.contains("# UNIT svc_run_duration_seconds seconds\n"),
        "{text}"
    );
    for line in [
        "svc_run_duration_seconds_count{kind=\"job\"} 2\n",
        "svc_run_duration_seconds_sum{kind=\"job\"} 2.02\n",
        "svc_run_duration_seconds_bucket{le=\"0.01\",kind=\"job\"} 0\n",
        "svc_run_duration_seconds_bucket{le=\"0.05\",kind=\"job\"} 1\n",
        "svc_run_duration_seconds_bucket{le=\"5.0\",kind=\"job\"} 2\n",
        "svc_run_duration_seconds_bucket{le=\"3600.0\",kind=\"job_http\"} 0\n",
        "svc_run_duration_seconds_bucket{le=\"+Inf\",kind=\"job_http\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn unknown_kind_is_labelled_other() {
    let m = fresh();
    m.run_finished("surprise", "x", &end(true, Duration::ZERO));
    let text = m.render();
    assert!(
        text.contains("svc_runs_total{kind=\"other\",job_id=\"x\",result=\"success\"} 1\n"),
        "{text}"
    );
}

#[test]
fn queue_length_is_a_gauge() {
    let m = fresh();
    assert!(m.render().contains("svc_run_queue_length 0\n"));
    m.set_queue_length(3);
    let text = m.render();
    assert!(
        text.contains("# TYPE svc_run_queue_length gauge\n"),
        "{text}"
    );
    assert!(text.contains("svc_run_queue_length 3\n"), "{text}");
    m.set_queue_length(usize::MAX);
    assert!(
        m.render()
            .contains(&format!("svc_run_queue_length {}\n", i64::MAX))
    );
}

#[test]
fn timer_lateness_falls_into_fine_buckets() {
    let m = fresh();
    // Shown from the start, empty: a scrape can tell "no timer fired" from "no metric".
    assert!(
        m.render()
            .contains("svc_timer_lateness_seconds_bucket{le=\"0.0005\"} 0\n")
    );
    for ms in [0.2, 0.7, 3.0, 8.0, 40.0] {
        m.engine.timer_lateness.observe(ms / 1000.0);
    }
    let text = m.render();
    assert!(
        text.contains("# TYPE svc_timer_lateness_seconds histogram\n"),
        "{text}"
    );
    for line in [
        "svc_timer_lateness_seconds_count 5\n",
        "svc_timer_lateness_seconds_bucket{le=\"0.0005\"} 1\n",
        "svc_timer_lateness_seconds_bucket{le=\"0.001\"} 2\n",
        "svc_timer_lateness_seconds_bucket{le=\"0.002\"} 2\n",
        "svc_timer_lateness_seconds_bucket{le=\"0.005\"} 3\n",
        "svc_timer_lateness_seconds_bucket{le=\"0.01\"} 4\n",
        "svc_timer_lateness_seconds_bucket{le=\"0.05\"} 5\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn rejections_and_http_requests_are_counted() {
    let m = fresh();
    m.webhook_rejected("signature");
    m.webhook_rejected("signature");
    m.webhook_rejected("unknown_path");
    m.http_request("/svc/api/job/run/{*path}", 200);
    m.http_request("other", 404);
    let text = m.render();
    for line in [
        "# TYPE svc_webhook_rejections counter\n",
        "svc_webhook_rejections_total{reason=\"signature\"} 2\n",
        "svc_webhook_rejections_total{reason=\"unknown_path\"} 1\n",
        "# TYPE svc_http_requests counter\n",
        "svc_http_requests_total{route=\"/svc/api/job/run/{*path}\",status=\"200\"} 1\n",
        "svc_http_requests_total{route=\"other\",status=\"404\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

/// Answers of one route and status add up in one counter, apart from the others.
#[test]
fn repeated_http_requests_add_up() {
    let m = fresh();
    for _ in 0..3 {
        m.http_request("/svc/api/job/run/{*path}", 401);
    }
    m.http_request("/svc/api/job/run/{*path}", 429);
    m.http_request("other", 401);
    let text = m.render();
    for line in [
        "svc_http_requests_total{route=\"/svc/api/job/run/{*path}\",status=\"401\"} 3\n",
        "svc_http_requests_total{route=\"/svc/api/job/run/{*path}\",status=\"429\"} 1\n",
        "svc_http_requests_total{route=\"other\",status=\"401\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn build_info_start_time_and_eof() {
    let text = fresh().render();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        text.contains(&format!("svc_build_info{{version=\"{version}\"}} 1\n")),
        "{text}"
    );
    assert!(
        text.contains("svc_start_time_seconds 1700000000.5\n"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn families_without_samples_are_left_out() {
    let text = fresh().render();
    assert!(!text.contains("svc_runs_total"), "{text}");
    assert!(!text.contains("svc_webhook_rejections"), "{text}");
}

#[test]
fn label_values_are_escaped() {
    let m = fresh();
    m.run_finished("job", "we\"ird\\id\nx", &end(false, Duration::ZERO));
    m.http_request("/a\"b", 500);
    let text = m.render();
    assert!(
        text.contains(
            "svc_runs_total{kind=\"job\",job_id=\"we\\\"ird\\\\id\\nx\",result=\"fail\"} 1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("svc_http_requests_total{route=\"/a\\\"b\",status=\"500\"} 1\n"),
        "{text}"
    );
}

#[test]
fn start_time_is_plausible() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64());
    let start = process_start_time();
    assert!(start <= now, "start {start} after now {now}");
    // The test process started recently (allow a slow machine and coarse btime).
    assert!(now - start < 3600.0, "start {start}, now {now}");
}

/// The public facade records into the process-wide registry; the labels are unique to
/// this test because every unit test of the binary shares that registry.
#[test]
fn facade_records_into_the_process_registry() {
    init();
    run_finished(
        "job",
        "unit_test_runs_1",
        &end(true, Duration::from_millis(5)),
    );
    run_finished(
        "job",
        "unit_test_runs_1",
        &end(false, Duration::from_millis(5)),
    );
    http_request("/unit_test/route/{x}", 418);
    webhook_rejected("unit_test_reason");
    timer_fired(Duration::from_millis(1));
    timer_tick_skipped("running");
    let text = render();
    for line in [
        "svc_runs_total{kind=\"job\",job_id=\"unit_test_runs_1\",result=\"success\"} 1\n",
        "svc_runs_total{kind=\"job\",job_id=\"unit_test_runs_1\",result=\"fail\"} 1\n",
        "svc_http_requests_total{route=\"/unit_test/route/{x}\",status=\"418\"} 1\n",
        "svc_webhook_rejections_total{reason=\"unit_test_reason\"} 1\n",
        "svc_start_time_seconds ",
        "svc_run_queue_length ",
        "svc_timer_lateness_seconds_count ",
        "svc_timer_ticks_skipped_total{reason=\"running\"} ",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn a_runs_usage_adds_cpu_seconds_and_sets_the_last_peak() {
    let m = fresh();
    let used = |user_ms, peak| RunRecord {
        usage: Some(Box::new(proto::ResourceUsage {
            cpu_user_ms: user_ms,
            cpu_system_ms: 250,
            peak_memory_bytes: peak,
            io_read_bytes: None,
            io_write_bytes: None,
            measured_by: proto::UsageSource::Rusage,
        })),
        ..end(true, Duration::from_millis(900))
    };
    m.run_finished("job", "a", &used(1500, 1 << 20));
    m.run_finished("job", "a", &used(500, 4096));
    m.run_finished("job", "b", &end(true, Duration::from_millis(5)));
    let text = m.render();
    for line in [
        "# TYPE svc_job_cpu_seconds counter\n",
        "# UNIT svc_job_cpu_seconds seconds\n",
        "svc_job_cpu_seconds_total{kind=\"job\",job_id=\"a\",mode=\"user\"} 2.0\n",
        "svc_job_cpu_seconds_total{kind=\"job\",job_id=\"a\",mode=\"system\"} 0.5\n",
        "svc_job_last_run_peak_memory_bytes{kind=\"job\",job_id=\"a\"} 4096\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // A run without usage (a JobHttp, an older runner) adds no series.
    assert!(!text.contains("job_id=\"b\",mode"), "{text}");
    m.job_removed("job", "a");
    assert!(!m.render().contains("svc_job_cpu_seconds_total{"));
}
