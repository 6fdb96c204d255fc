//! The HTTP API over real HTTP: every endpoint of `interface.md` section 4 (and the
//! legacy and later upstream paths of `decisions.md`) for Jobs, with every status code the
//! decisions give them, always in the `{code, message, data}` wrapper: the Environment,
//! pause, resume, cancel, a Job's log, the trigger, and unknown routes, wrong methods and
//! huge headers. The JobHttp endpoints are `api_job_http.rs`, bodies over the limits
//! `api_limits.rs`.
//!
//! Every test starts its own controller on its own temporary `dir_base`.

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use svc_tests::{TestService, WAIT, fresh_epoch, hmac_sha256_hex, job_section};

use crate::api_common::{get_plain, now, post_form, request, signed_form};

// ----- endpoint 1 ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_is_the_wrapper_keyed_by_name_and_gzip_only_when_asked() {
    let svc = TestService::builder()
        .job_file(
            "jobs",
            [
                job_section("hello world", &["interval = 1h", "command = echo hello"]),
                job_section("deploy", &["path = /deploy", "command = echo deployed"]),
            ]
            .join("\n"),
        )
        .start()
        .await;
    svc.wait_run_finished("hello_world", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_job_status("hello world", "success", WAIT).await;

    let plain = get_plain(&svc, "/svc/api/environment", false).await;
    assert_eq!(
        plain.content_encoding, None,
        "no gzip unless the client asks for it"
    );
    let wrapper = plain.wrapper(200);
    assert_eq!(wrapper["message"], "");
    let env = &wrapper["data"];
    assert!(env["jobs"].is_object(), "jobs is an object: {env}");
    assert!(
        env["http_jobs"].is_object(),
        "http_jobs is an object: {env}"
    );
    let job = &env["jobs"]["hello world"];
    assert_eq!(job["id"], "hello_world", "jobs are keyed by name: {env}");
    assert_eq!(job["name"], "hello world");
    assert_eq!(env["jobs"]["deploy"]["path"], "/deploy");
    assert_eq!(env["listen_address"], svc.listen_address());
    for key in ["name", "dir_base", "dir_public"] {
        assert!(env[key].is_string(), "{key} is a string: {env}");
    }
    assert!(env["http_timeout"].is_u64(), "{env}");
    assert!(env["max_job_running"].is_u64(), "{env}");
    assert!(env["is_development"].is_boolean(), "{env}");
    let logs = job["logs"].as_array().expect("logs is an array");
    assert!(!logs.is_empty(), "run 1 is listed: {job}");
    for log in logs {
        assert_eq!(log["job_id"], "hello_world");
        assert!(
            log.get("content").is_none_or(|c| c.is_null() || c == ""),
            "the Environment carries no log content: {log}"
        );
    }
    let text = String::from_utf8_lossy(&plain.body);
    assert!(
        !text.contains(&svc.secret()),
        "the Environment never contains the secret"
    );

    let gzipped = get_plain(&svc, "/svc/api/environment", true).await;
    assert_eq!(gzipped.status, 200);
    assert_eq!(
        gzipped.content_encoding.as_deref(),
        Some("gzip"),
        "gzip when the client sends Accept-Encoding: gzip"
    );
    assert_eq!(&gzipped.body[..2], &[0x1f, 0x8b], "a gzip stream");
    let decoded = gzipped.wrapper(200);
    assert_eq!(
        decoded["data"]["jobs"], env["jobs"],
        "the gzip body decodes to the same JSON"
    );
    assert_eq!(decoded["data"]["name"], env["name"]);
}

// ----- endpoints 2 and 3 -----------------------------------------------------------------

