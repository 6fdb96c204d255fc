//! Integration tests of JobHttp runs against a tiny HTTP/1.1 server in the test.

mod common;

use std::net::SocketAddr;

use common::*;
use hmac::{Hmac, Mac as _};
use proto::{Action, ExecRequest, HttpCall, HttpRequestType, OutputStream, RunnerMessage};
use sha2::Sha256;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One request as the server saw it.
#[derive(Debug)]
struct Seen {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one request (head and `Content-Length` body) from `socket`.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Seen {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut buf).await.expect("read");
        assert!(n > 0, "client closed early");
        data.extend_from_slice(&buf[..n]);
        if let Some(pos) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
    };
    let head = String::from_utf8(data[..head_end].to_vec()).expect("utf8 head");
    let mut lines = head.split("\r\n");
    let request_line = lines.next().expect("request line");
    let mut parts = request_line.split(' ');
    let method = parts.next().expect("method").to_string();
    let target = parts.next().expect("target").to_string();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("header");
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().expect("length"))
        .unwrap_or(0);
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut buf).await.expect("read body");
        assert!(n > 0);
        body.extend_from_slice(&buf[..n]);
    }
    Seen {
        method,
        target,
        headers,
        body,
    }
}

/// Writes a response with `status` (e.g. "200 OK"), extra header lines and `body`, then
/// closes the connection.
async fn respond(
    socket: &mut tokio::net::TcpStream,
    status: &str,
    extra_headers: &str,
    body: &[u8],
) {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n",
        body.len()
    );
    socket.write_all(response.as_bytes()).await.expect("write");
    // The client may stop reading early (truncation): ignore errors on the body.
    let _ = socket.write_all(body).await;
    let _ = socket.shutdown().await;
}

/// Serves one request with `status` (e.g. "200 OK"), extra header lines and `body`.
async fn serve_once(
    status: &'static str,
    extra_headers: &'static str,
    body: Vec<u8>,
) -> (SocketAddr, JoinHandle<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let seen = read_request(&mut socket).await;
        respond(&mut socket, status, extra_headers, &body).await;
        seen
    });
    (addr, task)
}

/// Serves requests on `listener`, one connection each, answering the n-th with the
/// n-th `(status, extra header lines)` of `script` and an empty body, until the
/// script ends or `stop` fires; returns what it saw.
fn serve_script(
    listener: TcpListener,
    script: Vec<(&'static str, String)>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> JoinHandle<Vec<Seen>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut stop = stop;
        for (status, headers) in script {
            let mut socket = tokio::select! {
                accepted = listener.accept() => accepted.expect("accept").0,
                _ = &mut stop => break,
            };
            seen.push(read_request(&mut socket).await);
            respond(&mut socket, status, &headers, b"").await;
        }
        seen
    })
}

fn http_request(call: HttpCall) -> ExecRequest {
    ExecRequest {
        job_id: "hook".into(),
        counter: 1,
        timeout_ms: Some(2000),
        kill_grace_ms: 300,
        credentials: None,
        limits: Default::default(),
        sandbox: None,
        private_dirs: Vec::new(),
        keep_capabilities: None,
        cgroup_procs: Vec::new(),
        end_yields: false,
        action: Action::Http(call),
    }
}

fn call(method: &str, url: String, request_type: HttpRequestType) -> HttpCall {
    HttpCall {
        method: method.into(),
        url,
        request_type,
        headers: vec![],
        secret: None,
        sign_header: "x-svc-sign".into(),
        insecure: false,
        follow_redirects: false,
        max_body_bytes: 65536,
    }
}

