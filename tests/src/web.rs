//! Plain HTTP for the tests of login, sessions and rights: the users file, a client that
//! keeps no cookies and follows no redirects (so each test sees every `Set-Cookie` and
//! `303` itself), and answers read whole: status, headers, and the body as JSON.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// Writes `$dir_base/etc/svc/user.conf` with `text`, mode `mode`.
pub fn write_user_conf(dir_base: &Path, text: &str, mode: u32) {
    let dir = dir_base.join("etc/svc");
    std::fs::create_dir_all(&dir).expect("create etc/svc");
    let file = dir.join("user.conf");
    std::fs::write(&file, text).expect("write user.conf");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// An HTTP client that shows redirects instead of following them and keeps no cookies.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client")
}

/// One answer: status, headers and the body as JSON (`Null` when it is not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub raw: String,
}

impl Answer {
    /// A header's value, empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// Asserts the status.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "{}", self.raw);
        self
    }

    /// Asserts the status and the JSON wrapper's code and message.
    #[track_caller]
    pub fn expect_message(&self, status: u16, message: &str) -> &Self {
        self.expect(status);
        assert_eq!(self.body["code"], status, "{}", self.raw);
        assert_eq!(self.body["message"], message, "{}", self.raw);
        self
    }

    /// The wrapper's message.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }

    /// The wrapper's data.
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
}

/// Sends `request` and reads the whole answer.
pub async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let raw = response.text().await.expect("body");
    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
        raw,
    }
}
