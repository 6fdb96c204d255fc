//! The `{code, message, data}` wrapper every response uses.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Builds a wrapped response with `code` equal to the HTTP status.
pub fn wrapper(status: StatusCode, message: &str, data: serde_json::Value) -> Response {
    (
        status,
        Json(json!({ "code": status.as_u16(), "message": message, "data": data })),
    )
        .into_response()
}

/// A 200 answer carrying `data`.
pub fn ok(data: serde_json::Value) -> Response {
    wrapper(StatusCode::OK, "", data)
}
