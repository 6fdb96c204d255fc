//! The HTTP API over real HTTP: every endpoint of `interface.md` section 4 (and the
//! legacy and later upstream paths of `decisions.md`), with every status code the
//! decisions give them, always in the `{code, message, data}` wrapper.
//!
//! Every test starts its own controller on its own temporary `dir_base`.

use std::io::Read as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use svc_tests::raw_http::{RawResponse, parse_response};
use svc_tests::{
    TestService, WAIT, fresh_epoch, hmac_sha256_hex, job_section, wait_for, wait_until,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

// ----- helpers ---------------------------------------------------------------------------

/// A client that neither adds `Accept-Encoding` nor decodes gzip, so the tests see the
/// encoding the service chose.
fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .no_gzip()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build the HTTP client")
}

/// A response as sent: status, headers and the undecoded body.
#[derive(Debug)]
struct Plain {
    status: u16,
    content_type: String,
    content_encoding: Option<String>,
    body: Vec<u8>,
}

impl Plain {
    /// The body, gunzipped when `content-encoding: gzip`, parsed as JSON.
    fn json(&self) -> Value {
        let bytes = match self.content_encoding.as_deref() {
            Some("gzip") => gunzip(&self.body),
            Some(other) => panic!("unexpected content-encoding {other}"),
            None => self.body.clone(),
        };
        serde_json::from_slice(&bytes).unwrap_or_else(|err| {
            panic!(
                "the body is not JSON ({err}): {}",
                String::from_utf8_lossy(&bytes)
            )
        })
    }

    /// Panics unless the body is the wrapper with `code` = the HTTP status = `status`
    /// and the content type is JSON; returns the wrapper.
    #[track_caller]
    fn wrapper(&self, status: u16) -> Value {
        let body = self.json();
        assert_eq!(self.status, status, "HTTP status; body: {body}");
        assert_eq!(body["code"], json!(status), "code = HTTP status: {body}");
        if status >= 400 {
            let name = body["name"].as_str().unwrap_or_default();
            assert!(name.starts_with("ERR_"), "an error has a name: {body}");
        } else {
            assert!(
                body.get("name").is_none(),
                "only errors have a name: {body}"
            );
        }
        assert!(
            body["message"].is_string(),
            "the wrapper has a message: {body}"
        );
        assert!(
            body.get("data").is_some(),
            "the wrapper has a data member: {body}"
        );
        assert!(
            self.content_type.starts_with("application/json"),
            "content-type {:?}",
            self.content_type
        );
        body
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("the gzip body decodes");
    out
}

/// `GET path` with the plain client, sending `Accept-Encoding: gzip` when `gzip`.
async fn get_plain(svc: &TestService, path: &str, gzip: bool) -> Plain {
    let mut request = plain_client().get(format!("{}{path}", svc.base_url()));
    if gzip {
        request = request.header("accept-encoding", "gzip");
    }
    send_plain(request).await
}

async fn send_plain(request: reqwest::RequestBuilder) -> Plain {
    let response = request.send().await.expect("the request is answered");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_owned())
    };
    let content_type = header("content-type").unwrap_or_default();
    let content_encoding = header("content-encoding");
    let status = response.status().as_u16();
    let body = response.bytes().await.expect("read the body").to_vec();
    Plain {
        status,
        content_type,
        content_encoding,
        body,
    }
}