const PAUSE_PATHS: [&str; 2] = ["/svc/api/job_exec/pause", "/svc/api/job/pause"];
const RESUME_PATHS: [&str; 2] = ["/svc/api/job_exec/resume", "/svc/api/job/resume"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_answer_the_job_on_current_and_legacy_paths() {
    let svc = TestService::builder()
        .job_file(
            "jobs",
            [
                job_section("hello", &["interval = 1h", "command = echo hello"]),
                job_section("hook", &["path = /hook", "command = echo hooked"]),
            ]
            .join("\n"),
        )
        .start()
        .await;
    svc.wait_run_finished("hello", 1, WAIT)
        .await
        .assert_status("success");
    svc.wait_job_status("hello", "success", WAIT).await;

    for (pause, resume) in PAUSE_PATHS.iter().zip(RESUME_PATHS) {
        let paused = signed_form(&svc, pause, "hello", fresh_epoch())
            .await
            .wrapper(200);
        assert_eq!(paused["data"]["id"], "hello", "{pause}: data is the Job");
        assert_eq!(paused["data"]["name"], "hello");
        assert_eq!(paused["data"]["status"], "paused", "{pause}");
        assert!(paused["data"]["logs"].is_array(), "{pause}: {paused}");
        assert_eq!(svc.job_status("hello").await, "paused");

        let resumed = signed_form(&svc, resume, "hello", fresh_epoch())
            .await
            .wrapper(200);
        assert_eq!(resumed["data"]["id"], "hello");
        assert_eq!(
            resumed["data"]["status"], "success",
            "{resume}: the status of the last finished run comes back"
        );
        assert_eq!(svc.job_status("hello").await, "success");

        // A paused webhook job refuses triggers with 412, and takes them after resume.
        signed_form(&svc, pause, "hook", fresh_epoch())
            .await
            .wrapper(200);
        let refused = svc.trigger("/hook", b"{}", &[]).await;
        refused.assert_status(412);
        assert_eq!(refused.name(), "ERR_JOB_PAUSED");
        let resumed = signed_form(&svc, resume, "hook", fresh_epoch())
            .await
            .wrapper(200);
        assert_eq!(
            resumed["data"]["status"], "",
            "a job that never ran has no status after resume: {resumed}"
        );
    }
    svc.trigger("/hook", b"{}", &[]).await.assert_status(200);
    svc.wait_run_finished("hook", 1, WAIT)
        .await
        .assert_status("success");
}

// The refusals of badly signed pause and resume requests are tested in-process:
// svc-controller/src/http/signed_tests.rs.

// ----- cancel ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_a_running_job_and_leaves_an_idle_one_as_it_is() {
    let svc = TestService::builder()
        .job_file(
            "long",
            job_section("long", &["path = /long", "command = sleep 30"]),
        )
        .start()
        .await;
    let path = "/svc/api/job_exec/cancel";

    // As upstream: 200 with the Job, and nothing changes.
    let idle = signed_form(&svc, path, "long", fresh_epoch())
        .await
        .wrapper(200);
    assert_eq!(idle["data"]["id"], "long");
    assert_eq!(idle["data"]["status"], "");
    assert!(svc.job_logs("long").is_empty(), "no run, no log");
    signed_form(&svc, path, "nope", fresh_epoch())
        .await
        .wrapper(404);
    signed_form(&svc, path, "", fresh_epoch())
        .await
        .wrapper(400);

    svc.trigger("/long", b"", &[]).await.assert_status(200);
    svc.wait_run_started("long", 1, WAIT).await;

    let body = format!("_svc_epoch={}&id=long", fresh_epoch());
    post_form(&svc, path, &body, None).await.wrapper(401);
    post_form(&svc, path, &body, Some("00")).await.wrapper(401);
    signed_form(&svc, path, "long", now() - 400)
        .await
        .wrapper(401);
    assert!(
        svc.job_log("long", 1)
            .is_some_and(|l| l.status == "started"),
        "refused cancels leave the run going"
    );

    let started = Instant::now();
    // Upstream's clients send the ID lower-cased; any case finds the job.
    let cancelled = signed_form(&svc, path, "LONG", fresh_epoch())
        .await
        .wrapper(200);
    assert_eq!(cancelled["data"]["id"], "long", "data is the Job");
    let log = svc
        .wait_run_finished("long", 1, Duration::from_secs(10))
        .await;
    let took = started.elapsed();
    log.assert_status("fail");
    assert!(
        took < Duration::from_secs(8),
        "the run ended {took:?} after the cancel (sleep 30 was running)"
    );
    let content = log.content();
    let last = content.lines().last().unwrap_or_default();
    assert!(
        content.to_ascii_lowercase().contains("cancel"),
        "the log says the run was cancelled:\n{content}"
    );
    assert!(
        last.contains("fail"),
        "the log ends with a failed run:\n{content}"
    );
    svc.wait_job_status("long", "failed", WAIT).await;

    let again = signed_form(&svc, path, "long", fresh_epoch())
        .await
        .wrapper(200);
    assert_eq!(
        again["data"]["status"], "failed",
        "the finished run's result stays"
    );
    assert_eq!(svc.job_logs("long").len(), 1);
}

