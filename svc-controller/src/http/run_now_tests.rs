//! Run now names the run it started (`run_counter`), so that the web UI follows that
//! run's log and not a guess; a trigger that only queued adds no number.

use super::app_testkit::{TestApp, fresh_epoch};
use crate::engine::testkit::settle;

const TRIGGER: &str = "/svc/api/job_exec/trigger";

fn app() -> TestApp {
    TestApp::new(
        "",
        "[job \"hello\"]\npath = /hello\ncommand = echo hello\n\n[job \"solo\"]\npath = /solo\ncommand = sleep 1\n",
    )
}

#[tokio::test]
async fn run_now_answers_the_number_of_the_run_it_started() {
    let mut app = app();
    for expected in 1..=2 {
        let answer = app.signed_form(TRIGGER, "hello", fresh_epoch()).await;
        let job = &answer.wrapper(200)["data"];
        assert_eq!(job["id"], "hello");
        assert_eq!(job["run_counter"], expected, "{job}");
        let run = app.harness.runs.next().await;
        assert_eq!(run.id(), ("hello", expected));
        run.finish(true, "exit 0");
        settle().await;
    }
    // The ID in another case names the same job, and its run.
    let answer = app.signed_form(TRIGGER, "HELLO", fresh_epoch()).await;
    assert_eq!(answer.wrapper(200)["data"]["run_counter"], 3);
    app.harness.runs.next().await.finish(true, "exit 0");
}

#[tokio::test]
async fn a_run_now_that_waits_behind_a_run_names_none_and_the_next_start_is_its_own() {
    let mut app = app();
    // A run begun by another trigger since the page last looked: Run now queues behind
    // it and names no run (the page must not follow the running one as its own).
    app.harness.trigger_api("solo").await.expect("accepted");
    let running = app.harness.runs.next().await;
    assert_eq!(running.id(), ("solo", 1));
    let answer = app.signed_form(TRIGGER, "solo", fresh_epoch()).await;
    let job = &answer.wrapper(200)["data"];
    assert!(job.get("run_counter").is_none(), "{job}");
    running.finish(true, "exit 0");
    settle().await;
    let queued = app.harness.runs.next().await;
    assert_eq!(queued.id(), ("solo", 2));
    queued.finish(true, "exit 0");
}
