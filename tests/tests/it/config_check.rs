//! `svc-controller --check` and start-up with an invalid configuration.

use std::process::Output;
use std::time::Duration;

use svc_tests::{EX_CONFIG, TestService, TestServiceBuilder, job_section};

/// stdout and stderr of a process, together.
fn combined(output: &Output) -> String {
    svc_tests::output_text(output)
}

/// Panics unless one line of `text` contains every string of one of the `alternatives`.
#[track_caller]
fn assert_line(text: &str, alternatives: &[&[&str]]) {
    let found = text.lines().any(|line| {
        alternatives
            .iter()
            .any(|parts| parts.iter().all(|part| line.contains(part)))
    });
    assert!(
        found,
        "no line names all of one of {alternatives:?}; the output was:\n{text}"
    );
}

/// A tree with one problem of each kind.
fn broken_tree() -> TestServiceBuilder {
    TestService::builder()
        .svc("bogus_key = bogus_value_1")
        .job_file(
            "interval",
            job_section("bad interval", &["interval = 5x", "command = true"]),
        )
        .job_file(
            "schedule",
            job_section(
                "bad schedule",
                &["schedule = daily@25:00", "command = true"],
            ),
        )
        .job_file("dup1", job_section("a b", &["command = true"]))
        .job_file("dup2", job_section("a_b", &["command = true"]))
        .job_file(
            "hook1",
            job_section("p1", &["path = /same", "command = true"]),
        )
        .job_file(
            "hook2",
            job_section("p2", &["path = /same", "command = true"]),
        )
        .job_file_raw(
            "binary.conf",
            &b"[job \"bin\xff\xfe\"]\ncommand = echo \xc3\x28\n"[..],
        )
}

