//! Notifications, end to end: the real controller tells a real SMTP server (Debian's
//! `python3-aiosmtpd`, started by the test on a loopback port with a self-signed
//! certificate made by `openssl`), over STARTTLS and over TLS from the start, with a
//! login; and a webhook sink (a small HTTP server here) that checks the Standard
//! Webhooks signature and the JSON, and that answers 500 once to show the retry. A mail
//! server that never answers delays no run, nor the stop.
//!
//! Every test starts its own controller on its own temporary `dir_base`. `tests/setup`
//! installs what they need.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use svc_tests::sink::{Received, Sink};
use svc_tests::{TestService, WAIT, job_section, wait_for, wait_until};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::net::TcpListener;

// ---------------------------------------------------------------------------------------
// Tools.

/// A text field of the controller's log lines, as its log format writes it.
fn field(name: &str, value: &str) -> String {
    format!("{name}={value:?}")
}

/// A `python3` that has `aiosmtpd`: `SVC_TEST_PYTHON` when set, else `python3` on the
/// `PATH`, else Debian's own (a `PATH` may lead to another Python first). Panics with
/// what to install when there is none.
fn python_with_aiosmtpd() -> String {
    let candidates: Vec<String> = match std::env::var("SVC_TEST_PYTHON") {
        Ok(python) => vec![python],
        Err(_) => vec!["python3".into(), "/usr/bin/python3".into()],
    };
    for python in &candidates {
        let found = std::process::Command::new(python)
            .args(["-c", "import aiosmtpd"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if found {
            return python.clone();
        }
    }
    panic!(
        "the notification tests need an SMTP server: install python3-aiosmtpd \
         (apt-get install python3-aiosmtpd, or run tests/setup), or set SVC_TEST_PYTHON to \
         a python3 that can import aiosmtpd; tried {candidates:?}"
    );
}

/// A self-signed certificate for `localhost` and 127.0.0.1, and its key, in `dir`.
fn self_signed_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let output = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:prime256v1")
        .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap_or_else(|err| {
            panic!("cannot run openssl ({err}): install openssl (apt-get install openssl)")
        });
    assert!(
        output.status.success(),
        "openssl could not make a certificate: {}",
        svc_tests::output_text(&output)
    );
    (cert, key)
}

// ---------------------------------------------------------------------------------------
// The SMTP server.

/// The server: an aiosmtpd `SMTP` on a free loopback port, with a self-signed
/// certificate, STARTTLS required (`starttls`) or TLS from the start (`tls`), logins
/// checked against argv, each message written as JSON to the output directory. It prints
/// its port, and ends when its standard input closes.
const SMTP_SERVER: &str = r#"
import asyncio, json, os, ssl, sys
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

mode, cert, key, out, user, password = sys.argv[1:7]
count = 0

class Handler:
    async def handle_DATA(self, server, session, envelope):
        global count
        count += 1
        data = session.auth_data
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "data": envelope.content.decode("utf-8", "replace"),
            "tls": server.transport.get_extra_info("ssl_object") is not None,
            "login": data.login.decode() if isinstance(data, LoginPassword) else None,
        }
        tmp = os.path.join(out, ".%d.tmp" % count)
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(out, "%d.json" % count))
        return "250 OK"

def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login.decode() == user
          and auth_data.password.decode() == password)
    return AuthResult(success=ok, auth_data=auth_data)

