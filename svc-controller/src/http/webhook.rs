//! Endpoint 9: a signed POST to a job's path starts a run in the background.
//!
//! The flow: path → job (404), signature by the job's `auth_kind` (401), replay check
//! (codehost delivery IDs: a repeat answers 200 without running; patchhost nonces: a
//! repeat is 401), then the trigger (412 paused, 429 busy). A delivery ID or nonce is
//! recorded only once the signature is verified, and forgotten again when the trigger is
//! refused, so that a retry can run.
//!
//! Header values are read as raw bytes. No secret, expected signature or body is ever
//! logged or echoed.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState, ok, wrapper};
use crate::auth::{self, AuthError};
use crate::config::AuthKind;
use crate::engine::{EngineError, Kind, Trigger, TriggerSource};
use crate::replay::{MAX_VALUE_LEN, ReplayStores, Seen};

/// Header with GitHub's delivery ID.
const DELIVERY_HEADER: &str = "x-github-delivery";

/// Message of the 404 answer to a path no job has.
pub(super) const UNKNOWN_PATH: &str = "no job has this path";

/// Message of the 200 answer to a repeated delivery.
const DUPLICATE_DELIVERY: &str = "duplicate delivery: not run again";

/// The raw bytes of a header, if present.
fn header_bytes<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    headers.get(name).map(|v| v.as_bytes())
}

/// A header as text; bytes that are not UTF-8 become U+FFFD, which no hex signature
/// contains, so such a value is refused as malformed rather than as missing.
fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<Cow<'a, str>> {
    header_bytes(headers, name).map(String::from_utf8_lossy)
}

/// Which replay store a request is checked against, and the value it is keyed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplayKind {
    Delivery,
    Nonce,
}

impl ReplayKind {
    fn label(self) -> &'static str {
        match self {
            ReplayKind::Delivery => "delivery ID",
            ReplayKind::Nonce => "nonce",
        }
    }
}

fn store(stores: &ReplayStores, kind: ReplayKind) -> &crate::replay::ReplayStore {
    match kind {
        ReplayKind::Delivery => stores.deliveries(),
        ReplayKind::Nonce => stores.nonces(),
    }
}

/// Checks and records `value` on a blocking thread (the store fsyncs).
async fn check_and_record(
    stores: Arc<ReplayStores>,
    kind: ReplayKind,
    job: String,
    value: Vec<u8>,
) -> Result<Seen, ApiError> {
    let joined =
        tokio::task::spawn_blocking(move || store(&stores, kind).check_and_record(&job, &value))
            .await;
    match joined {
        Ok(Ok(seen)) => Ok(seen),
        Ok(Err(err)) => {
            crate::metrics::webhook_rejected("other");
            Err(ApiError::internal(
                "replay store: cannot record a webhook",
                err,
            ))
        }
        Err(err) => {
            crate::metrics::webhook_rejected("other");
            Err(ApiError::internal("replay store: task failed", err))
        }
    }
}

/// Forgets `value` on a blocking thread, waiting for it so that a retry sent right after
/// the refusal finds it forgotten.
async fn forget(stores: Arc<ReplayStores>, kind: ReplayKind, job: String, value: Vec<u8>) {
    let joined =
        tokio::task::spawn_blocking(move || store(&stores, kind).forget(&job, &value)).await;
    if let Err(err) = joined {
        tracing::error!(error = %err, "replay store: forgetting an entry failed");
    }
}

fn refuse_signature(id: &str, err: &AuthError) -> ApiError {
    if *err == AuthError::BadPublicKey {
        crate::metrics::webhook_rejected("other");
        return ApiError::internal("webhook: the job's public key is unusable", id);
    }
    crate::metrics::webhook_rejected("signature");
    // Debug, not info: a flood of forged requests must not become a flood of log lines
    // (they are counted in svc_webhook_rejections_total).
    tracing::debug!(job = %id, reason = %err, "webhook refused");
    ApiError::unauthorized(err.to_string())
}

