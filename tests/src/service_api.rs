//! [`TestService`]'s client side: its HTTP API as the tests call it (signed where the
//! service wants it), and its logs and state files as the tests read them.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use serde_json::Value;

use crate::logs::LogFile;
use crate::service::{BULK_TIMEOUT, REQUEST_TIMEOUT, TestService};
use crate::sign::hmac_sha256_hex;
use crate::wait::{wait_for, wait_until};

/// A response of the HTTP API.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    /// HTTP status.
    pub status: u16,
    /// The body parsed as JSON (`Value::Null` when it is not JSON; see `raw`).
    pub body: Value,
    /// The body as text.
    pub raw: String,
}

impl ApiResponse {
    /// The `data` member of the wrapper.
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    /// The `code` member of the wrapper.
    pub fn code(&self) -> Option<u64> {
        self.body["code"].as_u64()
    }

    /// The `message` member of the wrapper.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }

    /// The `name` member of an error's wrapper (`ERR_...`); empty when there is none.
    pub fn name(&self) -> &str {
        self.body["name"].as_str().unwrap_or_default()
    }

    /// Panics, showing the body, unless the HTTP status is `status`, the wrapper's `code`
    /// equals it and an error carries a name. Returns `self` for chaining.
    #[track_caller]
    pub fn assert_status(&self, status: u16) -> &Self {
        assert_eq!(
            self.status, status,
            "expected HTTP {status}, got {}: {}",
            self.status, self.raw
        );
        assert_eq!(
            self.code(),
            Some(u64::from(status)),
            "the wrapper's code must equal the HTTP status: {}",
            self.raw
        );
        if status >= 400 {
            assert!(
                self.name().starts_with("ERR_"),
                "an error has a name: {}",
                self.raw
            );
        }
        self
    }
}

/// Sends a trigger with `send` until it is accepted (200), for at most `timeout`, again
/// while it is refused with 429: a run that took its job's queued trigger frees the
/// queue slot once its begin is durable, a moment after its log appears (until then the
/// slot is the taken trigger's only durable record). Any other status fails the test.
pub async fn send_until_queued(
    timeout: Duration,
    what: &str,
    mut send: impl AsyncFnMut() -> ApiResponse,
) {
    wait_until(timeout, what, async || {
        let answer = send().await;
        if answer.status != 429 {
            answer.assert_status(200);
        }
        answer.status == 200
    })
    .await;
}

impl TestService {
    // ----- HTTP --------------------------------------------------------------------------

    /// `GET <path_and_query>`; an error only when the request itself fails.
    pub async fn try_get(&self, path_and_query: &str) -> anyhow::Result<ApiResponse> {
        self.try_get_within(path_and_query, REQUEST_TIMEOUT).await
    }

    /// `GET <path_and_query>` with `timeout` for the whole answer, for a bulk transfer
    /// (a whole log) whose time grows with its size and the machine's load.
    pub async fn try_get_within(
        &self,
        path_and_query: &str,
        timeout: Duration,
    ) -> anyhow::Result<ApiResponse> {
        let response = self
            .client
            .get(format!("{}{path_and_query}", self.base_url()))
            .timeout(timeout)
            .send()
            .await
            .with_context(|| format!("GET {path_and_query}"))?;
        to_api_response(response).await
    }

    /// `GET <path_and_query>`; panics when the request fails.
    pub async fn get(&self, path_and_query: &str) -> ApiResponse {
        self.try_get(path_and_query)
            .await
            .unwrap_or_else(|err| panic!("{err:#}"))
    }