/// Any method, path, headers and body, with the plain client.
async fn request(
    svc: &TestService,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> Plain {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = plain_client()
        .request(method, format!("{}{path}", svc.base_url()))
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send_plain(request).await
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `POST path` with a form `body`, signed with `signature` when given.
async fn post_form(svc: &TestService, path: &str, body: &str, signature: Option<&str>) -> Plain {
    let mut headers = vec![("content-type", "application/x-www-form-urlencoded")];
    if let Some(signature) = signature {
        headers.push(("X-Svc-Sign", signature));
    }
    request(svc, "POST", path, &headers, body.to_owned()).await
}

/// `POST path` with the form `_svc_epoch=<epoch>&id=<id>` correctly signed.
async fn signed_form(svc: &TestService, path: &str, id: &str, epoch: i64) -> Plain {
    let body = format!("_svc_epoch={epoch}&id={id}");
    let signature = hmac_sha256_hex(svc.secret(), &body);
    post_form(svc, path, &body, Some(&signature)).await
}

/// `POST path?query` signed the JobHttp way (HMAC of the raw query).
async fn signed_query(svc: &TestService, path: &str, query: &str) -> Plain {
    let signature = hmac_sha256_hex(svc.secret(), query);
    request(
        svc,
        "POST",
        &format!("{path}?{query}"),
        &[("X-Svc-Sign", &signature)],
        Vec::new(),
    )
    .await
}

/// Sends `head` and then `body_len` bytes of body in 64 KiB chunks on a raw connection,
/// while reading the answer at the same time. The server may answer before the body is
/// all sent and then close the connection; the answer must have been sent before that.
/// Returns the answer and how many body bytes were written.
async fn raw_upload(address: &str, head: &str, body_len: usize) -> (RawResponse, usize) {
    let stream = TcpStream::connect(address).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let head = head.to_owned();
    // The write half is handed back, not dropped: dropping it would half-close the
    // connection, which hyper takes for the client going away.
    let sent = Arc::new(AtomicUsize::new(0));
    let sent_by_writer = Arc::clone(&sent);
    let writing = tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_err() {
            return writer;
        }
        let chunk = vec![b'a'; 64 * 1024];
        while sent_by_writer.load(Ordering::Relaxed) < body_len {
            let n = chunk
                .len()
                .min(body_len - sent_by_writer.load(Ordering::Relaxed));
            if writer.write_all(&chunk[..n]).await.is_err() {
                break;
            }
            sent_by_writer.fetch_add(n, Ordering::Relaxed);
        }
        writer
    });
    let reading = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) => return parse_response(&buf, true, false).ok_or(buf),
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(response) = parse_response(&buf, false, false) {
                        return Ok(response);
                    }
                }
                Err(err) => {
                    panic!(
                        "the connection failed ({err}) before a whole answer came; read so \
                         far: {:?}",
                        String::from_utf8_lossy(&buf)
                    )
                }
            }
        }
    };
    let response = tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("an answer within 60 s")
        .unwrap_or_else(|buf| {
            panic!(
                "the connection closed without a whole answer: {:?}",
                String::from_utf8_lossy(&buf)
            )
        });
    // A server that refused the body stops reading it: the writer would wait for ever.
    writing.abort();
    (response, sent.load(Ordering::Relaxed))
}

/// Panics unless `response` is the JSON wrapper of `status`; returns the wrapper.
#[track_caller]
fn raw_wrapper(response: &RawResponse, status: u16) -> Value {
    let body: Value = serde_json::from_slice(&response.body).unwrap_or_else(|err| {
        panic!(
            "answer {} is not JSON ({err}): {:?}",
            response.status,
            String::from_utf8_lossy(&response.body)
        )
    });
    assert_eq!(response.status, status, "HTTP status; body {body}");
    assert_eq!(body["code"], json!(status), "code = HTTP status: {body}");
    assert!(
        response
            .headers
            .iter()
            .any(|(name, value)| name == "content-type" && value.starts_with("application/json")),
        "content type JSON: {:?}",
        response.headers
    );
    body
}

/// The newest run counter of JobHttp `id` with a log on disk, and whether any run is
/// still going on.
fn http_runs(svc: &TestService, id: &str) -> (u64, bool) {
    let files = svc.log_files("job_http", id);
    let newest = files.iter().map(|f| f.counter).max().unwrap_or(0);
    let running = files.iter().any(|f| f.status == "started");
    (newest, running)
}

/// Main file text of a JobHttp `name` calling the service's own Environment every second
/// with a secret bearer token.
fn self_calling_job_http(svc: &TestService, name: &str) -> String {
    format!(
        "[job.http \"{name}\"]\n\
         interval = 1s\n\
         http_url = http://{}/svc/api/environment\n\
         http_header = Authorization: Bearer topsecret\n",
        svc.listen_address()
    )
}

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

