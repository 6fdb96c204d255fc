//! Run history: each run's end is kept with a status that tells success, failure,
//! cancellation, time limit and a controller's death apart, with its exit code or
//! signal, trigger and times; beyond the retention of its log; paged, newest first, by
//! `GET /svc/api/job_exec/runs?id=&limit=&before=`.

use serde_json::Value;
use svc_tests::{TestService, WAIT, fresh_epoch, job_section, wait_for};

/// `hang_port`: where nothing ever answers (a listener that never accepts).
fn service(hang_port: u16) -> TestService {
    TestService::builder()
        // A JobHttp whose call gets 404 from the service itself (a relative URL goes to
        // listen_address), and one whose call never gets an answer.
        .job_http_file(
            "missing",
            "[job.http \"missing\"]\nhttp_url = /svc/api/nothing-here\n",
        )
        .job_http_file(
            "hang",
            format!(
                "[job.http \"hang\"]\nhttp_url = http://127.0.0.1:{hang_port}/\n\
                 http_timeout = 1s\n"
            ),
        )
        .job_file(
            "ok",
            job_section("ok", &["path = /ok", "command = true", "log_retention = 1"]),
        )
        .job_file(
            "bad",
            job_section("bad", &["path = /bad", "command = exit 3"]),
        )
        .job_file(
            "slow",
            job_section(
                "slow",
                &["path = /slow", "command = sleep 30", "timeout = 1s"],
            ),
        )
        .job_file(
            "long",
            job_section("long", &["path = /long", "command = sleep 30"]),
        )
        .build()
}

/// The runs of Job `id`'s history page for `query`, newest first.
async fn runs(svc: &TestService, id: &str, query: &str) -> Vec<Value> {
    runs_of(svc, "job_exec", id, query).await
}

/// The same for a Job (`kind` = `job_exec`) or a JobHttp (`job_http`).
async fn runs_of(svc: &TestService, kind: &str, id: &str, query: &str) -> Vec<Value> {
    let answer = svc.runs(kind, id, query).await;
    answer.assert_status(200);
    answer
        .data()
        .as_array()
        .unwrap_or_else(|| panic!("data is not an array: {:?}", answer.data()))
        .clone()
}

