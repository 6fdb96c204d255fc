//! The one API error type. It becomes the `{code, message, data}` wrapper; internal
//! details are logged, never sent.

use std::sync::LazyLock;

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::read_timeout::BodyReadTimedOut;
use super::response::wrapper_ref;
use crate::auth::AuthError;
use crate::engine::EngineError;

/// Message of the 404 answer to a webhook path no job has (one of the [`COMMON`]
/// refusals).
pub(super) const UNKNOWN_PATH: &str = "no job has this path";

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
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
    /// A failure inside the service: logged in full, answered with a generic message.
    pub fn internal(context: &str, detail: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %detail, "{context}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> ApiError {
        let status = match err {
            EngineError::NotFound => StatusCode::NOT_FOUND,
            EngineError::Paused => StatusCode::PRECONDITION_FAILED,
            EngineError::Busy => StatusCode::TOO_MANY_REQUESTS,
            EngineError::ShuttingDown | EngineError::NotSaved => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, err.to_string())
    }
}

impl From<axum::extract::rejection::BytesRejection> for ApiError {
    /// A body that could not be read: 408 when the client did not send it within the
    /// body timeouts, else the extractor's own status (413 for a body over the limit,
    /// 400 otherwise) and text.
    fn from(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
        while let Some(err) = source {
            if err.is::<BodyReadTimedOut>() {
                return ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body was not received in time (http_body_timeout)",
                );
            }
            source = err.source();
        }
        ApiError::new(rejection.status(), rejection.body_text())
    }
}

/// A refusal answered often under load, with its body serialised once.
struct Common {
    status: StatusCode,
    message: String,
    body: &'static [u8],
}

/// The refusals a flood of webhooks gets: a forged signature, a busy or paused job, an
/// unknown path. Their wrapped bodies are serialised once, by the same code as any other
/// (the messages come from the errors' own texts, so they cannot drift apart).
static COMMON: LazyLock<Vec<Common>> = LazyLock::new(|| {
    [
        (StatusCode::UNAUTHORIZED, AuthError::Mismatch.to_string()),
        (StatusCode::TOO_MANY_REQUESTS, EngineError::Busy.to_string()),
        (
            StatusCode::PRECONDITION_FAILED,
            EngineError::Paused.to_string(),
        ),
        (StatusCode::NOT_FOUND, UNKNOWN_PATH.to_string()),
    ]
    .into_iter()
    .filter_map(|(status, message)| {
        let body = serialise(status, &message)?;
        Some(Common {
            status,
            message,
            // Once per process, a few dozen bytes each: a static body is sent without
            // the reference count a shared `Bytes` would update on every answer.
            body: Box::leak(body.into_boxed_slice()),
        })
    })
    .collect()
});

/// The wrapped body of an error, as [`wrapper_ref`] writes it.
fn serialise(status: StatusCode, message: &str) -> Option<Vec<u8>> {
    let null = serde_json::Value::Null;
    serde_json::to_vec(&super::response::Wrapper {
        code: status.as_u16(),
        data: &null,
        message,
    })
    .ok()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(common) = COMMON
            .iter()
            .find(|c| c.status == self.status && c.message == self.message)
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
        let mut response = wrapper_ref(self.status, &self.message, &serde_json::Value::Null);
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            // Every 503 is a passing condition (stopping, a full disk, bodies in flight).
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
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
            let fast = ApiError::new(common.status, common.message.clone()).into_response();
            let built = wrapper_ref(common.status, &common.message, &serde_json::Value::Null);
            assert_eq!(parts(fast).await, parts(built).await, "{}", common.message);
        }
        // The same message with another status is not one of them.
        let other = ApiError::new(StatusCode::FORBIDDEN, AuthError::Mismatch.to_string());
        let (status, _, body) = parts(other.into_response()).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"code":403,"data":null,"message":"signature does not match"}"#
        );
    }

    #[tokio::test]
    async fn engine_refusals_keep_their_status_and_text() {
        let (status, _, body) = parts(ApiError::from(EngineError::Busy).into_response()).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"code":429,"data":null,"message":"job is running and a run is already queued"}"#
        );
    }
}