    /// `POST <path>` with `body` and `headers`; panics when the request fails.
    pub async fn post(&self, path: &str, body: &[u8], headers: &[(&str, &str)]) -> ApiResponse {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base_url()))
            .body(body.to_vec());
        for (key, value) in headers {
            request = request.header(*key, *value);
        }
        let result = async {
            let response = request
                .send()
                .await
                .with_context(|| format!("POST {path}"))?;
            to_api_response(response).await
        }
        .await;
        result.unwrap_or_else(|err| panic!("{err:#}"))
    }

    /// The `data` of `GET /svc/api/environment`, or an error (request failed, status not
    /// 200, or no object in `data`).
    pub async fn try_environment(&self) -> anyhow::Result<Value> {
        let response = self.try_get("/svc/api/environment").await?;
        if response.status != 200 {
            bail!("environment answered {}: {}", response.status, response.raw);
        }
        let data = response.data();
        if !data.is_object() {
            bail!("environment data is not an object: {}", response.raw);
        }
        Ok(data.clone())
    }

    /// The `data` of `GET /svc/api/environment` (the Environment); panics on failure.
    pub async fn environment(&self) -> Value {
        self.try_environment()
            .await
            .unwrap_or_else(|err| panic!("{err:#}"))
    }

    /// The Job named `name` in the Environment; panics when there is none.
    pub async fn job(&self, name: &str) -> Value {
        let environment = self.environment().await;
        match environment["jobs"].get(name) {
            Some(job) => job.clone(),
            None => panic!("no job named {name:?} in the environment: {environment}"),
        }
    }

    /// `status` of the Job named `name`.
    pub async fn job_status(&self, name: &str) -> String {
        self.job(name).await["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Triggers `POST /svc/api/job/run/<path>` (a leading `/` of `path` is dropped) with
    /// `body` and `headers`, adding `x-svc-sign` = HMAC-SHA-256 of the body with the main
    /// secret unless `headers` already carries `x-svc-sign`.
    pub async fn trigger(&self, path: &str, body: &[u8], headers: &[(&str, &str)]) -> ApiResponse {
        let has_sign = headers
            .iter()
            .any(|(key, _)| key.eq_ignore_ascii_case("x-svc-sign"));
        if has_sign {
            return self.trigger_unsigned(path, body, headers).await;
        }
        let signature = hmac_sha256_hex(self.secret(), body);
        let mut all = headers.to_vec();
        all.push(("x-svc-sign", &signature));
        self.trigger_unsigned(path, body, &all).await
    }

    /// Triggers with `x-svc-sign` computed with `secret` (a job's own secret).
    pub async fn trigger_with_secret(&self, path: &str, body: &[u8], secret: &str) -> ApiResponse {
        let signature = hmac_sha256_hex(secret, body);
        self.trigger_unsigned(path, body, &[("x-svc-sign", &signature)])
            .await
    }

    /// Triggers without adding any signature.
    pub async fn trigger_unsigned(
        &self,
        path: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> ApiResponse {
        let path = path.trim_start_matches('/');
        self.post(&format!("/svc/api/job/run/{path}"), body, headers)
            .await
    }

    /// The signed form body and signature of a pause or resume request for `id`.
    pub fn job_exec_form(&self, id: &str) -> (String, String) {
        let epoch = crate::fresh_epoch();
        let body = format!("_svc_epoch={epoch}&id={id}");
        let signature = hmac_sha256_hex(self.secret(), &body);
        (body, signature)
    }

    /// `POST /svc/api/job_exec/pause` for job `id`, signed with the main secret.
    pub async fn pause(&self, id: &str) -> ApiResponse {
        self.job_exec("pause", id).await
    }

    /// `POST /svc/api/job_exec/resume` for job `id`, signed with the main secret.
    pub async fn resume(&self, id: &str) -> ApiResponse {
        self.job_exec("resume", id).await
    }

    /// `POST /svc/api/job_exec/trigger` (run now) for job `id`, signed with the main
    /// secret.
    pub async fn run_now(&self, id: &str) -> ApiResponse {
        self.job_exec("trigger", id).await
    }

    /// `POST /svc/api/job_http/trigger?<query>` (run now of a JobHttp), the query
    /// signed with the main secret.
    pub async fn job_http_trigger(&self, query: &str) -> ApiResponse {
        let signature = hmac_sha256_hex(self.secret(), query);
        self.post(
            &format!("/svc/api/job_http/trigger?{query}"),
            b"",
            &[("X-Svc-Sign", signature.as_str())],
        )
        .await
    }

    /// `POST /svc/api/job_exec/cancel` for job `id`, signed with the main secret.
    pub async fn cancel(&self, id: &str) -> ApiResponse {
        self.job_exec("cancel", id).await
    }

    /// `GET /svc/api/<kind>/runs?id=<id>` and `query` (`&limit=2`): the run history of
    /// a Job (`kind` = `job_exec`) or JobHttp (`job_http`).
    pub async fn runs(&self, kind: &str, id: &str, query: &str) -> ApiResponse {
        self.get(&format!("/svc/api/{kind}/runs?id={id}{query}"))
            .await
    }

    async fn job_exec(&self, action: &str, id: &str) -> ApiResponse {
        let (body, signature) = self.job_exec_form(id);
        self.post(
            &format!("/svc/api/job_exec/{action}"),
            body.as_bytes(),
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("X-Svc-Sign", &signature),
            ],
        )
        .await
    }

    /// `GET /svc/api/job_exec/log?id=<id>&counter=<counter>`: a whole log, up to
    /// `log_max_size` (base64 in JSON), so given [`BULK_TIMEOUT`].
    pub async fn log(&self, id: &str, counter: u64) -> ApiResponse {
        let path = format!("/svc/api/job_exec/log?id={id}&counter={counter}");
        self.try_get_within(&path, BULK_TIMEOUT)
            .await
            .unwrap_or_else(|err| panic!("{err:#}"))
    }

    /// The decoded `content` of [`TestService::log`]; panics unless it answers 200.
    pub async fn log_content(&self, id: &str, counter: u64) -> String {
        let response = self.log(id, counter).await;
        response.assert_status(200);
        let content = response.data()["content"]
            .as_str()
            .unwrap_or_else(|| panic!("JobLog without a content string: {}", response.raw));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(content)
            .unwrap_or_else(|err| panic!("JobLog content is not base64 ({err}): {content}"));
        String::from_utf8_lossy(&bytes).into_owned()
    }

    // ----- files -------------------------------------------------------------------------

    /// Log files of `kind` (`job` or `job_http`) `id` on disk, sorted by counter.
    pub fn log_files(&self, kind: &str, id: &str) -> Vec<LogFile> {
        let dir = self.log_dir(kind, id);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut files: Vec<LogFile> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                LogFile::from_name(&dir, id, name.to_str()?)
            })
            .collect();
        files.sort_by(|a, b| a.counter.cmp(&b.counter).then(a.status.cmp(&b.status)));
        files
    }

    /// Log files of job `id`, sorted by counter.
    pub fn job_logs(&self, id: &str) -> Vec<LogFile> {
        self.log_files("job", id)
    }

    /// The log file of run `counter` of job `id`, if any.
    pub fn job_log(&self, id: &str, counter: u64) -> Option<LogFile> {
        self.job_logs(id)
            .into_iter()
            .find(|file| file.counter == counter)
    }

    /// Waits (at most `timeout`) until the log of run `counter` of job `id` has a final
    /// status (not `started`), and returns it.
    pub async fn wait_run_finished(&self, id: &str, counter: u64, timeout: Duration) -> LogFile {
        wait_for(
            timeout,
            &format!("run {counter} of job {id} finished (log files on disk)"),
            async || {
                self.job_log(id, counter)
                    .filter(|log| log.status != "started")
            },
        )
        .await
    }

    /// Waits (at most `timeout`) until run `counter` of job `id` has a `started` log.
    pub async fn wait_run_started(&self, id: &str, counter: u64, timeout: Duration) -> LogFile {
        wait_for(
            timeout,
            &format!("run {counter} of job {id} started (log file on disk)"),
            async || {
                self.job_log(id, counter)
                    .filter(|log| log.status == "started")
            },
        )
        .await
    }

    /// Waits (at most `timeout`) until the Job named `name` has `status`.
    pub async fn wait_job_status(&self, name: &str, status: &str, timeout: Duration) {
        wait_until(
            timeout,
            &format!("job {name:?} has status {status:?}"),
            async || {
                self.try_environment()
                    .await
                    .ok()
                    .and_then(|env| env["jobs"][name]["status"].as_str().map(str::to_owned))
                    .is_some_and(|s| s == status)
            },
        )
        .await
    }

    /// The state file of job `id` as a `key -> value` map; `None` when it does not exist.
    pub fn state_file(&self, id: &str) -> Option<BTreeMap<String, String>> {
        let text = std::fs::read_to_string(self.state_path(id)).ok()?;
        Some(
            text.lines()
                .filter_map(|line| {
                    let (key, value) = line.split_once('=')?;
                    Some((key.trim().to_owned(), value.trim().to_owned()))
                })
                .collect(),
        )
    }
}

async fn to_api_response(response: reqwest::Response) -> anyhow::Result<ApiResponse> {
    let status = response.status().as_u16();
    let raw = response.text().await.context("read the response body")?;
    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
    Ok(ApiResponse { status, body, raw })
}
