//! One spend store for everything signed: a captured pause, resume, cancel, run-now,
//! reload or JobHttp pause/resume cannot be sent again, on any route, the webhook route
//! included, nor can a webhook's signature serve as a control request; code hosts'
//! deliveries are one-time by their body too, and `hmac-sha256` ones when the job says
//! so. Epochs are enforced where they are sent, and `require_epoch` refuses requests
//! without one.

use svc_tests::{TestService, WAIT, fresh_epoch, hmac_sha256_hex, job_section};

const FORM: (&str, &str) = ("content-type", "application/x-www-form-urlencoded");
/// The answer to a signature spent before.
const REPLAY: &str = "replay: this signature was already used (a signed request is one-time)";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A service with a webhook job `shared` that has no secret of its own (it falls back to
/// the main one) and a JobHttp `ping` that never fires on its own.
async fn start(extra_main: &str) -> TestService {
    let mut builder = TestService::builder();
    if !extra_main.is_empty() {
        builder = builder.svc(extra_main);
    }
    builder
        .job_file(
            "shared",
            job_section("shared", &["path = /shared", "command = echo ran"]),
        )
        .job_http_file(
            "ping",
            "[job.http \"ping\"]\ninterval = 24h\nhttp_url = http://127.0.0.1:9/\n",
        )
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_control_request_works_once() {
    let mut svc = start("").await;
    let body = format!("_svc_epoch={}&id=shared", fresh_epoch());
    let signature = hmac_sha256_hex(svc.secret(), &body);
    let headers = [FORM, ("X-Svc-Sign", signature.as_str())];
    svc.post("/svc/api/job_exec/pause", body.as_bytes(), &headers)
        .await
        .assert_status(200);
    // The same request again, on its path and on the legacy one: a replay.
    for path in ["/svc/api/job_exec/pause", "/svc/api/job/pause"] {
        let again = svc.post(path, body.as_bytes(), &headers).await;
        again.assert_status(401);
        assert_eq!(again.message(), REPLAY, "{path}");
    }
    // The signature as a webhook body of the job that falls back to the main secret.
    let as_webhook = svc
        .trigger_unsigned("/shared", body.as_bytes(), &[("X-Svc-Sign", &signature)])
        .await;
    as_webhook.assert_status(401);
    assert_eq!(as_webhook.message(), REPLAY);
    // Upper-case hex is the same signature.
    let upper = signature.to_uppercase();
    svc.post(
        "/svc/api/job_exec/pause",
        body.as_bytes(),
        &[FORM, ("X-Svc-Sign", upper.as_str())],
    )
    .await
    .assert_status(401);
    // Remembered across a restart.
    svc.restart().await;
    svc.post("/svc/api/job_exec/pause", body.as_bytes(), &headers)
        .await
        .assert_status(401);
    // The review's replay across routes: the captured pause sent to resume, run now,
    // cancel and reload is refused on each (one request, whatever it asks).
    for path in [
        "/svc/api/job_exec/resume",
        "/svc/api/job_exec/trigger",
        "/svc/api/job_exec/cancel",
        "/svc/api/reload",
    ] {
        let again = svc.post(path, body.as_bytes(), &headers).await;
        again.assert_status(401);
        assert_eq!(again.message(), REPLAY, "{path}");
    }
    // A client that resumes within the same second adds a field of its own.
    let resume = format!("{body}&_svc_nonce=2");
    let signature = hmac_sha256_hex(svc.secret(), &resume);
    svc.post(
        "/svc/api/job_exec/resume",
        resume.as_bytes(),
        &[FORM, ("X-Svc-Sign", signature.as_str())],
    )
    .await
    .assert_status(200);
    assert!(svc.job_logs("shared").is_empty(), "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_signature_is_no_control_request() {
    // The review's finding: a delivery to a job without a secret of its own, whose JSON
    // holds `&id=X&_svc_epoch=<now>&` (in a commit message), was also a valid signed
    // pause of job X.
    let svc = start("").await;
    let body = format!(
        r#"{{"head_commit":{{"message":"fix &id=shared&_svc_epoch={}& done"}}}}"#,
        fresh_epoch()
    );
    let signature = hmac_sha256_hex(svc.secret(), &body);
    svc.trigger_unsigned("/shared", body.as_bytes(), &[("X-Svc-Sign", &signature)])
        .await
        .assert_status(200);
    svc.wait_run_finished("shared", 1, WAIT).await;
    let sha = format!("sha256={signature}");
    for path in ["/svc/api/job_exec/pause", "/svc/api/job_exec/cancel"] {
        let as_control = svc
            .post(path, body.as_bytes(), &[FORM, ("X-Svc-Sign", sha.as_str())])
            .await;
        as_control.assert_status(401);
        assert_eq!(as_control.message(), REPLAY, "{path}");
    }
    assert_ne!(svc.job_status("shared").await, "paused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hmac_deliveries_repeat_unless_the_job_makes_them_one_time() {
    let svc = TestService::builder()
        .job_file(
            "again",
            job_section("again", &["path = /again", "secret = s1", "command = true"]),
        )
        .job_file(
            "once",
            job_section(
                "once",
                &[
                    "path = /once",
                    "secret = s2",
                    "one_time_deliveries = true",
                    "command = true",
                ],
            ),
        )
        .start()
        .await;
    // The review's finding: the same body and signature ran three times.
    for counter in 1..=3 {
        svc.trigger_with_secret("/again", b"{\"n\":1}", "s1")
            .await
            .assert_status(200);
        svc.wait_run_finished("again", counter, WAIT).await;
    }
    svc.trigger_with_secret("/once", b"{\"n\":1}", "s2")
        .await
        .assert_status(200);
    svc.wait_run_finished("once", 1, WAIT).await;
    let replay = svc.trigger_with_secret("/once", b"{\"n\":1}", "s2").await;
    replay.assert_status(401);
    assert_eq!(replay.message(), REPLAY);
    svc.trigger_with_secret("/once", b"{\"n\":2}", "s2")
        .await
        .assert_status(200);
    svc.wait_run_finished("once", 2, WAIT).await;
    assert_eq!(svc.job_logs("once").len(), 2);
    // --check names the job that accepts repeats, and not the other.
    let check = svc.check().await;
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(
        out.contains("job again: hmac-sha256 deliveries may repeat"),
        "{out}"
    );
    assert!(!out.contains("job once:"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_with_an_epoch_is_one_time_and_bounded() {
    let svc = start("").await;
    let run_now =
        |epoch: i64| format!(r#"{{"source":"svc-ui","id":"shared","_svc_epoch":{epoch}}}"#);
    let first = svc
        .trigger_with_secret("/shared", run_now(fresh_epoch()).as_bytes(), &svc.secret())
        .await;
    first.assert_status(200);
    svc.wait_run_finished("shared", 1, WAIT).await;
    let stale = svc
        .trigger_with_secret("/shared", run_now(now() - 400).as_bytes(), &svc.secret())
        .await;
    stale.assert_status(401);
    let body = run_now(fresh_epoch());
    svc.trigger_with_secret("/shared", body.as_bytes(), &svc.secret())
        .await
        .assert_status(200);
    svc.wait_run_finished("shared", 2, WAIT).await;
    let replay = svc
        .trigger_with_secret("/shared", body.as_bytes(), &svc.secret())
        .await;
    replay.assert_status(401);
    assert_eq!(replay.message(), REPLAY);
    // A webhook body without an epoch (what code hosts send) may repeat.
    for counter in 3..=4 {
        svc.trigger_with_secret("/shared", b"{\"ref\":\"main\"}", &svc.secret())
            .await
            .assert_status(200);
        svc.wait_run_finished("shared", counter, WAIT).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_http_pause_checks_its_epoch_and_is_one_time_with_one() {
    let svc = start("").await;
    let signed = |query: &str| (query.to_owned(), hmac_sha256_hex(svc.secret(), query));
    let post = async |path: &str, (query, signature): (String, String)| {
        svc.post(
            &format!("{path}?{query}"),
            b"",
            &[("X-Svc-Sign", signature.as_str())],
        )
        .await
    };
    let stale = signed(&format!("id=ping&_svc_epoch={}", now() - 400));
    post("/svc/api/job_http/pause", stale)
        .await
        .assert_status(401);
    let fresh = signed(&format!("id=ping&_svc_epoch={}", fresh_epoch()));
    post("/svc/api/job_http/pause", fresh.clone())
        .await
        .assert_status(200);
    let replay = post("/svc/api/job_http/pause", fresh).await;
    replay.assert_status(401);
    assert_eq!(replay.message(), REPLAY);
    // Upstream clients send no epoch: accepted (require_epoch is off by default).
    post("/svc/api/job_http/resume", signed("id=ping"))
        .await
        .assert_status(200);
    post("/svc/api/job_http/resume", signed("id=ping"))
        .await
        .assert_status(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_epoch_refuses_job_http_control_without_one() {
    let svc = start("require_epoch = true").await;
    let query = "id=ping";
    let signature = hmac_sha256_hex(svc.secret(), query);
    let refused = svc
        .post(
            &format!("/svc/api/job_http/pause?{query}"),
            b"",
            &[("X-Svc-Sign", signature.as_str())],
        )
        .await;
    refused.assert_status(401);
    assert!(refused.message().contains("_svc_epoch"), "{}", refused.raw);
    let query = format!("id=ping&_svc_epoch={}", fresh_epoch());
    let signature = hmac_sha256_hex(svc.secret(), &query);
    svc.post(
        &format!("/svc/api/job_http/pause?{query}"),
        b"",
        &[("X-Svc-Sign", signature.as_str())],
    )
    .await
    .assert_status(200);
}