fn hmac_hex(key: &str, data: &[u8]) -> String {
    let mut mac = <Hmac<Sha256>>::new_from_slice(key.as_bytes()).expect("key");
    mac.update(data);
    hex::encode(mac.finalize().into_bytes())
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn epoch_near_now(text: &str) -> u64 {
    let epoch: u64 = text.parse().expect("epoch is an integer");
    assert!(epoch.abs_diff(now()) <= 5, "epoch {epoch} not near now");
    epoch
}

fn http_response(messages: &[RunnerMessage]) -> (u16, u64, bool) {
    messages
        .iter()
        .find_map(|m| match m {
            RunnerMessage::HttpResponse {
                status,
                body_bytes,
                truncated,
            } => Some((*status, *body_bytes, *truncated)),
            _ => None,
        })
        .expect("an HttpResponse")
}

async fn run(request: ExecRequest) -> Vec<RunnerMessage> {
    let mut c = start().await;
    c.execute(request).await;
    let messages = c.until_finished().await;
    assert_eq!(c.exit_code().await, Some(0));
    messages
}

#[tokio::test]
async fn get_with_signed_query_and_custom_headers() {
    let (addr, server) = serve_once(
        "200 OK",
        "Set-Cookie: session=abc\r\nX-Api-Key: k\r\nX-Plain: visible\r\n",
        b"hello body".to_vec(),
    )
    .await;
    let mut c = call(
        "GET",
        format!("http://{addr}/hook?x=1&y=a%20b"),
        HttpRequestType::Query,
    );
    c.secret = Some(proto::redact::Secret::new("s3cret"));
    c.headers = vec![("X-Custom".into(), "v1".into())];
    let messages = run(http_request(c)).await;
    let seen = server.await.expect("server");
    assert_eq!(seen.method, "GET");
    let query = seen.target.strip_prefix("/hook?").expect("path and query");
    let epoch = epoch_near_now(
        query
            .strip_prefix("x=1&y=a%20b&_svc_epoch=")
            .expect("epoch appended"),
    );
    assert_eq!(
        seen.header("x-svc-sign"),
        Some(
            hmac_hex(
                "s3cret",
                format!("x=1&y=a%20b&_svc_epoch={epoch}").as_bytes()
            )
            .as_str()
        )
    );
    assert_eq!(seen.header("x-custom"), Some("v1"));
    assert!(seen.body.is_empty());

    let logs = logs(&messages);
    assert_eq!(logs[0], format!("GET http://{addr}/hook?{query}"));
    assert_eq!(logs[1], "HTTP/1.1 200 OK");
    assert!(
        logs.contains(&"set-cookie: [redacted]".to_string()),
        "{logs:?}"
    );
    assert!(
        logs.contains(&"x-api-key: [redacted]".to_string()),
        "{logs:?}"
    );
    assert!(logs.contains(&"x-plain: visible".to_string()), "{logs:?}");
    assert_eq!(output(&messages, OutputStream::Body), b"hello body");
    assert_eq!(http_response(&messages), (200, 10, false));
    assert_eq!(finished(&messages), (true, "HTTP 200 OK".into()));
}

#[tokio::test]
async fn post_form_body_is_signed() {
    let (addr, server) = serve_once("201 Created", "", Vec::new()).await;
    let mut c = call(
        "POST",
        format!("http://{addr}/f?keep=1"),
        HttpRequestType::Form,
    );
    c.secret = Some(proto::redact::Secret::new("k"));
    let messages = run(http_request(c)).await;
    let seen = server.await.expect("server");
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.target, "/f?keep=1");
    assert_eq!(
        seen.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let body = String::from_utf8(seen.body.clone()).expect("utf8");
    epoch_near_now(body.strip_prefix("_svc_epoch=").expect("form body"));
    assert_eq!(
        seen.header("x-svc-sign"),
        Some(hmac_hex("k", &seen.body).as_str())
    );
    assert_eq!(finished(&messages), (true, "HTTP 201 Created".into()));
}

#[tokio::test]
async fn put_json_body_without_secret_is_not_signed() {
    let (addr, server) = serve_once("204 No Content", "", Vec::new()).await;
    let c = call("PUT", format!("http://{addr}/j"), HttpRequestType::Json);
    let messages = run(http_request(c)).await;
    let seen = server.await.expect("server");
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.target, "/j");
    assert_eq!(seen.header("content-type"), Some("application/json"));
    let json: serde_json::Value = serde_json::from_slice(&seen.body).expect("json");
    let epoch = json["_svc_epoch"].as_u64().expect("integer epoch");
    epoch_near_now(&epoch.to_string());
    assert_eq!(
        seen.body,
        format!("{{\"_svc_epoch\":{epoch}}}").into_bytes()
    );
    assert_eq!(seen.header("x-svc-sign"), None);
    assert_eq!(http_response(&messages), (204, 0, false));
    assert!(finished(&messages).0);
}

