//! Endpoint 9: a signed POST to a job's path starts a run in the background.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::{ApiError, AppState, ok};
use crate::auth;
use crate::config::AuthKind;
use crate::engine::{Kind, Trigger, TriggerSource};

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

pub(super) async fn trigger(
    State(state): State<AppState>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let path = format!("/{}", path.trim_start_matches('/'));
    let id = state.engine.job_id_for_path(&path).ok_or_else(|| {
        crate::metrics::webhook_rejected("unknown_path");
        ApiError::not_found("no job has this path")
    })?;
    let job = state
        .engine
        .job_config(&id)
        .ok_or_else(|| ApiError::not_found("no job has this path"))?;
    let secret = job.secret.as_deref().unwrap_or(&state.secret).as_bytes();
    let verified = match job.auth_kind {
        AuthKind::HmacSha256 => auth::verify_hmac_sha256(
            secret,
            &body,
            &job.header_sign,
            header(&headers, &job.header_sign),
        ),
        AuthKind::Codehost => auth::verify_codehost(
            secret,
            &body,
            header(&headers, "x-hub-signature-256"),
            header(&headers, "x-hub-signature"),
        ),
        AuthKind::Patchhost => Err(auth::AuthError::Missing("x-payload-signature".into())),
    };
    verified.map_err(|e| {
        crate::metrics::webhook_rejected("signature");
        tracing::info!(job = %id, reason = %e, "webhook refused");
        ApiError::unauthorized(e.to_string())
    })?;
    let event = header(&headers, "x-github-event")
        .or_else(|| header(&headers, "x-webhook-event"))
        .map(str::to_string);
    let trigger = Trigger {
        source: TriggerSource::Webhook,
        body: Some(body),
        event,
    };
    let accepted = state.engine.trigger(Kind::Job, &id, trigger).map_err(|e| {
        crate::metrics::webhook_rejected(match e {
            crate::engine::EngineError::Paused => "paused",
            crate::engine::EngineError::Busy => "busy",
            _ => "other",
        });
        e
    })?;
    Ok(ok(accepted))
}
