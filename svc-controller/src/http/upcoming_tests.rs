//! `GET /svc/api/upcoming`: the coming slots of every job with a schedule, in the job's
//! zone, bounded per job and in time; interval and paused jobs are not listed.

use serde_json::Value;

use super::app_testkit::TestApp;
use super::upcoming::MAX_SLOTS;
use crate::engine::Kind;

/// The harness's clock stands at Monday 5 January 2026, 10:00 UTC; its timers are not
/// started, so each schedule's first slot is its next after that.
fn app() -> TestApp {
    TestApp::new(
        "",
        "[job \"nightly\"]\nschedule = 30 2 * * *\ncommand = true\n\n\
         [job \"often\"]\nschedule = */10 * * * *\ncommand = true\n\n\
         [job \"morning\"]\nschedule = 0 3 * * *\ntimezone = America/New_York\ncommand = true\n\n\
         [job \"held\"]\nschedule = 0 * * * *\ncommand = true\n\n\
         [job \"tick\"]\ninterval = 1h\ncommand = true\n\n\
         [job.http \"ping\"]\nschedule = 0 */6 * * *\nhttp_url = http://127.0.0.1:9/\n",
    )
}

/// The listed jobs as (kind, id, slots, more).
fn listed(data: &Value) -> Vec<(String, String, Vec<String>, bool)> {
    data["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| {
            let slots = job["slots"].as_array().expect("slots");
            (
                job["kind"].as_str().unwrap_or_default().to_owned(),
                job["id"].as_str().unwrap_or_default().to_owned(),
                slots
                    .iter()
                    .map(|s| s.as_str().unwrap_or_default().to_owned())
                    .collect(),
                job["more"].as_bool().expect("more"),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_next_day_of_each_schedule_bounded_per_job() {
    let app = app();
    app.harness
        .engine
        .pause(Kind::Job, "held")
        .expect("pause held");
    let answer = app.get("/svc/api/upcoming").send().await;
    let data = answer.wrapper(200)["data"].clone();
    assert_eq!(data["from"], "2026-01-05T10:00:00Z");
    assert_eq!(data["until"], "2026-01-06T10:00:00Z");
    assert_eq!(data["truncated"], false);
    let jobs = listed(&data);
    let ids: Vec<(&str, &str)> = jobs.iter().map(|j| (j.0.as_str(), j.1.as_str())).collect();
    // By kind then ID; the interval job and the paused one are not there.
    assert_eq!(
        ids,
        [
            ("job", "morning"),
            ("job", "nightly"),
            ("job", "often"),
            ("job_http", "ping")
        ]
    );
    // 03:00 in New York in January is 08:00 UTC.
    assert_eq!(jobs[0].2, ["2026-01-06T08:00:00Z"]);
    assert!(!jobs[0].3);
    assert_eq!(jobs[1].2, ["2026-01-06T02:30:00Z"]);
    // Every ten minutes is 144 slots a day: the first 48, and `more`.
    let often = &jobs[2];
    assert_eq!(often.2.len(), MAX_SLOTS);
    assert_eq!(often.2[0], "2026-01-05T10:10:00Z");
    assert_eq!(often.2[MAX_SLOTS - 1], "2026-01-05T18:00:00Z");
    assert!(often.3);
    assert_eq!(
        jobs[3].2,
        [
            "2026-01-05T12:00:00Z",
            "2026-01-05T18:00:00Z",
            "2026-01-06T00:00:00Z",
            "2026-01-06T06:00:00Z"
        ]
    );
}

#[tokio::test]
async fn a_shorter_window_and_bad_hours() {
    let app = app();
    let answer = app.get("/svc/api/upcoming?hours=3").send().await;
    let data = answer.wrapper(200)["data"].clone();
    assert_eq!(data["until"], "2026-01-05T13:00:00Z");
    let jobs = listed(&data);
    let ping = jobs.iter().find(|j| j.1 == "ping").expect("ping");
    assert_eq!(ping.2, ["2026-01-05T12:00:00Z"]);
    // Listed, with nothing in the window.
    let nightly = jobs.iter().find(|j| j.1 == "nightly").expect("nightly");
    assert!(nightly.2.is_empty() && !nightly.3);
    let often = jobs.iter().find(|j| j.1 == "often").expect("often");
    assert_eq!(often.2.len(), 18);
    for bad in ["0", "25", "x", "-1"] {
        app.get(&format!("/svc/api/upcoming?hours={bad}"))
            .send()
            .await
            .expect_message(400, "hours must be a number from 1 to 24");
    }
}
