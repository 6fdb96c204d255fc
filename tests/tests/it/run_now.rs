//! Run now for every job: `POST /svc/api/job_exec/trigger` (signed like pause) for a Job
//! with or without a trigger path, `POST /svc/api/job_http/trigger` for a JobHttp with
//! or without a timer, their refusals, and the first line of each run's log, which says
//! who or what started it.

use svc_tests::{TestService, WAIT, fresh_epoch, hmac_sha256_hex, job_section};

fn service() -> svc_tests::TestServiceBuilder {
    TestService::builder()
        .job_file(
            "nightly",
            job_section(
                "nightly",
                &["schedule = 0 3 * * *", "command = echo nightly"],
            ),
        )
        .job_file(
            "hook",
            job_section(
                "hook",
                &["path = /hook", "secret = hook-secret", "command = true"],
            ),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_job_runs_now_and_its_log_says_by_whom() {
    let svc = service().start().await;
    // A timer-only job (no path) runs by hand, by its ID in any case.
    let answer = svc.run_now("NIGHTLY").await;
    answer.assert_status(200);
    assert_eq!(answer.data()["id"], "nightly");
    let log = svc.wait_run_finished("nightly", 1, WAIT).await;
    log.assert_status("success");
    let first = log.first_line();
    assert!(
        first.ends_with("=== run 1 of job nightly started by hand (run now, a signed request)"),
        "{first}"
    );
    // A webhook's run names its event and delivery.
    let body = b"{}";
    let signature = hmac_sha256_hex("hook-secret", body);
    svc.trigger(
        "/hook",
        body,
        &[
            ("x-svc-sign", signature.as_str()),
            ("X-Webhook-Event", "deploy"),
        ],
    )
    .await
    .assert_status(200);
    let hook = svc.wait_run_finished("hook", 1, WAIT).await;
    let first = hook.first_line();
    assert!(
        first.ends_with("started by webhook (event deploy)"),
        "{first}"
    );

    // Refusals: unknown (404), paused (412), a replayed signature (401).
    svc.run_now("nope").await.assert_status(404);
    svc.pause("nightly").await.assert_status(200);
    let paused = svc.run_now("nightly").await;
    paused.assert_status(412);
    assert_eq!(paused.name(), "ERR_JOB_PAUSED");
    svc.resume("nightly").await.assert_status(200);
    let (body, signature) = svc.job_exec_form("nightly");
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("X-Svc-Sign", signature.as_str()),
    ];
    svc.post("/svc/api/job_exec/trigger", body.as_bytes(), &headers)
        .await
        .assert_status(200);
    let again = svc
        .post("/svc/api/job_exec/trigger", body.as_bytes(), &headers)
        .await;
    again.assert_status(401);
    svc.wait_run_finished("nightly", 2, WAIT).await;
    assert_eq!(
        svc.job_logs("nightly").len(),
        2,
        "the replay started nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_job_http_runs_now() {
    let mut svc = service().build();
    // A JobHttp with no timer (upstream allows it): it runs only when started by hand.
    let ping = "[job.http \"ping\"]\nhttp_url = /svc/api/environment\n";
    std::fs::write(svc.dir_base().join("etc/svc/job_http.d/ping.conf"), ping)
        .expect("write job_http.d/ping.conf");
    svc.start().await;
    assert!(
        svc.log_files("job_http", "ping").is_empty(),
        "no timer: no run"
    );

    let answer = svc
        .job_http_trigger(&format!("id=ping&_svc_epoch={}", fresh_epoch()))
        .await;
    answer.assert_status(200);
    assert_eq!(answer.data()["id"], "ping");
    svc_tests::wait_until(WAIT, "the JobHttp call ran", async || {
        svc.log_files("job_http", "ping")
            .iter()
            .any(|f| f.status == "success")
    })
    .await;

    // The epoch is required, the ID must exist (400, as on the other JobHttp endpoints).
    svc.job_http_trigger("id=ping").await.assert_status(401);
    let unknown = svc
        .job_http_trigger(&format!("id=nope&_svc_epoch={}", fresh_epoch()))
        .await;
    unknown.assert_status(400);
    assert_eq!(unknown.name(), "ERR_INVALID_JOB_ID");
    let unsigned = svc
        .post(
            &format!(
                "/svc/api/job_http/trigger?id=ping&_svc_epoch={}",
                fresh_epoch()
            ),
            b"",
            &[("X-Svc-Sign", "00")],
        )
        .await;
    unsigned.assert_status(401);
}

/// `on_success` and `on_failure` start other jobs when a run ends; each chained run's log
/// says which run started it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chains_start_the_next_jobs_by_the_result() {
    let svc = TestService::builder()
        .job_file(
            "build",
            job_section(
                "build",
                &[
                    "path = /build",
                    "secret = s",
                    // Fails when the flag file exists.
                    "command = [ ! -e fail-now ]",
                    "on_success = Deploy",
                    "on_failure = alert",
                ],
            ),
        )
        .job_file(
            "deploy",
            job_section("Deploy", &["path = /deploy", "command = echo deployed"]),
        )
        .job_file(
            "alert",
            job_section("alert", &["path = /alert", "command = echo alerted"]),
        )
        .start()
        .await;
    svc.run_now("build").await.assert_status(200);
    svc.wait_run_finished("build", 1, WAIT)
        .await
        .assert_status("success");
    let deploy = svc.wait_run_finished("Deploy", 1, WAIT).await;
    deploy.assert_status("success");
    let first = deploy.first_line();
    assert!(
        first.ends_with("started by chain, after run 1 of job build, success"),
        "{first}"
    );
    assert!(svc.job_logs("alert").is_empty(), "no failure, no alert");

    std::fs::write(svc.dir_work("build").join("fail-now"), "").expect("write the flag");
    svc.run_now("build").await.assert_status(200);
    svc.wait_run_finished("build", 2, WAIT)
        .await
        .assert_status("fail");
    let alert = svc.wait_run_finished("alert", 1, WAIT).await;
    alert.assert_status("success");
    assert!(
        alert
            .first_line()
            .ends_with("after run 2 of job build, fail"),
        "{}",
        alert.content()
    );
    assert_eq!(
        svc.job_logs("Deploy").len(),
        1,
        "deploy ran once, after the success only"
    );
}

/// `on_busy = skip`: a trigger that finds the job running is answered 200, saying it was
/// skipped, and starts nothing later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_job_with_on_busy_skip_answers_skipped() {
    let svc = TestService::builder()
        .job_file(
            "slow",
            job_section(
                "slow",
                &["path = /slow", "on_busy = skip", "command = sleep 2.5"],
            ),
        )
        .start()
        .await;
    svc.run_now("slow").await.assert_status(200);
    svc.wait_run_started("slow", 1, WAIT).await;
    let skipped = svc.run_now("slow").await;
    skipped.assert_status(200);
    assert_eq!(skipped.data()["skipped"], true, "{}", skipped.raw);
    assert!(
        skipped.message().contains("on_busy = skip"),
        "{}",
        skipped.raw
    );
    svc.wait_run_finished("slow", 1, WAIT).await;
    svc.run_now("slow").await.assert_status(200);
    svc.wait_run_finished("slow", 2, WAIT).await;
    assert_eq!(
        svc.job_logs("slow").len(),
        2,
        "the skipped trigger left nothing queued"
    );
}