// ----- endpoints 5 to 8 ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "to split, see tidy.rs")]
async fn job_http_view_logs_pause_and_resume() {
    let mut svc = TestService::builder().build();
    let ping = self_calling_job_http(&svc, "ping");
    std::fs::write(svc.dir_base().join("etc/svc/job_http.d/ping.conf"), ping)
        .expect("write job_http.d/ping.conf");
    svc.start().await;

    // Endpoint 5.
    let view = get_plain(&svc, "/svc/api/job_http?id=ping", false).await;
    let text = String::from_utf8_lossy(&view.body).into_owned();
    let job = view.wrapper(200)["data"].clone();
    assert_eq!(job["id"], "ping");
    assert_eq!(
        job["http_url"],
        format!("http://{}/svc/api/environment", svc.listen_address())
    );
    assert_eq!(job["http_headers"], json!(["Authorization: [redacted]"]));
    assert_eq!(job["interval"], json!(1_000_000_000u64));
    assert!(!text.contains("topsecret"), "header value redacted: {text}");
    let env = get_plain(&svc, "/svc/api/environment", false).await;
    assert!(
        !String::from_utf8_lossy(&env.body).contains("topsecret"),
        "nor in the Environment"
    );
    for (query, status) in [
        ("id=", 400),
        ("", 400),
        ("id=a/b", 400),
        ("id=a%2Fb", 400),
        ("id=nope", 400),
    ] {
        get_plain(&svc, &format!("/svc/api/job_http?{query}"), false)
            .await
            .wrapper(status);
    }

    // Endpoint 6: wait for two runs so the lines of more than one log are served.
    let lines: Vec<String> = wait_for(WAIT, "two JobHttp runs in the recent lines", async || {
        let answer = get_plain(&svc, "/svc/api/job_http/logs?id=ping", false).await;
        let data = answer.wrapper(200)["data"].clone();
        let lines: Vec<String> = data
            .as_array()
            .expect("data is an array")
            .iter()
            .map(|line| {
                line.as_str()
                    .unwrap_or_else(|| panic!("every line is a string: {data}"))
                    .to_owned()
            })
            .collect();
        let finished = lines
            .iter()
            .filter(|line| line.contains("=== run ") && line.contains(" finished"))
            .count();
        (finished >= 2).then_some(lines)
    })
    .await;
    let all = lines.join("\n");
    assert!(lines.len() <= 100, "at most 100 lines: {}", lines.len());
    let request_line = format!(
        "GET http://{}/svc/api/environment?_svc_epoch=",
        svc.listen_address()
    );
    assert!(
        lines.iter().any(|line| line.contains(&request_line)),
        "the request line is there ({request_line}):\n{all}"
    );
    assert!(
        lines.iter().any(|line| line.contains("HTTP/1.1 200")),
        "the response status is there:\n{all}"
    );
    assert!(!all.contains("topsecret"), "no secret in the lines:\n{all}");
    assert!(
        !all.contains("ZXZlbn") && lines.iter().all(|l| !l.ends_with('=')),
        "plain text, not base64:\n{all}"
    );
    // Oldest first: run numbers and timestamps never go back.
    let runs: Vec<u64> = lines
        .iter()
        .filter_map(|line| {
            let rest = line.split("=== run ").nth(1)?;
            rest.split(' ').next()?.parse().ok()
        })
        .collect();
    assert!(runs.len() >= 2, "run lines: {all}");
    assert!(
        runs.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {runs:?}"
    );
    let times: Vec<_> = svc_tests::parse_log_lines(&all)
        .into_iter()
        .filter_map(|line| line.time)
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "timestamps oldest first:\n{all}"
    );
    // As the spec and upstream: an unknown JobHttp ID is a bad request (endpoints 5-8).
    for path in ["/svc/api/job_http", "/svc/api/job_http/logs"] {
        for query in ["id=", "id=a/b", "id=nope"] {
            let answer = get_plain(&svc, &format!("{path}?{query}"), false)
                .await
                .wrapper(400);
            assert_eq!(answer["name"], "ERR_INVALID_JOB_ID", "{path}?{query}");
        }
    }
    // Looked up in any case, as upstream's clients send IDs lower-cased.
    assert_eq!(
        get_plain(&svc, "/svc/api/job_http?id=PING", false)
            .await
            .wrapper(200)["data"]["id"],
        "ping"
    );

    // One JobHttp log by counter.
    let file = svc
        .log_files("job_http", "ping")
        .into_iter()
        .find(|f| f.status == "success")
        .expect("a finished JobHttp log");
    let answer = get_plain(
        &svc,
        &format!("/svc/api/job_http/log?id=ping&counter={}", file.counter),
        true,
    )
    .await;
    assert_eq!(answer.content_encoding.as_deref(), Some("gzip"));
    let log = answer.wrapper(200)["data"].clone();
    assert_eq!(log["job_id"], "ping");
    assert_eq!(log["counter"], json!(file.counter));
    let content = base64::engine::general_purpose::STANDARD
        .decode(log["content"].as_str().expect("content"))
        .expect("base64");
    assert_eq!(content, std::fs::read(&file.path).expect("read the log"));
    get_plain(&svc, "/svc/api/job_http/log?id=ping&counter=99999", false)
        .await
        .wrapper(404);
    get_plain(&svc, "/svc/api/job_http/log?id=ping&counter=x", false)
        .await
        .wrapper(400);

    // Endpoints 7 and 8: refusals first.
    for path in ["/svc/api/job_http/pause", "/svc/api/job_http/resume"] {
        let expected = hmac_sha256_hex(svc.secret(), "id=ping");
        let unsigned = request(&svc, "POST", &format!("{path}?id=ping"), &[], Vec::new()).await;
        unsigned.wrapper(401);
        let wrong = request(
            &svc,
            "POST",
            &format!("{path}?id=ping"),
            &[("X-Svc-Sign", &hmac_sha256_hex("wrong", "id=ping"))],
            Vec::new(),
        )
        .await;
        wrong.wrapper(401);
        // Signed for another query.
        request(
            &svc,
            "POST",
            &format!("{path}?id=ping"),
            &[("X-Svc-Sign", &hmac_sha256_hex(svc.secret(), "id=pong"))],
            Vec::new(),
        )
        .await
        .wrapper(401);
        for answer in [&unsigned, &wrong] {
            assert!(!String::from_utf8_lossy(&answer.body).contains(&expected));
        }
        signed_query(&svc, path, "id=").await.wrapper(400);
        signed_query(&svc, path, "id=a/b").await.wrapper(400);
        signed_query(&svc, path, "id=nope").await.wrapper(400);
    }
    assert_ne!(
        get_plain(&svc, "/svc/api/job_http?id=ping", false)
            .await
            .json()["data"]["status"],
        "paused"
    );

    let paused = signed_query(&svc, "/svc/api/job_http/pause", "id=ping")
        .await
        .wrapper(200);
    assert_eq!(paused["data"]["id"], "ping", "data is the JobHttp");
    assert_eq!(paused["data"]["status"], "paused");
    // A run that was going on may end; after that nothing new starts.
    wait_until(WAIT, "no JobHttp run going on", async || {
        !http_runs(&svc, "ping").1
    })
    .await;
    let (before, _) = http_runs(&svc, "ping");
    // Two ticks of its 1 s interval came and were skipped.
    svc_tests::ticks::wait_ticks_skipped(&svc, "paused", 2, WAIT).await;
    let (after, running) = http_runs(&svc, "ping");
    assert_eq!(
        (after, running),
        (before, false),
        "no JobHttp run while paused (two ticks skipped)"
    );
    let view = get_plain(&svc, "/svc/api/job_http?id=ping", false).await;
    assert_eq!(view.wrapper(200)["data"]["status"], "paused");

    let resumed = signed_query(&svc, "/svc/api/job_http/resume", "id=ping")
        .await
        .wrapper(200);
    assert_eq!(resumed["data"]["id"], "ping");
    assert_eq!(resumed["data"]["status"], "started");
    wait_until(WAIT, "a JobHttp run after resume", async || {
        let (newest, running) = http_runs(&svc, "ping");
        newest > before && !running
    })
    .await;
    let (newest, _) = http_runs(&svc, "ping");
    svc.log_files("job_http", "ping")
        .into_iter()
        .find(|f| f.counter == newest)
        .expect("the new run's log")
        .assert_status("success");
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