// ----- endpoint 4 ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_log_serves_the_file_in_base64_and_refuses_bad_queries() {
    let svc = TestService::builder()
        .job_file(
            "hello",
            job_section(
                "hello",
                &["interval = 1h", "command = seq 1 200; echo done"],
            ),
        )
        .start()
        .await;
    let file = svc.wait_run_finished("hello", 1, WAIT).await;
    file.assert_status("success");
    let on_disk = std::fs::read(&file.path).expect("read the log file");

    for base in ["/svc/api/job_exec/log", "/svc/api/job/log"] {
        let answer = get_plain(&svc, &format!("{base}?id=hello&counter=1"), false).await;
        assert_eq!(answer.content_encoding, None, "{base}");
        let log = answer.wrapper(200)["data"].clone();
        assert_eq!(log["job_id"], "hello", "{base}: {log}");
        assert_eq!(log["counter"], 1);
        assert_eq!(log["status"], "success");
        assert_eq!(log["name"], "hello.1.success");
        let content = base64::engine::general_purpose::STANDARD
            .decode(log["content"].as_str().expect("content is a string"))
            .expect("content is base64");
        assert_eq!(content, on_disk, "{base}: content is the whole file");

        let gzipped = get_plain(&svc, &format!("{base}?id=hello&counter=1"), true).await;
        assert_eq!(
            gzipped.content_encoding.as_deref(),
            Some("gzip"),
            "{base}: gzip when asked"
        );
        assert_eq!(gzipped.wrapper(200)["data"], log);

        for (query, status, message) in [
            ("id=hello", 400, "missing log counter"),
            ("id=hello&counter=", 400, "invalid log counter"),
            ("id=hello&counter=x", 400, "invalid log counter"),
            ("id=hello&counter=-1", 400, "invalid log counter"),
            ("id=hello&counter=1.0", 400, "invalid log counter"),
            ("id=&counter=1", 400, "empty job id"),
            ("counter=1", 400, "empty job id"),
            ("id=a%2Fb&counter=1", 400, "invalid job id"),
            ("id=nope&counter=1", 404, "job not found"),
            ("id=HELLO&counter=999", 404, "log not found"),
            ("id=hello&counter=0", 404, "log not found"),
        ] {
            let answer = get_plain(&svc, &format!("{base}?{query}"), false).await;
            let wrapper = answer.wrapper(status);
            assert_eq!(wrapper["message"], message, "{base}?{query}");
            assert_eq!(wrapper["data"], Value::Null);
        }
        get_plain(&svc, base, false).await.wrapper(400);
    }
}

// ----- endpoint 9 ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_answers_on_all_three_paths() {
    let svc = TestService::builder()
        .job_file(
            "deploy",
            job_section(
                "deploy",
                &["path = /deploy", r#"command = cat "$SVC_REQUEST_BODY""#],
            ),
        )
        .start()
        .await;
    let secret = svc.secret();
    let prefixes = ["/svc/api/job/run", "/svc/api/job_exec/run", "/svc/job"];
    for (index, prefix) in prefixes.iter().enumerate() {
        let counter = index as u64 + 1;
        let body = format!("{{\"n\":{counter}}}");
        let signature = hmac_sha256_hex(&secret, &body);
        let answer = request(
            &svc,
            "POST",
            &format!("{prefix}/deploy"),
            &[("X-Svc-Sign", &signature)],
            body.clone(),
        )
        .await
        .wrapper(200);
        assert_eq!(answer["data"]["id"], "deploy", "{prefix}: data is the Job");
        assert_eq!(answer["data"]["path"], "/deploy");
        let log = svc.wait_run_finished("deploy", counter, WAIT).await;
        log.assert_status("success");
        assert!(log.content().contains(&body), "{prefix}: {}", log.content());

        let unsigned = request(&svc, "POST", &format!("{prefix}/deploy"), &[], body.clone()).await;
        unsigned.wrapper(401);
        let unknown = request(
            &svc,
            "POST",
            &format!("{prefix}/nowhere"),
            &[("X-Svc-Sign", &signature)],
            body.clone(),
        )
        .await
        .wrapper(404);
        assert_eq!(unknown["message"], "no job has this path");
    }
    // Nothing ran for the refused requests.
    assert_eq!(svc.job_logs("deploy").len(), 3);
}