#[tokio::test]
async fn delete_with_json_type_sends_a_query() {
    let (addr, server) = serve_once("200 OK", "", Vec::new()).await;
    let c = call("DELETE", format!("http://{addr}/d"), HttpRequestType::Json);
    run(http_request(c)).await;
    let seen = server.await.expect("server");
    assert_eq!(seen.method, "DELETE");
    epoch_near_now(seen.target.strip_prefix("/d?_svc_epoch=").expect("query"));
    assert!(seen.body.is_empty());
    assert_eq!(seen.header("content-type"), None);
}

#[tokio::test]
async fn body_is_cut_at_max_body_bytes() {
    let (addr, _server) = serve_once("200 OK", "", vec![b'x'; 100_000]).await;
    let mut c = call("GET", format!("http://{addr}/big"), HttpRequestType::Query);
    c.max_body_bytes = 100;
    let messages = run(http_request(c)).await;
    assert_eq!(output(&messages, OutputStream::Body), vec![b'x'; 100]);
    let (status, received, truncated) = http_response(&messages);
    assert_eq!(status, 200);
    assert!(truncated);
    assert!(received > 100, "{received}");
    assert!(finished(&messages).0);
}

#[tokio::test]
async fn a_non_2xx_status_fails_the_run() {
    let (addr, _server) = serve_once("500 Internal Server Error", "", b"oops".to_vec()).await;
    let c = call("POST", format!("http://{addr}/e"), HttpRequestType::Json);
    let messages = run(http_request(c)).await;
    assert_eq!(output(&messages, OutputStream::Body), b"oops");
    assert_eq!(http_response(&messages), (500, 4, false));
    assert_eq!(
        finished(&messages),
        (false, "HTTP 500 Internal Server Error".into())
    );
}

#[tokio::test]
async fn a_refused_connection_fails_the_run_with_a_clear_log_line() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let c = call("GET", format!("http://{addr}/"), HttpRequestType::Query);
    let messages = run(http_request(c)).await;
    let logs = logs(&messages);
    assert!(
        logs.iter()
            .any(|l| l.starts_with("request failed:") && l.contains("Connection refused")),
        "{logs:?}"
    );
    let (success, summary) = finished(&messages);
    assert!(!success);
    assert!(summary.starts_with("connection failed:"), "{summary}");
    assert!(
        !messages
            .iter()
            .any(|m| matches!(m, RunnerMessage::HttpResponse { .. }))
    );
}

#[tokio::test]
async fn an_unsupported_method_is_an_error() {
    let mut c = start().await;
    c.execute(http_request(call(
        "PATCH",
        "http://127.0.0.1:1/".into(),
        HttpRequestType::Query,
    )))
    .await;
    let messages = c.until_finished().await;
    assert!(
        matches!(messages.last(), Some(RunnerMessage::Error { message }) if message.contains("PATCH")),
        "{messages:?}"
    );
    assert_eq!(c.exit_code().await, Some(1));
}

/// A server that accepts connections and never answers.
async fn silent_server() -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (addr, task)
}

#[tokio::test]
async fn a_silent_server_hits_the_time_limit() {
    let (addr, server) = silent_server().await;
    let mut request = http_request(call(
        "GET",
        format!("http://{addr}/"),
        HttpRequestType::Query,
    ));
    request.timeout_ms = Some(300);
    let messages = run(request).await;
    assert_eq!(finished(&messages), (false, "timed out after 0.3s".into()));
    server.abort();
}

#[tokio::test]
async fn cancel_abandons_the_request() {
    let (addr, server) = silent_server().await;
    let mut c = start().await;
    c.execute(http_request(call(
        "GET",
        format!("http://{addr}/"),
        HttpRequestType::Query,
    )))
    .await;
    c.until(|m| matches!(m, RunnerMessage::Log { .. })).await;
    c.send(proto::ControllerMessage::Cancel {
        reason: "stop it".into(),
    })
    .await;
    let messages = c.until_finished().await;
    assert_eq!(finished(&messages), (false, "cancelled: stop it".into()));
    assert_eq!(c.exit_code().await, Some(0));
    server.abort();
}

