//! No secret ever leaves the service: a configuration full of secrets, passwords and
//! sensitive headers, run for real, and then every answer that shows jobs and the
//! controller's own log output are searched for each secret value.

use svc_tests::{TestService, WAIT, job_section, wait_until};

/// Every sensitive value the configuration below holds. None may appear anywhere.
const SECRETS: &[&str] = &[
    "main-secret-value-7f3a",
    "job-secret-value-91bc",
    "http-secret-value-42de",
    "bearer-token-value-5e6f",
    "cookie-value-8a9b",
    "api-key-value-0c1d",
    "x-token-value-2e3f",
    "client-secret-value-4a5b",
    "url-password-value-6c7d",
    "query-token-value-8e9f",
];

/// Stands for the listen address in the JobHttp text until the service runs.
const LISTEN_PLACEHOLDER: &str = "LISTEN-ADDRESS-PLACEHOLDER";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_and_no_log_line_contains_a_secret() {
    let mut builder = TestService::builder().svc(format!("secret = {}", SECRETS[0]));
    builder = builder.job_file(
        "hook",
        job_section(
            "hook",
            &[
                "path = /hook",
                &format!("secret = {}", SECRETS[1]),
                "command = echo hook ran",
            ],
        ),
    );
    let listen = LISTEN_PLACEHOLDER.to_string();
    let http_job = format!(
        "[job.http \"caller\"]\n\
         interval = 1s\n\
         http_method = POST\n\
         http_request_type = json\n\
         http_url = http://admin:{url_password}@{listen}/svc/api/environment?token={query_token}&page=1\n\
         secret = {http_secret}\n\
         http_header = Authorization: Bearer {bearer}\n\
         http_header = Cookie: session={cookie}\n\
         http_header = X-Api-Key: {api_key}\n\
         http_header = X-Token: {x_token}\n\
         http_header = X-Client-Secret: {client_secret}\n\
         http_header = Accept: application/json\n",
        url_password = SECRETS[8],
        query_token = SECRETS[9],
        http_secret = SECRETS[2],
        bearer = SECRETS[3],
        cookie = SECRETS[4],
        api_key = SECRETS[5],
        x_token = SECRETS[6],
        client_secret = SECRETS[7],
    );
    let mut svc = builder.start().await;
    // The JobHttp calls the service itself; write it now that the address is known, and
    // load it with a reload, as an operator would.
    let http_job = http_job.replace(&listen, svc.listen_address());
    std::fs::write(
        svc.dir_base().join("etc/svc/job_http.d/caller.conf"),
        http_job,
    )
    .expect("write the JobHttp file");
    svc.sighup();
    wait_until(WAIT, "the JobHttp to run twice", async || {
        svc.log_files("job_http", "caller").len() >= 2
    })
    .await;
    // A webhook run (signed with the job's secret), a refused one, and signed API calls.
    svc.trigger_with_secret("/hook", b"{}", SECRETS[1])
        .await
        .assert_status(200);
    svc.trigger_with_secret("/hook", b"{}", "wrong")
        .await
        .assert_status(401);
    svc.pause("hook").await.assert_status(200);
    svc.resume("hook").await.assert_status(200);
    svc.wait_run_finished("hook", 1, WAIT).await;

    // Its headers are shown, redacted.
    let view = svc.get("/svc/api/job_http?id=caller").await;
    view.assert_status(200);
    let headers = view.data()["http_headers"].to_string();
    assert!(headers.contains("Accept: application/json"), "{headers}");
    assert!(headers.contains("Authorization: [redacted]"), "{headers}");

    let mut answers = vec![
        ("environment", svc.get("/svc/api/environment").await.raw),
        ("job_http", view.raw),
        (
            "job_http/logs",
            svc.get("/svc/api/job_http/logs?id=caller").await.raw,
        ),
        ("metrics", svc.get("/svc/api/metrics").await.raw),
    ];
    for page in ["/svc/", "/svc/doc"] {
        answers.push((page, svc.get(page).await.raw));
    }
    svc.stop().await;
    answers.push(("controller stdout", svc.stdout()));
    answers.push(("controller stderr", svc.stderr()));
    for (what, text) in &answers {
        assert!(
            !text.is_empty(),
            "{what} is empty: the check would prove nothing"
        );
        for secret in SECRETS {
            assert!(
                !text.contains(secret),
                "{what} contains the secret {secret:?}:\n{text}"
            );
        }
    }
}

/// A JobHttp whose target refuses the connection: the client library's error names the
/// URL, query included; neither the run's log nor the controller's output may show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_does_not_show_the_url_query() {
    let token = "refused-call-token-3d4e";
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut svc = TestService::builder()
        .job_http_file(
            "refused",
            format!(
                "[job.http \"refused\"]\n\
                 interval = 1s\n\
                 http_url = http://127.0.0.1:{port}/hook?token={token}&page=1\n"
            ),
        )
        .start()
        .await;
    wait_until(WAIT, "the JobHttp to fail once", async || {
        svc.log_files("job_http", "refused")
            .iter()
            .any(|log| log.status == "fail")
    })
    .await;
    svc.stop().await;
    let log = svc
        .log_files("job_http", "refused")
        .into_iter()
        .find(|log| log.status == "fail")
        .expect("a failed run");
    let content = log.content();
    assert!(content.contains("connection failed"), "{content}");
    assert!(
        content.contains("page=1"),
        "the URL is still logged: {content}"
    );
    for (what, text) in [
        ("the run's log", content.clone()),
        ("controller stderr", svc.stderr()),
        ("controller stdout", svc.stdout()),
    ] {
        assert!(!text.contains(token), "{what} shows the token:\n{text}");
    }
}

/// Notifications whose receivers refuse the connection: their failed attempts are
/// logged, and neither the log nor any answer shows the SMTP password, the webhook's
/// secret or the token in its URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_notifications_show_no_secret() {
    let secrets = [
        "notif-smtp-password-6f7a",
        "notif-hook-secret-8b9c",
        "notif-url-token-0d1e",
        "notifpathtoken0123456789abcdef",
    ];
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut svc = TestService::builder()
        .main_text(format!(
            "[notif \"mail\"]\nkind = email\nsmtp_server = smtps://127.0.0.1:{port}\n\
             smtp_user = mailer\nsmtp_password = {}\nfrom = svc@example.org\n\
             to = ops@example.org\n\
             [notif \"hook\"]\nkind = webhook\n\
             url = http://127.0.0.1:{port}/hooks/{}?token={}&page=1\nsecret = {}\n",
            secrets[0], secrets[3], secrets[2], secrets[1]
        ))
        .job_file(
            "told",
            job_section(
                "told",
                &[
                    "path = /told",
                    "command = true",
                    "notif_on_success = mail, hook",
                ],
            ),
        )
        .start()
        .await;
    svc.run_now("told").await.assert_status(200);
    wait_until(WAIT, "both notifications to fail once", async || {
        let stderr = svc.stderr();
        ["\"mail\"", "\"hook\""].iter().all(|notif| {
            stderr
                .lines()
                .any(|line| line.contains("trying again") && line.contains(notif))
        })
    })
    .await;
    let environment = svc.get("/svc/api/environment").await.raw;
    svc.stop().await;
    for (what, text) in [
        ("environment", environment),
        ("controller stdout", svc.stdout()),
        ("controller stderr", svc.stderr()),
    ] {
        for secret in secrets {
            assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
        }
    }
}