// ----- unknown routes, methods, headers -------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_wrong_methods_and_huge_headers_are_wrapped() {
    let svc = TestService::builder()
        .job_file(
            "deploy",
            job_section("deploy", &["path = /deploy", "command = true"]),
        )
        .start()
        .await;

    for path in [
        "/svc/api/nothing-here",
        "/svc/api/job_exec",
        "/svc/api/job_http/nothing",
        "/svc/api/environment/x",
        "/svc/api/",
    ] {
        let wrapper = get_plain(&svc, path, false).await.wrapper(404);
        assert_eq!(wrapper["message"], "no such resource", "{path}");
        assert_eq!(wrapper["data"], Value::Null);
    }
    let body = b"{}";
    let signature = hmac_sha256_hex(svc.secret(), body);
    for path in [
        "/svc/api/job/run/nowhere",
        "/svc/api/job_exec/run/deploy/more",
        "/svc/job/nowhere",
    ] {
        let wrapper = request(
            &svc,
            "POST",
            path,
            &[("X-Svc-Sign", &signature)],
            body.to_vec(),
        )
        .await
        .wrapper(404);
        assert_eq!(wrapper["message"], "no job has this path", "{path}");
    }

    for (method, path) in [
        ("DELETE", "/svc/api/environment"),
        ("POST", "/svc/api/environment"),
        ("PUT", "/svc/api/environment"),
        ("GET", "/svc/api/job_exec/pause"),
        ("GET", "/svc/api/job_exec/resume"),
        ("GET", "/svc/api/job/pause"),
        ("GET", "/svc/api/job_exec/cancel"),
        ("POST", "/svc/api/job_exec/log"),
        ("DELETE", "/svc/api/job_http"),
        ("GET", "/svc/api/job_http/pause"),
        ("GET", "/svc/api/job/run/deploy"),
        ("PUT", "/svc/api/job_exec/run/deploy"),
        ("GET", "/svc/job/deploy"),
    ] {
        let wrapper = request(&svc, method, path, &[], Vec::new())
            .await
            .wrapper(405);
        assert_eq!(wrapper["message"], "method not allowed", "{method} {path}");
    }

    // 100 KiB of headers, over the 64 KiB the router takes and under what hyper buffers,
    // both as 10 large headers and as 100 small ones (hyper's default line limit is 100,
    // which would answer a bare 431 before the router could wrap it).
    for (count, size) in [(10, 10 * 1024), (100, 1024)] {
        let value = "v".repeat(size);
        let names: Vec<String> = (0..count).map(|i| format!("x-filler-{i}")).collect();
        let headers: Vec<(&str, &str)> = names
            .iter()
            .map(|name| (name.as_str(), value.as_str()))
            .collect();
        for path in ["/svc/api/environment", "/svc/api/job_exec/pause"] {
            let method = if path.ends_with("pause") {
                "POST"
            } else {
                "GET"
            };
            let wrapper = request(&svc, method, path, &headers, Vec::new())
                .await
                .wrapper(431);
            assert_eq!(
                wrapper["message"], "request headers too large",
                "{path} with {count} headers"
            );
        }
    }
    // The service still answers normally.
    get_plain(&svc, "/svc/api/environment", false)
        .await
        .wrapper(200);
}
