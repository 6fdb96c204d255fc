//! Helpers of the HTTP API tests (`api.rs`, `api_job_http.rs`, `api_limits.rs`): a
//! client that shows the answer as sent (status, headers, the undecoded body), the
//! `{code, message, data}` wrapper checked, and requests signed as the API wants them.

use std::io::Read as _;
use std::time::Duration;

use serde_json::{Value, json};
use svc_tests::{TestService, hmac_sha256_hex};

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
pub(crate) struct Plain {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) content_encoding: Option<String>,
    pub(crate) body: Vec<u8>,
}

impl Plain {
    /// The body, gunzipped when `content-encoding: gzip`, parsed as JSON.
    pub(crate) fn json(&self) -> Value {
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
    pub(crate) fn wrapper(&self, status: u16) -> Value {
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
pub(crate) async fn get_plain(svc: &TestService, path: &str, gzip: bool) -> Plain {
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
pub(crate) async fn request(
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

pub(crate) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `POST path` with a form `body`, signed with `signature` when given.
pub(crate) async fn post_form(
    svc: &TestService,
    path: &str,
    body: &str,
    signature: Option<&str>,
) -> Plain {
    let mut headers = vec![("content-type", "application/x-www-form-urlencoded")];
    if let Some(signature) = signature {
        headers.push(("X-Svc-Sign", signature));
    }
    request(svc, "POST", path, &headers, body.to_owned()).await
}

/// `POST path` with the form `_svc_epoch=<epoch>&id=<id>` correctly signed.
pub(crate) async fn signed_form(svc: &TestService, path: &str, id: &str, epoch: i64) -> Plain {
    let body = format!("_svc_epoch={epoch}&id={id}");
    let signature = hmac_sha256_hex(svc.secret(), &body);
    post_form(svc, path, &body, Some(&signature)).await
}

/// `POST path?query` signed the JobHttp way (HMAC of the raw query).
pub(crate) async fn signed_query(svc: &TestService, path: &str, query: &str) -> Plain {
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