pub(super) async fn trigger(
    State(state): State<AppState>,
    Path(path): Path<String>,
    mut request: Request,
) -> Result<Response, ApiError> {
    // What the `HeaderMap` and `Bytes` extractors would give, without copying the
    // headers: reading the body needs only the rest of the request (its body limit is an
    // extension), and a body that cannot be read is refused with that extractor's answer.
    let headers = std::mem::take(request.headers_mut());
    let body = match Bytes::from_request(request, &state).await {
        Ok(body) => body,
        Err(rejection) => return Ok(rejection.into_response()),
    };
    let path = format!("/{}", path.trim_start_matches('/'));
    let unknown = || {
        crate::metrics::webhook_rejected("unknown_path");
        ApiError::not_found(UNKNOWN_PATH)
    };
    let job = state.engine.job_for_path(&path).ok_or_else(unknown)?;
    let id: &str = &job.id;

    let secret = job.secret.as_deref().unwrap_or(&state.secret).as_bytes();
    let (verified, replay) = match job.auth_kind {
        AuthKind::HmacSha256 => (
            auth::verify_hmac_sha256(
                secret,
                &body,
                &job.header_sign,
                header_text(&headers, &job.header_sign).as_deref(),
            ),
            None,
        ),
        AuthKind::Codehost => (
            auth::verify_codehost(
                secret,
                &body,
                header_text(&headers, "x-hub-signature-256").as_deref(),
                header_text(&headers, "x-hub-signature").as_deref(),
            ),
            // Without a delivery ID there is nothing to deduplicate on.
            header_bytes(&headers, DELIVERY_HEADER)
                .map(<[u8]>::trim_ascii)
                .filter(|v| !v.is_empty())
                .map(|v| (ReplayKind::Delivery, v)),
        ),
        AuthKind::Patchhost => {
            let nonce = header_bytes(&headers, auth::PATCHHOST_NONCE_HEADER);
            (
                auth::verify_patchhost(
                    &job.public_key,
                    &body,
                    header_bytes(&headers, auth::PATCHHOST_SIGNATURE_HEADER),
                    nonce,
                ),
                // Verified above: present and not empty.
                nonce.map(|v| (ReplayKind::Nonce, v)),
            )
        }
    };
    verified.map_err(|err| refuse_signature(id, &err))?;

    let recorded = match replay {
        None => None,
        Some((kind, value)) if value.len() > MAX_VALUE_LEN => {
            crate::metrics::webhook_rejected("other");
            return Err(ApiError::bad_request(format!(
                "{} longer than {MAX_VALUE_LEN} bytes",
                kind.label()
            )));
        }
        Some((kind, value)) => {
            let value = value.to_vec();
            let seen =
                check_and_record(state.replay.clone(), kind, id.to_owned(), value.clone()).await?;
            match (seen, kind) {
                (Seen::New, _) => Some((kind, value)),
                (Seen::Replay, ReplayKind::Delivery) => {
                    crate::metrics::webhook_rejected("replay");
                    tracing::info!(job = %id, "duplicate webhook delivery: not run again");
                    let job = state
                        .engine
                        .job_json(Kind::Job, id)
                        .unwrap_or(serde_json::Value::Null);
                    return Ok(wrapper(StatusCode::OK, DUPLICATE_DELIVERY, job));
                }
                (Seen::Replay, ReplayKind::Nonce) => {
                    crate::metrics::webhook_rejected("replay");
                    tracing::info!(job = %id, "webhook refused: nonce already used");
                    return Err(ApiError::unauthorized("nonce already used"));
                }
            }
        }
    };

    let event = header_bytes(&headers, "x-github-event")
        .or_else(|| header_bytes(&headers, "x-webhook-event"))
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let trigger = Trigger {
        source: TriggerSource::Webhook,
        body: Some(body),
        event,
    };
    match state.engine.trigger(Kind::Job, id, trigger).await {
        Ok(accepted) => Ok(ok(accepted)),
        Err(err) => {
            crate::metrics::webhook_rejected(match err {
                EngineError::Paused => "paused",
                EngineError::Busy => "busy",
                _ => "other",
            });
            if let Some((kind, value)) = recorded {
                forget(state.replay.clone(), kind, id.to_owned(), value).await;
            }
            Err(err.into())
        }
    }
}