// ----- limits, unknown routes, methods, headers -----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limits_get_413_in_the_wrapper() {
    let svc = TestService::builder()
        .job_file(
            "deploy",
            job_section(
                "deploy",
                &["path = /deploy", r#"command = wc -c < "$SVC_REQUEST_BODY""#],
            ),
        )
        .start()
        .await;
    let address = svc.listen_address().to_owned();

    // 1 MiB + 1 on pause (and the legacy path), with a signature that would be checked
    // after the body is read.
    for path in ["/svc/api/job_exec/pause", "/svc/api/job/pause"] {
        let length = 1024 * 1024 + 1;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nX-Svc-Sign: 00\r\n\
             Content-Length: {length}\r\n\r\n"
        );
        let (response, _) = raw_upload(&address, &head, length).await;
        let wrapper = raw_wrapper(&response, 413);
        assert_eq!(wrapper["message"], "request body too large", "{path}");
    }

    // 25 MiB + 1 on a trigger route, streamed.
    let length = 25 * 1024 * 1024 + 1;
    let head = format!(
        "POST /svc/api/job/run/deploy HTTP/1.1\r\nHost: {address}\r\nX-Svc-Sign: 00\r\n\
         Content-Length: {length}\r\n\r\n"
    );
    let (response, sent) = raw_upload(&address, &head, length).await;
    let wrapper = raw_wrapper(&response, 413);
    assert_eq!(wrapper["message"], "request body too large");
    println!("the 413 came after {sent} of {length} body bytes were written");
    // The same without a Content-Length (chunked), where the limit is found while reading.
    let stream_head = format!(
        "POST /svc/job/deploy HTTP/1.1\r\nHost: {address}\r\nX-Svc-Sign: 00\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    let chunked = chunked_upload(&address, &stream_head, length).await;
    raw_wrapper(&chunked, 413);
    assert!(
        svc.job_logs("deploy").is_empty(),
        "no run for a refused body"
    );

    // 1.5 MiB is fine on a trigger route.
    let body = vec![b'x'; 1536 * 1024];
    let signature = hmac_sha256_hex(svc.secret(), &body);
    let answer = request(
        &svc,
        "POST",
        "/svc/api/job/run/deploy",
        &[("X-Svc-Sign", &signature)],
        body,
    )
    .await;
    answer.wrapper(200);
    let log = svc.wait_run_finished("deploy", 1, WAIT).await;
    log.assert_status("success");
    assert!(
        log.texts().iter().any(|line| line.trim() == "1572864"),
        "the command got the whole body:\n{}",
        log.content()
    );
}

