//! The HTTP API's body limits over real HTTP: a body over the limit of its route, with a
//! length or streamed in chunks, gets 413 in the `{code, message, data}` wrapper, answered
//! while the client still sends; a large body under the limit reaches the job whole.
//!
//! Every test starts its own controller on its own temporary `dir_base`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use svc_tests::raw_http::{RawResponse, parse_response};
use svc_tests::{TestService, WAIT, hmac_sha256_hex, job_section};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::api_common::request;

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