/// Every problem of [`broken_tree`] is named with its file, section, key and value.
fn assert_names_every_problem(text: &str) {
    assert_line(text, &[&["svc.conf", "svc", "bogus_key", "bogus_value_1"]]);
    assert_line(
        text,
        &[&["interval.conf", "bad interval", "interval", "5x"]],
    );
    assert_line(
        text,
        &[&["schedule.conf", "bad schedule", "schedule", "daily@25:00"]],
    );
    assert_line(text, &[&["dup1.conf", "a_b"], &["dup2.conf", "a_b"]]);
    assert_line(
        text,
        &[
            &["hook1.conf", "/same", "path"],
            &["hook2.conf", "/same", "path"],
        ],
    );
    assert_line(text, &[&["binary.conf"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_accepts_a_valid_tree() {
    let svc = TestService::builder()
        .svc("max_job_running = 2")
        .svc("name = check-me")
        .job_file(
            "jobs",
            format!(
                "{}\n{}",
                job_section(
                    "nightly backup",
                    &[
                        "schedule = daily@03:30",
                        "command = echo backup",
                        "command = echo done",
                        "timeout = 90s",
                        "log_retention = 3",
                        "env = A=1",
                    ],
                ),
                job_section(
                    "deploy",
                    &["path = /deploy", "auth_kind = codehost", "command = true"],
                ),
            ),
        )
        .job_http_file(
            "ping",
            "[job.http \"ping\"]\ninterval = 5m\nhttp_url = http://127.0.0.1:9/ping\n\
             http_method = POST\nhttp_request_type = json\n",
        )
        .build();
    let output = svc.check().await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "--check of a valid tree exits 0:\n{}",
        combined(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_every_problem_and_exits_78() {
    let svc = broken_tree().build();
    let output = svc.check().await;
    let text = combined(&output);
    assert_eq!(
        output.status.code(),
        Some(EX_CONFIG),
        "exit status:\n{text}"
    );
    assert_names_every_problem(&text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_tree_exits_78_without_listening() {
    let mut svc = broken_tree().build();
    svc.spawn();
    let status = svc
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the controller exits on an invalid configuration");
    let text = format!("{}{}", svc.stdout(), svc.stderr());
    assert_eq!(status.code(), Some(EX_CONFIG), "exit status:\n{text}");
    assert_names_every_problem(&text);
    let url = format!("http://{}/svc", svc.listen_address());
    assert!(!text.contains(&url), "it never announced {url}:\n{text}");
    assert!(
        std::net::TcpStream::connect(svc.listen_address()).is_err(),
        "nothing listens on {}",
        svc.listen_address()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_names_load_with_a_deprecation_note() {
    let svc = TestService::builder()
        .svc("max_hook_running = 2")
        .job_file(
            "legacy",
            "[hook \"legacy\"]\npath = /legacy\ncommand = echo legacy-ran\n",
        )
        .build();
    let output = svc.check().await;
    let text = combined(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    let lower = text.to_lowercase();
    assert_line(&lower, &[&["max_hook_running", "deprecated"]]);
    assert_line(&lower, &[&["legacy", "deprecated"]]);

    let mut svc = svc;
    svc.start().await;
    let environment = svc.environment().await;
    assert_eq!(environment["max_job_running"], 2, "{environment}");
    assert!(environment["jobs"].get("legacy").is_some(), "{environment}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_start_refuse_a_missing_runner() {
    let builder = TestService::builder();
    let missing = builder.dir_base().join("no/svc-runner");
    let not_executable = builder.dir_base().join("etc/svc/svc-runner");
    let mut svc = builder
        .svc(format!("runner_path = {}", missing.display()))
        .job_file(
            "one",
            job_section("one", &["path = /one", "command = true"]),
        )
        .build();
    let output = svc.check().await;
    let text = combined(&output);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{text}");
    let shown = missing.display().to_string();
    assert_line(&text, &[&["svc.conf", "[svc]", "runner_path", &shown]]);
    svc.spawn();
    let status = svc
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the controller exits");
    assert_eq!(status.code(), Some(EX_CONFIG), "{}", svc.stderr());

    // Present but not executable.
    std::fs::write(&not_executable, "#!/bin/sh\n").expect("write");
    let config = std::fs::read_to_string(svc.config_path()).expect("read");
    std::fs::write(
        svc.config_path(),
        config.replace(&shown, &not_executable.display().to_string()),
    )
    .expect("write");
    let output = svc.check().await;
    let text = combined(&output);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{text}");
    assert_line(&text, &[&["runner_path", "not executable"]]);
}

/// Upstream's example `[notif]` section, as it is, and its example job that names it.
const UPSTREAM_NOTIF: &str = "[notif \"email-to-shulhan\"]\nkind = email\n\
                              smtp_server = smtps://mail.kilabit.info\n\
                              smtp_user = $SMTP_USER\nsmtp_password = $SMTP_PASS\n\
                              from = ops@kilabit.info\nto = m.shulhan@gmail.com\n";
const UPSTREAM_NOTIF_JOB: &str = "[job \"notif-email-success\"]\n\
                                  description = Send notification when job success.\n\
                                  path = /notif-email-success\nsecret = s3cret\n\
                                  command = echo \"Test notification\"\n\
                                  notif_on_success = email-to-shulhan\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_notif_sections_pass_the_check_with_their_variables() {
    let builder = || {
        TestService::builder()
            .main_text(UPSTREAM_NOTIF)
            .job_file("notif-email-success", UPSTREAM_NOTIF_JOB)
    };
    let svc = builder()
        .env("SMTP_USER", "ops")
        .env("SMTP_PASS", "upstream-pass-8e2a")
        .build();
    let output = svc.check().await;
    let text = combined(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("configuration is valid (1 jobs"), "{text}");
    assert!(!text.contains("upstream-pass-8e2a"), "{text}");

    // Without them, the variable is named, not a value.
    let svc = builder().env("SMTP_USER", "ops").build();
    let output = svc.check().await;
    let text = combined(&output);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{text}");
    assert_line(
        &text,
        &[&[
            "svc.conf",
            "[notif \"email-to-shulhan\"]",
            "smtp_password",
            "the environment variable SMTP_PASS is not set",
        ]],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notif_problems_are_named_without_their_secrets() {
    let svc = TestService::builder()
        .main_text(
            "[notif \"mail\"]\nkind = email\nsmtp_server = smtp://me:url-pass-41f0@mail.example.org\n\
             smtp_user = u\nsmtp_password = pass-one-93ab\nsmtp_password = pass-two-c1d2\n\
             from = svc@example.org\nto = ops@example.org\n\
             [notif \"hook\"]\nkind = webhook\nurl = https://h.example.org/x\n\
             secret = whsec_bad*secret-77aa\n\
             [notif \"fax\"]\nkind = fax\n",
        )
        .job_file(
            "j",
            job_section(
                "j",
                &[
                    "path = /j",
                    "command = true",
                    "notif_on_success = mail",
                    "notif_on_failed = hook, pager",
                ],
            ),
        )
        .build();
    let output = svc.check().await;
    let text = combined(&output);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{text}");
    for secret in [
        "url-pass-41f0",
        "pass-one-93ab",
        "pass-two-c1d2",
        "bad*secret-77aa",
    ] {
        assert!(!text.contains(secret), "{secret} shown:\n{text}");
    }
    assert_line(
        &text,
        &[&[
            "svc.conf",
            "[notif \"mail\"]",
            "smtp_server",
            "smtp://me:[redacted]@mail.example.org",
            "unencrypted",
        ]],
    );
    assert_line(
        &text,
        &[&[
            "svc.conf",
            "[notif \"mail\"]",
            "smtp_password",
            "[redacted]",
            "repeated key",
        ]],
    );
    assert_line(
        &text,
        &[&[
            "svc.conf",
            "[notif \"hook\"]",
            "secret",
            "[redacted]",
            "base64",
        ]],
    );
    assert_line(&text, &[&["svc.conf", "[notif \"fax\"]", "kind", "fax"]]);
    assert_line(
        &text,
        &[&[
            "j.conf",
            "[job \"j\"]",
            "notif_on_failed",
            "hook, pager",
            "no [notif \"pager\"] section",
        ]],
    );
}
