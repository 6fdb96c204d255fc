//! The `{code, message, data}` wrapper every response uses; errors add `name`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The wrapper as it is serialised: borrowed, so that an answer is written straight into
/// the body without building a `serde_json::Value` map first. The fields are in the order
/// `serde_json`'s map (a `BTreeMap`) writes its keys in, so the bytes are those of
/// `json!({"code": .., "message": .., "data": ..})`, with `"name": ..` for an error.
#[derive(Serialize)]
pub(super) struct Wrapper<'a> {
    pub(super) code: u16,
    pub(super) data: &'a serde_json::Value,
    pub(super) message: &'a str,
    /// The machine-readable name of an error (upstream's, such as `ERR_JOB_PAUSED`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<&'a str>,
}

/// Builds a wrapped response with `code` equal to the HTTP status.
pub fn wrapper(status: StatusCode, message: &str, data: serde_json::Value) -> Response {
    wrapper_ref(status, message, &data)
}

/// [`wrapper`] with borrowed data.
pub(super) fn wrapper_ref(status: StatusCode, message: &str, data: &serde_json::Value) -> Response {
    named_wrapper(status, None, message, data)
}

/// [`wrapper`] with an error's name.
pub(super) fn named_wrapper(
    status: StatusCode,
    name: Option<&str>,
    message: &str,
    data: &serde_json::Value,
) -> Response {
    let body = Wrapper {
        code: status.as_u16(),
        data,
        message,
        name,
    };
    (status, Json(body)).into_response()
}

/// A 200 answer carrying `data`.
pub fn ok(data: serde_json::Value) -> Response {
    wrapper(StatusCode::OK, "", data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn body_of(response: Response) -> Vec<u8> {
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body")
            .to_vec()
    }

    /// The same bytes as the `json!` map the wrapper used to be built from.
    #[tokio::test]
    async fn bytes_are_those_of_the_json_map() {
        let cases = [
            (
                StatusCode::UNAUTHORIZED,
                "signature does not match",
                json!(null),
            ),
            (StatusCode::OK, "", json!({"b": [1, 2], "a": "x\"y\n"})),
            (StatusCode::TOO_MANY_REQUESTS, "ünïcode \u{1} \\", json!(17)),
        ];
        for (status, message, data) in cases {
            let expected = serde_json::to_vec(
                &json!({ "code": status.as_u16(), "message": message, "data": data.clone() }),
            )
            .expect("serialise");
            let response = wrapper(status, message, data);
            assert_eq!(response.status(), status);
            assert_eq!(
                response.headers()[axum::http::header::CONTENT_TYPE],
                "application/json"
            );
            assert_eq!(
                String::from_utf8_lossy(&body_of(response).await),
                String::from_utf8_lossy(&expected)
            );
        }
    }
}