async def main():
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    loop = asyncio.get_running_loop()
    if mode == "starttls":
        factory = lambda: SMTP(Handler(), hostname="localhost", tls_context=context,
                               require_starttls=True, authenticator=authenticator,
                               auth_require_tls=True)
        server = await loop.create_server(factory, "127.0.0.1", 0)
    else:
        factory = lambda: SMTP(Handler(), hostname="localhost", authenticator=authenticator,
                               auth_require_tls=False)
        server = await loop.create_server(factory, "127.0.0.1", 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"#;

/// How the SMTP server wants TLS.
#[derive(Debug, Clone, Copy)]
enum SmtpMode {
    StartTls,
    Tls,
}

/// A running SMTP server; killed when dropped.
struct SmtpServer {
    _child: tokio::process::Child,
    port: u16,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

const SMTP_USER: &str = "mailer";
const SMTP_PASSWORD: &str = "smtp-password-5d1c";

impl SmtpServer {
    async fn start(mode: SmtpMode) -> SmtpServer {
        let python = python_with_aiosmtpd();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (cert, key) = self_signed_certificate(dir.path());
        let script = dir.path().join("smtp_server.py");
        std::fs::write(&script, SMTP_SERVER).expect("write the server script");
        let out = dir.path().join("received");
        std::fs::create_dir(&out).expect("create the output directory");
        let mode_arg = match mode {
            SmtpMode::StartTls => "starttls",
            SmtpMode::Tls => "tls",
        };
        let mut child = tokio::process::Command::new(&python)
            .arg(&script)
            .arg(mode_arg)
            .args([&cert, &key, &out])
            .args([SMTP_USER, SMTP_PASSWORD])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {python}: {err}"));
        let stdout = child.stdout.take().expect("its stdout");
        let first = tokio::time::timeout(WAIT, BufReader::new(stdout).lines().next_line()).await;
        let port = match first {
            Ok(Ok(Some(line))) => line.trim().parse::<u16>().ok(),
            _ => None,
        };
        let Some(port) = port else {
            let _ = child.start_kill();
            let mut stderr = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = tokio::time::timeout(WAIT, err.read_to_string(&mut stderr)).await;
            }
            panic!("the SMTP server did not start (no port printed); its stderr:\n{stderr}");
        };
        SmtpServer {
            _child: child,
            port,
            out,
            _dir: dir,
        }
    }

    /// The messages received so far, in order.
    fn received(&self) -> Vec<Value> {
        let mut received = Vec::new();
        for n in 1.. {
            let path = self.out.join(format!("{n}.json"));
            let Ok(text) = std::fs::read_to_string(&path) else {
                break;
            };
            received.push(serde_json::from_str(&text).expect("the server writes JSON"));
        }
        received
    }

    async fn wait_messages(&self, count: usize) -> Vec<Value> {
        wait_for(
            WAIT,
            &format!("{count} message(s) at the SMTP server"),
            async || {
                let received = self.received();
                (received.len() >= count).then_some(received)
            },
        )
        .await
    }
}

/// The text of a received message with its header lines unfolded.
fn message_text(message: &Value) -> String {
    message["data"]
        .as_str()
        .expect("the message's data")
        .replace("\r\n", "\n")
}

/// An e-mail notif to `server`, logging in with the controller's environment variables
/// `SVC_TEST_SMTP_USER` and `SVC_TEST_SMTP_PASSWORD`.
fn email_notif(name: &str, scheme: &str, port: u16) -> String {
    format!(
        "[notif \"{name}\"]\nkind = email\nsmtp_server = {scheme}://127.0.0.1:{port}\n\
         smtp_user = $SVC_TEST_SMTP_USER\nsmtp_password = $SVC_TEST_SMTP_PASSWORD\n\
         smtp_insecure = true\nfrom = svc <svc@example.org>\nto = ops@example.org\n\
         to = dev@example.org, lead@example.org\n"
    )
}

fn with_smtp_login(builder: svc_tests::TestServiceBuilder) -> svc_tests::TestServiceBuilder {
    builder
        .env("SVC_TEST_SMTP_USER", SMTP_USER)
        .env("SVC_TEST_SMTP_PASSWORD", SMTP_PASSWORD)
}

// ---------------------------------------------------------------------------------------
// E-mail.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_over_starttls_with_a_login_carries_the_runs_end_and_log() {
    let smtp = SmtpServer::start(SmtpMode::StartTls).await;
    let mut svc = with_smtp_login(TestService::builder())
        .main_text(email_notif("mail", "smtp+starttls", smtp.port))
        .job_file(
            "counting",
            job_section(
                "counting",
                &[
                    "path = /counting",
                    "command = seq 1 60",
                    "notif_on_success = mail",
                    "notif_on_failed = mail",
                ],
            ),
        )
        .job_file(
            "broken",
            job_section(
                "broken",
                &[
                    "path = /broken",
                    "command = echo about to fail",
                    "command = false",
                    "notif_on_failed = mail",
                ],
            ),
        )
        .start()
        .await;

    svc.run_now("counting").await.assert_status(200);
    svc.wait_run_finished("counting", 1, WAIT).await;
    let received = smtp.wait_messages(1).await;
    let message = &received[0];
    assert_eq!(message["tls"], true, "after STARTTLS: {message}");
    assert_eq!(message["login"], SMTP_USER, "{message}");
    assert_eq!(message["mail_from"], "svc@example.org");
    assert_eq!(
        message["rcpt_tos"],
        serde_json::json!(["ops@example.org", "dev@example.org", "lead@example.org"])
    );
    let text = message_text(message);
    assert!(
        text.contains("\nSubject: svc: job counting run 1 success\n"),
        "{text}"
    );
    assert!(text.contains("From: svc <svc@example.org>\n"), "{text}");
    assert!(text.contains("Status:  success\n"), "{text}");
    assert!(text.contains("Run:     1\n"), "{text}");
    assert!(
        text.contains("The last 50 lines of the run's log:"),
        "{text}"
    );
    let (_, log) = text
        .split_once("The last 50 lines of the run's log:\n\n")
        .expect("the log part");
    let log: Vec<&str> = log.lines().filter(|line| !line.is_empty()).collect();
    assert_eq!(log.len(), 50, "only the last 50 lines: {text}");
    assert!(log[49].ends_with("=== run 1 finished: success"), "{text}");
    assert!(log.iter().any(|line| line.ends_with(" 60")), "{text}");
    assert!(!log.iter().any(|line| line.ends_with(" 5")), "{text}");

    svc.run_now("broken").await.assert_status(200);
    svc.wait_run_finished("broken", 1, WAIT).await;
    let received = smtp.wait_messages(2).await;
    let text = message_text(&received[1]);
    assert!(
        text.contains("\nSubject: svc: job broken run 1 failed\n"),
        "{text}"
    );
    assert!(text.contains("Status:  failed\n"), "{text}");
    assert!(text.contains("about to fail"), "{text}");

    let stderr = svc.stderr();
    assert!(
        stderr.lines().any(|line| line.contains("notification sent")
            && line.contains(&field("notif", "mail"))
            && line.contains(&field("job", "counting"))),
        "each attempt is logged: {stderr}"
    );
    assert!(!stderr.contains(SMTP_PASSWORD), "{stderr}");
    assert_eq!(svc.stop().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_over_tls_from_the_start() {
    let smtp = SmtpServer::start(SmtpMode::Tls).await;
    let mut svc = with_smtp_login(TestService::builder())
        .main_text(email_notif("mail", "smtps", smtp.port))
        .job_file(
            "hello",
            job_section(
                "hello",
                &[
                    "path = /hello",
                    "command = echo hello over tls",
                    "notif_on_success = mail",
                ],
            ),
        )
        .start()
        .await;
    svc.run_now("hello").await.assert_status(200);
    let received = smtp.wait_messages(1).await;
    let message = &received[0];
    assert_eq!(message["tls"], true, "{message}");
    assert_eq!(message["login"], SMTP_USER, "{message}");
    let text = message_text(message);
    assert!(
        text.contains("\nSubject: svc: job hello run 1 success\n"),
        "{text}"
    );
    assert!(text.contains("hello over tls"), "{text}");
    assert_eq!(svc.stop().await.code(), Some(0));
}

// ---------------------------------------------------------------------------------------
// Webhooks.

/// Checks `request` as a Standard Webhooks receiver does, with `key`; returns its JSON.
#[track_caller]
fn verify_standard_webhook(request: &Received, key: &[u8]) -> Value {
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header: {request:?}"))
            .as_str()
    };
    assert_eq!(header("content-type"), "application/json");
    let id = header("webhook-id");
    assert!(id.starts_with("msg_"), "{id}");
    let timestamp: i64 = header("webhook-timestamp").parse().expect("Unix seconds");
    let now = chrono::Utc::now().timestamp();
    assert!(
        (now - timestamp).abs() < 300,
        "within the tolerance: {timestamp} vs {now}"
    );
    let expected = svc_tests::standard_signature(key, id, timestamp, &request.body);
    let signatures: Vec<&str> = header("webhook-signature").split(' ').collect();
    assert!(
        signatures.contains(&expected.as_str()),
        "signature {signatures:?}, expected {expected}"
    );
    serde_json::from_slice(&request.body).expect("a JSON body")
}

const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn whsec_key() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(WHSEC.trim_start_matches("whsec_"))
        .expect("base64")
}

