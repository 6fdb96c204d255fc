//! Run history: each run's end is kept with a status that tells success, failure,
//! cancellation, time limit and a controller's death apart, with its exit code or
//! signal, trigger and times; beyond the retention of its log; paged, newest first, by
//! `GET /svc/api/job_exec/runs?id=&limit=&before=`.

use serde_json::Value;
use svc_tests::{TestService, WAIT, job_section};

fn service() -> TestService {
    TestService::builder()
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

/// The runs of `id`'s history page for `query`, newest first.
async fn runs(svc: &TestService, id: &str, query: &str) -> Vec<Value> {
    let answer = svc.runs(id, query).await;
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
    let mut svc = service();
    svc.start().await;

    // Three successes, one log kept: three runs in the history.
    for counter in 1..=3 {
        svc.trigger("/ok", b"", &[("X-GitHub-Delivery", "d-1")])
            .await
            .assert_status(200);
        svc.wait_run_finished("ok", counter, WAIT).await;
    }
    assert_eq!(svc.job_logs("ok").len(), 1, "log_retention = 1");
    let all = runs(&svc, "ok", "").await;
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
    // Pages: the limit, and the runs before a counter.
    assert_eq!(counters(&runs(&svc, "ok", "&limit=1").await), [3]);
    assert_eq!(
        counters(&runs(&svc, "ok", "&limit=5&before=3").await),
        [2, 1]
    );
    assert_eq!(
        counters(&runs(&svc, "OK", "&before=1").await),
        Vec::<u64>::new()
    );
    for bad in ["&limit=0", "&limit=1001", "&limit=x", "&before=-1"] {
        svc.runs("ok", bad).await.assert_status(400);
    }
    svc.runs("nope", "").await.assert_status(404);
    svc.runs("", "").await.assert_status(400);

    // A failure with its exit code, started by hand.
    svc.run_now("bad").await.assert_status(200);
    svc.wait_run_finished("bad", 1, WAIT).await;
    let bad = &runs(&svc, "bad", "").await[0];
    assert_eq!(
        (&bad["status"], &bad["exit_code"], &bad["trigger"]),
        (
            &Value::from("fail"),
            &Value::from(3),
            &Value::from("manual")
        ),
        "{bad}"
    );

    // The time limit: a timeout, the command ended by a signal.
    svc.trigger("/slow", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("slow", 1, WAIT).await;
    let slow = &runs(&svc, "slow", "").await[0];
    assert_eq!(slow["status"], "timeout", "{slow}");
    assert_eq!(slow["exit_code"], Value::Null, "{slow}");
    assert!(slow["signal"].is_u64(), "{slow}");

    // A cancellation.
    svc.trigger("/long", b"", &[]).await.assert_status(200);
    svc.wait_run_started("long", 1, WAIT).await;
    svc.cancel("long").await.assert_status(200);
    let log = svc.wait_run_finished("long", 1, WAIT).await;
    log.assert_status("fail");
    assert_eq!(runs(&svc, "long", "").await[0]["status"], "canceled");

    // The controller killed during a run: interrupted, found at the next start.
    svc.trigger("/long", b"", &[]).await.assert_status(200);
    svc.wait_run_started("long", 2, WAIT).await;
    svc.kill9().await;
    svc.start().await;
    let long = runs(&svc, "long", "").await;
    assert_eq!(counters(&long), [2, 1], "{long:?}");
    assert_eq!(long[0]["status"], "interrupted", "{long:?}");
    // And the history of the others survived the restart.
    assert_eq!(counters(&runs(&svc, "ok", "").await), [3, 2, 1]);
}
