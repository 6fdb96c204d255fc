//! The one API error type. It becomes the `{code, message, data, name}` wrapper; internal
//! details are logged, never sent.

use std::sync::LazyLock;

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::read_timeout::BodyReadTimedOut;
use super::response::named_wrapper;
use crate::access::auth::AuthError;
use crate::engine::EngineError;

/// Machine-readable error names, sent as `name`: upstream's where upstream has one (so
/// its clients can match them), in the same style otherwise.
pub mod names {
    /// 400: a job ID that is empty, malformed, or (for a JobHttp) unknown.
    pub const INVALID_JOB_ID: &str = "ERR_INVALID_JOB_ID";
    /// 404: no job has this ID or trigger path.
    pub const JOB_NOT_FOUND: &str = "ERR_JOB_NOT_FOUND";
    /// 412: the job is paused.
    pub const JOB_PAUSED: &str = "ERR_JOB_PAUSED";
    /// 429: the job is running and its one-slot queue is taken.
    pub const JOB_ALREADY_RUN: &str = "ERR_JOB_ALREADY_RUN";
    /// 404: no log with this counter.
    pub const LOG_NOT_FOUND: &str = "ERR_LOG_NOT_FOUND";
    /// 503: cluster mode's database cannot be reached, so nothing can be queued.
    pub const CLUSTER_UNAVAILABLE: &str = "ERR_CLUSTER_UNAVAILABLE";
}

/// `Retry-After` of a 503 whose database is unreachable: an outage of the database
/// (a restart, a failover) lasts seconds, and each attempt while it lasts holds the
/// request for the store's connection wait, so clients are asked to wait longer than
/// for the service's own passing conditions.
const CLUSTER_RETRY_AFTER: &str = "5";

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// See [`names`]; by default the status's own ([`name_of_status`]).
    pub name: &'static str,
    pub message: String,
}

/// The name of an error that has none more precise: its status, as upstream's names read.
pub fn name_of_status(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "ERR_BAD_REQUEST",
        StatusCode::UNAUTHORIZED => "ERR_UNAUTHORIZED",
        StatusCode::FORBIDDEN => "ERR_FORBIDDEN",
        StatusCode::NOT_FOUND => "ERR_NOT_FOUND",
        StatusCode::METHOD_NOT_ALLOWED => "ERR_METHOD_NOT_ALLOWED",
        StatusCode::REQUEST_TIMEOUT => "ERR_REQUEST_TIMEOUT",
        StatusCode::PRECONDITION_FAILED => "ERR_PRECONDITION_FAILED",
        StatusCode::PAYLOAD_TOO_LARGE => "ERR_BODY_TOO_LARGE",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "ERR_UNSUPPORTED_MEDIA_TYPE",
        StatusCode::MISDIRECTED_REQUEST => "ERR_MISDIRECTED_REQUEST",
        StatusCode::TOO_MANY_REQUESTS => "ERR_TOO_MANY_REQUESTS",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "ERR_HEADERS_TOO_LARGE",
        StatusCode::SERVICE_UNAVAILABLE => "ERR_UNAVAILABLE",
        status if status.is_server_error() => "ERR_INTERNAL",
        _ => "ERR_REQUEST",
    }
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            name: name_of_status(status),
            message: message.into(),
        }
    }
    /// The same error under a more precise name (see [`names`]).
    pub fn named(self, name: &'static str) -> ApiError {
        ApiError { name, ..self }
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, message)
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }
    /// 404 to a webhook path no job has (one of the [`COMMON`] refusals).
    pub fn unknown_path() -> ApiError {
        ApiError::not_found("no job has this path").named(names::JOB_NOT_FOUND)
    }
    /// 404 to a log counter the job has no log for (any more).
    pub fn log_not_found() -> ApiError {
        ApiError::not_found("log not found").named(names::LOG_NOT_FOUND)
    }
    /// A replay check that could not be made (`what` it was for): 503, retry later, while
    /// the cluster's database is away; else an internal error.
    pub fn replay(fault: crate::access::replay::ReplayFault, what: &str) -> ApiError {
        match fault {
            crate::access::replay::ReplayFault::Unavailable => {
                ApiError::from(crate::engine::EngineError::Unavailable)
            }
            crate::access::replay::ReplayFault::Failed(err) => ApiError::internal(what, err),
        }
    }

    /// A failure inside the service: logged in full, answered with a generic message.
    pub fn internal(context: &str, detail: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %detail, "{context}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> ApiError {
        let message = err.to_string();
        match err {
            EngineError::NotFound => ApiError::not_found(message).named(names::JOB_NOT_FOUND),
            EngineError::Paused => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, message).named(names::JOB_PAUSED)
            }
            EngineError::Busy => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, message).named(names::JOB_ALREADY_RUN)
            }
            EngineError::Unreadable => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message),
            EngineError::ShuttingDown | EngineError::NotSaved | EngineError::DiskFull(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
            }
            EngineError::Unavailable => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
                .named(names::CLUSTER_UNAVAILABLE),
        }
    }
}

