//! The one API error type. It becomes the `{code, message, data}` wrapper; internal
//! details are logged, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::response::wrapper;
use crate::engine::EngineError;

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
            EngineError::NotRunning => StatusCode::CONFLICT,
            EngineError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        wrapper(self.status, &self.message, serde_json::Value::Null)
    }
}
