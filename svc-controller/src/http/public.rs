//! The public directory (`dir_public`) served under `/`.
//!
//! PLACEHOLDER: being written (issue 3, item 6).

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState};

pub(super) async fn serve(State(_state): State<AppState>) -> Response {
    ApiError::not_found("no such resource").into_response()
}