#[tokio::test]
async fn https_client_builds_and_reports_a_refused_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let mut c = call("GET", format!("https://{addr}/"), HttpRequestType::Query);
    c.insecure = true;
    let messages = run(http_request(c)).await;
    let (success, summary) = finished(&messages);
    assert!(!success);
    assert!(summary.starts_with("connection failed:"), "{summary}");
}

/// Two listeners on loopback, the second on another port (another origin).
async fn two_origins() -> (TcpListener, SocketAddr, TcpListener, SocketAddr) {
    let first = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let second = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let (a, b) = (
        first.local_addr().expect("addr"),
        second.local_addr().expect("addr"),
    );
    (first, a, second, b)
}

#[tokio::test]
async fn a_redirect_is_not_followed_by_default_and_fails_the_run() {
    let (first, addr, _second, _) = two_origins().await;
    let (_stop, stop_rx) = tokio::sync::oneshot::channel();
    let server = serve_script(
        first,
        vec![(
            "302 Found",
            format!("Location: http://{addr}/next?token=t0ps3cret&page=2\r\n"),
        )],
        stop_rx,
    );
    let mut c = call(
        "GET",
        format!("http://{addr}/start"),
        HttpRequestType::Query,
    );
    c.headers = vec![("X-Api-Key".into(), "credential".into())];
    let messages = run(http_request(c)).await;
    let seen = server.await.expect("server");
    assert_eq!(seen.len(), 1, "only the configured URL is asked: {seen:?}");
    let logs = logs(&messages);
    let target = format!("http://{addr}/next?token=[redacted]&page=2");
    assert!(
        logs.contains(&format!(
            "redirect to {target} not followed: http_follow_redirects is off"
        )),
        "{logs:?}"
    );
    assert!(
        logs.iter().all(|line| !line.contains("t0ps3cret")),
        "the Location's token is hidden: {logs:?}"
    );
    assert_eq!(
        finished(&messages),
        (
            false,
            format!("HTTP 302: redirect to {target} not followed")
        )
    );
}

#[tokio::test]
async fn redirects_are_followed_on_the_same_origin_without_a_referer() {
    let (first, addr, _second, _) = two_origins().await;
    let (_stop, stop_rx) = tokio::sync::oneshot::channel();
    let server = serve_script(
        first,
        vec![
            ("301 Moved Permanently", "Location: /moved\r\n".to_string()),
            ("200 OK", String::new()),
        ],
        stop_rx,
    );
    let mut c = call(
        "GET",
        format!("http://{addr}/start"),
        HttpRequestType::Query,
    );
    c.follow_redirects = true;
    c.headers = vec![("X-Api-Key".into(), "credential".into())];
    let messages = run(http_request(c)).await;
    let seen = server.await.expect("server");
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[1].target.starts_with("/moved"), "{seen:?}");
    assert_eq!(seen[1].header("x-api-key"), Some("credential"));
    assert_eq!(seen[1].header("referer"), None, "no Referer: {seen:?}");
    assert_eq!(finished(&messages), (true, "HTTP 200 OK".into()));
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_never_followed() {
    let (first, addr, second, other) = two_origins().await;
    let (_stop, stop_rx) = tokio::sync::oneshot::channel();
    let server = serve_script(
        first,
        vec![(
            "307 Temporary Redirect",
            format!("Location: http://{other}/steal\r\n"),
        )],
        stop_rx,
    );
    let (stop_other, stop_other_rx) = tokio::sync::oneshot::channel();
    let elsewhere = serve_script(second, vec![("200 OK", String::new())], stop_other_rx);
    let mut c = call(
        "GET",
        format!("http://{addr}/start"),
        HttpRequestType::Query,
    );
    c.follow_redirects = true;
    c.headers = vec![("X-Api-Key".into(), "credential".into())];
    let messages = run(http_request(c)).await;
    assert_eq!(server.await.expect("server").len(), 1);
    let _ = stop_other.send(());
    let reached = elsewhere.await.expect("other server");
    assert!(reached.is_empty(), "the other origin got {reached:?}");
    let logs = logs(&messages);
    assert!(
        logs.contains(&format!(
            "redirect to http://{other}/steal not followed: it leaves the origin of http_url"
        )),
        "{logs:?}"
    );
    assert!(!finished(&messages).0);
}