/// The job of [`a_webhook_is_signed_and_retried_after_a_500`], running `command`: its
/// successes notify `flaky`, its failures `raw`.
fn deploy_job(command: &str) -> String {
    job_section(
        "Deploy Site",
        &[
            "path = /deploy",
            "secret = deploy-secret",
            command,
            "notif_on_success = flaky",
            "notif_on_failed = raw",
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_signed_and_retried_after_a_500() {
    let flaky = Sink::start(1).await;
    let steady = Sink::start(0).await;
    let notifs = format!(
        "[notif \"flaky\"]\nkind = webhook\nurl = {}\nsecret = {WHSEC}\n\
         [notif \"raw\"]\nkind = webhook\nurl = {}\nsecret = raw secret bytes\n",
        flaky.url("/hooks/svc?src=notif"),
        steady.url("/raw"),
    );
    let mut svc = TestService::builder()
        .main_text(notifs)
        .job_file("deploy", deploy_job("command = echo deployed"))
        .start()
        .await;
    let asked = Instant::now();
    svc.trigger_with_secret("/deploy", b"{}", "deploy-secret")
        .await
        .assert_status(200);

    a_success_is_signed_and_sent_again_after_a_500(&svc, &flaky, asked).await;
    the_failed_attempt_and_the_retry_are_logged(&svc).await;
    assert!(
        steady.received().is_empty(),
        "notif_on_failed is not told of a success"
    );
    a_failure_goes_to_notif_on_failed(&mut svc, &flaky, &steady).await;
}

/// Refused once with a 500, then taken: the same message, signed again with the same
/// ID, after a wait; the message tells the run's end (its job, times and log).
async fn a_success_is_signed_and_sent_again_after_a_500(
    svc: &TestService,
    flaky: &Sink,
    asked: Instant,
) {
    let requests = flaky.wait_requests(2).await;
    let (first, second) = (&requests[0], &requests[1]);
    assert_eq!(first.path, "/hooks/svc?src=notif");
    let body = verify_standard_webhook(first, &whsec_key());
    let again = verify_standard_webhook(second, &whsec_key());
    assert_eq!(body, again, "the same message");
    assert_eq!(
        first.headers["webhook-id"], second.headers["webhook-id"],
        "a retry keeps the message's ID"
    );
    assert!(
        asked.elapsed() >= Duration::from_secs(2),
        "the retry waited"
    );
    assert_eq!(body["type"], "run.success");
    assert_eq!(body["job_id"], "Deploy_Site");
    assert_eq!(body["job_name"], "Deploy Site");
    assert_eq!(body["job_kind"], "job");
    assert_eq!(body["service"], "svc");
    assert_eq!(body["counter"], 1);
    assert_eq!(body["status"], "success");
    let started = svc_tests::rfc3339(&body["started_at"]).expect("RFC 3339 started_at");
    let ended = svc_tests::rfc3339(&body["ended_at"]).expect("RFC 3339 ended_at");
    assert!(started <= ended, "{body}");
    let job = svc.job("Deploy Site").await;
    assert_eq!(svc_tests::rfc3339(&job["last_run"]), Some(started), "{job}");
    let log: Vec<&str> = body["log"]
        .as_array()
        .expect("the log's lines")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(log.iter().any(|line| line.ends_with(" deployed")), "{body}");
}

/// The failed attempt is logged with the notif, its kind, the job, the run, the attempt
/// and the answer; the second attempt is logged as sent.
async fn the_failed_attempt_and_the_retry_are_logged(svc: &TestService) {
    let stderr = svc.stderr();
    let retried = stderr
        .lines()
        .find(|line| line.contains("trying again"))
        .unwrap_or_else(|| panic!("the failed attempt is logged: {stderr}"));
    for part in [
        field("notif", "flaky"),
        field("kind", "webhook"),
        field("job", "Deploy_Site"),
        "counter=1".into(),
        "attempt=1".into(),
        "HTTP 500".into(),
    ] {
        assert!(retried.contains(&part), "{part} in {retried}");
    }
    wait_until(WAIT, "the second attempt logged as sent", async || {
        svc.stderr()
            .lines()
            .any(|line| line.contains("notification sent") && line.contains("attempt=2"))
    })
    .await;
}

/// Once the job fails (rewritten and reloaded), its failure goes to `notif_on_failed`,
/// signed with the raw secret's own bytes, and `flaky` hears nothing more; the service
/// stops cleanly.
async fn a_failure_goes_to_notif_on_failed(svc: &mut TestService, flaky: &Sink, steady: &Sink) {
    std::fs::write(
        svc.job_d().join("deploy.conf"),
        deploy_job("command = false"),
    )
    .expect("rewrite the job");
    svc.sighup();
    wait_until(WAIT, "the reload", async || {
        svc.stderr().contains("configuration reloaded")
    })
    .await;
    svc.trigger_with_secret("/deploy", b"{}", "deploy-secret")
        .await
        .assert_status(200);
    let requests = steady.wait_requests(1).await;
    let body = verify_standard_webhook(&requests[0], b"raw secret bytes");
    assert_eq!(body["type"], "run.failed");
    assert_eq!(body["status"], "failed");
    assert_eq!(body["counter"], 2);
    assert_eq!(flaky.received().len(), 2);
    assert_eq!(svc.stop().await.code(), Some(0));
}

// ---------------------------------------------------------------------------------------
// Failures off the run path.

/// A TCP server that accepts connections and never says a word (an SMTP client waits for
/// the greeting); counts them.
async fn silent_server() -> (u16, Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("its address").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let task = {
        let accepted = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        })
    };
    (port, accepted, task)
}

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("its address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mail_server_that_fails_delays_no_run_nor_the_stop() {
    let (silent, accepted, _silent) = silent_server().await;
    let refused = closed_port();
    let notifs = format!(
        "[notif \"silent\"]\nkind = email\nsmtp_server = smtp+starttls://127.0.0.1:{silent}\n\
         from = svc@example.org\nto = ops@example.org\n\
         [notif \"refused\"]\nkind = email\nsmtp_server = smtps://127.0.0.1:{refused}\n\
         from = svc@example.org\nto = ops@example.org\n"
    );
    let mut svc = TestService::builder()
        .main_text(notifs)
        .job_file(
            "busy",
            job_section(
                "busy",
                &[
                    "path = /busy",
                    "secret = busy-secret",
                    "command = echo done",
                    "notif_on_success = silent, refused",
                ],
            ),
        )
        .start()
        .await;

    svc.trigger_with_secret("/busy", b"{}", "busy-secret")
        .await
        .assert_status(200);
    // The end is recorded while the silent server holds the first attempt (for up to
    // 30 s, twice this wait).
    let log = svc.wait_run_finished("busy", 1, WAIT).await;
    assert_eq!(log.status, "success");
    svc.wait_job_status("busy", "success", WAIT).await;
    wait_until(
        WAIT,
        "the attempt connected to the silent server",
        async || accepted.load(Ordering::SeqCst) >= 1,
    )
    .await;
    assert!(
        !svc.stderr()
            .lines()
            .any(|line| line.contains(&field("notif", "silent"))),
        "its first attempt is still under way: {}",
        svc.stderr()
    );
    // The other one fails at once and waits for its next attempt.
    wait_until(WAIT, "the refused attempt logged", async || {
        svc.stderr().lines().any(|line| {
            line.contains("trying again")
                && line.contains(&field("notif", "refused"))
                && line.contains("attempt=1")
        })
    })
    .await;

    // The job runs again at once, whatever its notifications are doing.
    svc.trigger_with_secret("/busy", b"{}", "busy-secret")
        .await
        .assert_status(200);
    svc.wait_run_finished("busy", 2, WAIT).await;
    wait_until(WAIT, "run 2's attempt under way too", async || {
        accepted.load(Ordering::SeqCst) >= 2
    })
    .await;

    // The stop drops what is still under way, says so, and keeps its 10 s.
    let asked = Instant::now();
    let status = svc.stop().await;
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(0));
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    let stderr = svc.stderr();
    assert!(
        stderr.contains("notifications not sent: the service stopped before they could be")
            || stderr.contains("notification not sent: the service is stopping"),
        "{stderr}"
    );
}

/// On a system without CA certificates (a minimal install), the service starts all the
/// same; only its webhook notifications fail, and the log says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_without_ca_certificates_starts_and_says_why_webhooks_fail() {
    let svc = TestService::builder()
        .env("SSL_CERT_FILE", "/nonexistent/ca.pem")
        .env("SSL_CERT_DIR", "/nonexistent/certs")
        .main_text(
            "[notif \"hook\"]\nkind = webhook\nurl = http://127.0.0.1:9/notify\nsecret = s\n",
        )
        .job_file(
            "told",
            svc_tests::job_section(
                "told",
                &["path = /told", "command = true", "notif_on_success = hook"],
            ),
        )
        .start()
        .await;
    svc.run_now("told").await.assert_status(200);
    svc.wait_run_finished("told", 1, svc_tests::WAIT)
        .await
        .assert_status("success");
    svc_tests::wait_until(
        svc_tests::WAIT,
        "the notification's failure is logged, with why",
        async || {
            svc.stderr().lines().any(|line| {
                line.contains("notification not sent")
                    && line.contains("hook")
                    && line.contains("CA certificates")
            })
        },
    )
    .await;
}