impl ApiError {
    /// The 408 of a body that the client did not send within the body timeouts, when
    /// `err` (or an error it came from) is that timeout.
    pub(super) fn body_timed_out(err: &(dyn std::error::Error + 'static)) -> Option<ApiError> {
        let mut source = Some(err);
        while let Some(cause) = source {
            if cause.is::<BodyReadTimedOut>() {
                return Some(ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body was not received in time (http_body_timeout)",
                ));
            }
            source = cause.source();
        }
        None
    }
}

impl From<axum::extract::rejection::BytesRejection> for ApiError {
    /// A body that could not be read: 408 when the client did not send it within the
    /// body timeouts, else the extractor's own status (413 for a body over the limit,
    /// 400 otherwise) and text.
    fn from(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
        if let Some(timed_out) = ApiError::body_timed_out(&rejection) {
            return timed_out;
        }
        ApiError::new(rejection.status(), rejection.body_text())
    }
}

/// A refusal answered often under load, with its body serialised once.
struct Common {
    status: StatusCode,
    name: &'static str,
    message: String,
    body: &'static [u8],
}

/// The refusals a flood of webhooks gets: a forged signature, a busy or paused job, an
/// unknown path. Their wrapped bodies are serialised once, by the same code as any other
/// (the messages come from the errors' own texts, so they cannot drift apart).
static COMMON: LazyLock<Vec<Common>> = LazyLock::new(|| {
    [
        ApiError::unauthorized(AuthError::Mismatch.to_string()),
        ApiError::from(EngineError::Busy),
        ApiError::from(EngineError::Paused),
        ApiError::unknown_path(),
    ]
    .into_iter()
    .filter_map(
        |ApiError {
             status,
             name,
             message,
         }| {
            let body = serialise(status, name, &message)?;
            Some(Common {
                status,
                name,
                message,
                // Once per process, a few dozen bytes each: a static body is sent without
                // the reference count a shared `Bytes` would update on every answer.
                body: Box::leak(body.into_boxed_slice()),
            })
        },
    )
    .collect()
});

/// The wrapped body of an error, as [`named_wrapper`] writes it.
fn serialise(status: StatusCode, name: &str, message: &str) -> Option<Vec<u8>> {
    let null = serde_json::Value::Null;
    serde_json::to_vec(&super::response::Wrapper {
        code: status.as_u16(),
        data: &null,
        message,
        name: Some(name),
    })
    .ok()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(common) = COMMON
            .iter()
            .find(|c| c.status == self.status && c.name == self.name && c.message == self.message)
        {
            return (
                self.status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                Bytes::from_static(common.body),
            )
                .into_response();
        }
        let null = serde_json::Value::Null;
        let mut response = named_wrapper(self.status, Some(self.name), &self.message, &null);
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            // Every 503 is a passing condition (stopping, a full disk, bodies in flight,
            // the cluster's database away).
            let after = if self.name == names::CLUSTER_UNAVAILABLE {
                CLUSTER_RETRY_AFTER
            } else {
                "1"
            };
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static(after));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parts(response: Response) -> (StatusCode, Vec<(String, Vec<u8>)>, Vec<u8>) {
        let status = response.status();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
            .collect();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, headers, body.to_vec())
    }

    /// A pre-serialised refusal is the very answer the wrapper would have built.
    #[tokio::test]
    async fn common_refusals_are_answered_as_any_other_error() {
        assert_eq!(COMMON.len(), 4);
        for common in COMMON.iter() {
            let error = ApiError::new(common.status, common.message.clone()).named(common.name);
            let fast = error.into_response();
            let null = serde_json::Value::Null;
            let built = named_wrapper(common.status, Some(common.name), &common.message, &null);
            assert_eq!(parts(fast).await, parts(built).await, "{}", common.message);
        }
        // The same message with another status is not one of them.
        let other = ApiError::new(StatusCode::FORBIDDEN, AuthError::Mismatch.to_string());
        let (status, _, body) = parts(other.into_response()).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"code":403,"data":null,"message":"signature does not match","name":"ERR_FORBIDDEN"}"#
        );
    }

    #[tokio::test]
    async fn engine_refusals_keep_their_status_and_text() {
        let (status, _, body) = parts(ApiError::from(EngineError::Busy).into_response()).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"code":429,"data":null,"message":"job is running and a run is already queued","name":"ERR_JOB_ALREADY_RUN"}"#
        );
    }

    fn retry_after(headers: &[(String, Vec<u8>)]) -> Option<&[u8]> {
        headers
            .iter()
            .find(|(name, _)| name == header::RETRY_AFTER.as_str())
            .map(|(_, value)| value.as_slice())
    }

    #[tokio::test]
    async fn an_unreachable_cluster_database_is_a_503_to_retry_after_5_s() {
        let (status, headers, body) =
            parts(ApiError::from(EngineError::Unavailable).into_response()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after(&headers), Some(&b"5"[..]));
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"code":503,"data":null,"message":"the cluster database is unreachable; try again later","name":"ERR_CLUSTER_UNAVAILABLE"}"#
        );
        // The service's own passing conditions keep their short wait.
        let (_, headers, _) =
            parts(ApiError::from(EngineError::ShuttingDown).into_response()).await;
        assert_eq!(retry_after(&headers), Some(&b"1"[..]));
    }
}