/// Like [`raw_upload`], with the body sent as 64 KiB chunks of chunked encoding.
async fn chunked_upload(address: &str, head: &str, body_len: usize) -> RawResponse {
    let stream = TcpStream::connect(address).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let head = head.to_owned();
    // As in raw_upload, the write half stays open until the answer is read.
    let writing = tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_err() {
            return writer;
        }
        let size = 64 * 1024;
        let mut chunk = format!("{size:x}\r\n").into_bytes();
        chunk.extend(std::iter::repeat_n(b'a', size));
        chunk.extend_from_slice(b"\r\n");
        let mut sent = 0;
        while sent < body_len {
            if writer.write_all(&chunk).await.is_err() {
                return writer;
            }
            sent += size;
        }
        let _ = writer.write_all(b"0\r\n\r\n").await;
        writer
    });
    let mut buf = Vec::new();
    let mut piece = [0u8; 8192];
    let response = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match reader.read(&mut piece).await {
                Ok(0) => break parse_response(&buf, true, false),
                Ok(n) => {
                    buf.extend_from_slice(&piece[..n]);
                    if let Some(response) = parse_response(&buf, false, false) {
                        break Some(response);
                    }
                }
                Err(err) => panic!(
                    "the connection failed ({err}) before a whole answer: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
            }
        }
    })
    .await
    .expect("an answer within 60 s");
    writing.abort();
    response.unwrap_or_else(|| {
        panic!(
            "closed without a whole answer: {:?}",
            String::from_utf8_lossy(&buf)
        )
    })
}

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
