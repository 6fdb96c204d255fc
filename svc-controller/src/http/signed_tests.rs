//! Signed control requests (pause and resume, current and legacy paths) refused for
//! every fault of their signature, epoch or job ID, through the router in-process.

use super::app_testkit::{Answer, TestApp, fresh_epoch, sign, sign_with};
use crate::engine::read::JobStatus;

const PAUSE_PATHS: [&str; 2] = ["/svc/api/job_exec/pause", "/svc/api/job/pause"];
const RESUME_PATHS: [&str; 2] = ["/svc/api/job_exec/resume", "/svc/api/job/resume"];

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn hello() -> TestApp {
    TestApp::new("", "[job \"hello\"]\ninterval = 1h\ncommand = echo hello\n")
}

/// Every way the signature can be wrong is 401, and the answer never shows the expected
/// signature.
async fn bad_signatures_are_refused(app: &TestApp, path: &str) {
    let body = format!("_svc_epoch={}&id=hello", fresh_epoch());
    let expected = sign(&body);
    let missing = app.post_form(path, &body, None).await;
    missing.wrapper(401);
    let wrong = app
        .post_form(path, &body, Some(&sign_with("not the secret", &body)))
        .await;
    wrong.wrapper(401);
    for answer in [&missing, &wrong] {
        assert!(
            !answer.text().contains(&expected),
            "{path}: an error never echoes the expected signature"
        );
    }
    // Signed for another body.
    let other = sign(&format!("{body}&x=1"));
    app.post_form(path, &body, Some(&other)).await.wrapper(401);
}

/// An epoch too old, in the future or missing is 401 with a reason.
async fn bad_epochs_are_refused(app: &TestApp, path: &str) {
    for (epoch, what) in [(now() - 400, "old"), (now() + 400, "future")] {
        let wrapper = app.signed_form(path, "hello", epoch).await.wrapper(401);
        assert!(
            !wrapper["message"].as_str().unwrap_or_default().is_empty(),
            "{path}: an {what} epoch is refused with a reason"
        );
    }
    let body = "id=hello";
    app.post_form(path, body, Some(&sign(body)))
        .await
        .wrapper(401);
}

/// A missing, malformed or unknown ID is 400 or 404, with upstream's error names.
async fn bad_ids_are_refused(app: &TestApp, path: &str) {
    app.signed_form(path, "", fresh_epoch()).await.wrapper(400);
    let body = format!("_svc_epoch={}", fresh_epoch());
    app.post_form(path, &body, Some(&sign(&body)))
        .await
        .wrapper(400);
    for malformed in ["a%2Fb", "a/b", "..", "a%20b", "%C3%A9"] {
        app.signed_form(path, malformed, fresh_epoch())
            .await
            .wrapper(400);
    }
    let unknown: Answer = app.signed_form(path, "nope", fresh_epoch()).await;
    let unknown = unknown.wrapper(404);
    assert_eq!(unknown["message"], "job not found");
    assert_eq!(unknown["name"], "ERR_JOB_NOT_FOUND");
    let invalid = app
        .signed_form(path, "a/b", fresh_epoch())
        .await
        .wrapper(400);
    assert_eq!(invalid["name"], "ERR_INVALID_JOB_ID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_refuse_bad_signatures_stale_epochs_and_bad_ids() {
    let app = hello();
    for path in PAUSE_PATHS.iter().chain(RESUME_PATHS.iter()) {
        bad_signatures_are_refused(&app, path).await;
        bad_epochs_are_refused(&app, path).await;
        bad_ids_are_refused(&app, path).await;
    }
    // Nothing of that paused the job.
    assert_ne!(app.harness.status("hello"), JobStatus::Paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correctly_signed_pause_and_resume_answer_the_job() {
    let app = hello();
    for (pause, resume) in PAUSE_PATHS.iter().zip(RESUME_PATHS) {
        let paused = app
            .signed_form(pause, "hello", fresh_epoch())
            .await
            .wrapper(200);
        assert_eq!(paused["data"]["id"], "hello", "{pause}: data is the Job");
        assert_eq!(paused["data"]["status"], "paused", "{pause}");
        assert!(paused["data"]["logs"].is_array(), "{pause}: {paused}");
        assert_eq!(app.harness.status("hello"), JobStatus::Paused);
        let resumed = app
            .signed_form(resume, "hello", fresh_epoch())
            .await
            .wrapper(200);
        assert_eq!(
            resumed["data"]["status"], "",
            "{resume}: a job that never ran has no status after resume: {resumed}"
        );
        assert_eq!(app.harness.status("hello"), JobStatus::Never);
    }
    // The same signed body again is spent (one-time across routes).
    let body = format!("_svc_epoch={}&id=hello", fresh_epoch());
    let signature = sign(&body);
    app.post_form(PAUSE_PATHS[0], &body, Some(&signature))
        .await
        .wrapper(200);
    app.post_form(RESUME_PATHS[0], &body, Some(&signature))
        .await
        .wrapper(401);
}