fn counters(runs: &[Value]) -> Vec<u64> {
    runs.iter()
        .filter_map(|run| run["counter"].as_u64())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_end_is_told_apart_and_kept_beyond_its_log() {
    let hang = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let mut svc = service(hang.local_addr().expect("its address").port());
    svc.start().await;

    successes_are_kept_beyond_their_logs_and_paged(&svc).await;
    a_failure_a_timeout_and_a_cancellation_are_told_apart(&svc).await;
    a_run_the_controllers_death_cut_is_interrupted(&mut svc).await;
    a_run_whose_end_the_history_recorded_keeps_it(&mut svc).await;
    job_http_failures_and_timeouts_are_told_apart(&svc).await;
    // Kept listening, never accepting, until here.
    drop(hang);
}

/// Three successes, one log kept: three runs in the history, the newest with its exit
/// code, trigger, attempt and times. Pages: the limit, and the runs before a counter;
/// bad pages are refused, an unknown job is 404.
async fn successes_are_kept_beyond_their_logs_and_paged(svc: &TestService) {
    for counter in 1..=3 {
        svc.trigger("/ok", b"", &[("X-GitHub-Delivery", "d-1")])
            .await
            .assert_status(200);
        svc.wait_run_finished("ok", counter, WAIT).await;
    }
    assert_eq!(svc.job_logs("ok").len(), 1, "log_retention = 1");
    let all = runs(svc, "ok", "").await;
    assert_eq!(counters(&all), [3, 2, 1], "{all:?}");
    let newest = &all[0];
    assert_eq!(newest["status"], "success", "{newest}");
    assert_eq!(newest["exit_code"], 0, "{newest}");
    assert_eq!(newest["trigger"], "webhook", "{newest}");
    assert_eq!(newest["attempt"], 1, "{newest}");
    assert!(newest["duration_ms"].is_u64(), "{newest}");
    let started: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(newest["started_at"].clone()).expect("started_at");
    let ended: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(newest["ended_at"].clone()).expect("ended_at");
    assert!(started <= ended, "{newest}");
    assert_eq!(counters(&runs(svc, "ok", "&limit=1").await), [3]);
    assert_eq!(
        counters(&runs(svc, "ok", "&limit=5&before=3").await),
        [2, 1]
    );
    assert_eq!(
        counters(&runs(svc, "OK", "&before=1").await),
        Vec::<u64>::new()
    );
    for bad in ["&limit=0", "&limit=1001", "&limit=x", "&before=-1"] {
        svc.runs("job_exec", "ok", bad).await.assert_status(400);
    }
    svc.runs("job_exec", "nope", "").await.assert_status(404);
    svc.runs("job_exec", "", "").await.assert_status(400);
    svc.runs("job_http", "ok", "").await.assert_status(404);
}

/// A failure with its exit code, started by hand; the time limit: a timeout, the
/// command ended by a signal; and a cancellation.
async fn a_failure_a_timeout_and_a_cancellation_are_told_apart(svc: &TestService) {
    svc.run_now("bad").await.assert_status(200);
    svc.wait_run_finished("bad", 1, WAIT).await;
    let bad = &runs(svc, "bad", "").await[0];
    assert_eq!(
        (&bad["status"], &bad["exit_code"], &bad["trigger"]),
        (
            &Value::from("fail"),
            &Value::from(3),
            &Value::from("manual")
        ),
        "{bad}"
    );

    svc.trigger("/slow", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("slow", 1, WAIT).await;
    let slow = &runs(svc, "slow", "").await[0];
    assert_eq!(slow["status"], "timeout", "{slow}");
    assert_eq!(slow["exit_code"], Value::Null, "{slow}");
    assert!(slow["signal"].is_u64(), "{slow}");

    svc.trigger("/long", b"", &[]).await.assert_status(200);
    svc.wait_run_started("long", 1, WAIT).await;
    svc.cancel("long").await.assert_status(200);
    let log = svc.wait_run_finished("long", 1, WAIT).await;
    log.assert_status("fail");
    assert_eq!(runs(svc, "long", "").await[0]["status"], "canceled");
}

/// The controller killed during a run: interrupted, found at the next start, and
/// counted in the metrics; the history of the others survived the restart.
async fn a_run_the_controllers_death_cut_is_interrupted(svc: &mut TestService) {
    svc.trigger("/long", b"", &[]).await.assert_status(200);
    svc.wait_run_started("long", 2, WAIT).await;
    svc.kill9().await;
    svc.start().await;
    let long = runs(svc, "long", "").await;
    assert_eq!(counters(&long), [2, 1], "{long:?}");
    assert_eq!(long[0]["status"], "interrupted", "{long:?}");
    assert_eq!(counters(&runs(svc, "ok", "").await), [3, 2, 1]);
    let metrics = svc.get("/svc/api/metrics").await.raw;
    assert!(
        metrics.contains(
            "svc_job_runs_total{kind=\"job\",job_id=\"long\",status=\"interrupted\"} 1\n"
        ),
        "{metrics}"
    );
}

/// Killed after a run's history line was written and before its log got its final name
/// (the line is queued first): the next start finishes the log as the history recorded
/// it (the history, the log and the job's status agree) and keeps the one line, adding no
/// `interrupted` one. After a kill the numbers go on from the newest log, without a gap.
async fn a_run_whose_end_the_history_recorded_keeps_it(svc: &mut TestService) {
    svc.trigger("/long", b"", &[]).await.assert_status(200);
    let third = wait_for(WAIT, "the third run of long started", async || {
        svc.job_logs("long")
            .into_iter()
            .find(|log| log.status == "started")
            .map(|log| log.counter)
    })
    .await;
    assert_eq!(third, 3);
    svc.kill9().await;
    let history = svc.dir_base().join("var/log/svc/history/job/long.jsonl");
    let text = std::fs::read_to_string(&history).expect("the history of long");
    let mut line: Value = serde_json::from_str(text.lines().last().expect("a line")).expect("JSON");
    line["counter"] = third.into();
    line["status"] = "success".into();
    std::fs::write(&history, format!("{text}{line}\n")).expect("add the line");
    svc.start().await;
    let log = svc.wait_run_finished("long", third, WAIT).await;
    assert_eq!(log.status, "success", "{log:?}");
    assert_eq!(svc.job_status("long").await, "success");
    let long = runs(svc, "long", "").await;
    assert_eq!(counters(&long), [third, 2, 1], "one line per run: {long:?}");
    assert_eq!(long[0]["status"], "success", "{long:?}");
    let metrics = svc.get("/svc/api/metrics").await.raw;
    assert!(
        metrics.contains(
            "svc_job_runs_total{kind=\"job\",job_id=\"long\",status=\"interrupted\"} 0\n"
        ),
        "not counted as interrupted after the restart: {metrics}"
    );
}

/// JobHttp runs: a response status that fails the run (404), and a call cut by its time
/// limit (a timeout without a status).
async fn job_http_failures_and_timeouts_are_told_apart(svc: &TestService) {
    for id in ["missing", "hang"] {
        svc.job_http_trigger(&format!("id={id}&_svc_epoch={}", fresh_epoch()))
            .await
            .assert_status(200);
    }
    let missing = wait_for(
        WAIT,
        "the JobHttp run that got 404 in its history",
        async || runs_of(svc, "job_http", "missing", "").await.pop(),
    )
    .await;
    assert_eq!(
        (
            &missing["status"],
            &missing["http_status"],
            &missing["trigger"]
        ),
        (
            &Value::from("fail"),
            &Value::from(404),
            &Value::from("manual")
        ),
        "{missing}"
    );
    let hung = wait_for(
        WAIT,
        "the JobHttp run that timed out in its history",
        async || runs_of(svc, "job_http", "hang", "").await.pop(),
    )
    .await;
    assert_eq!(hung["status"], "timeout", "{hung}");
    assert_eq!(hung["http_status"], Value::Null, "{hung}");
}
