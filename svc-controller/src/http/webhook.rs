//! Endpoint 9: a signed POST to a job's path starts a run in the background.
//!
//! The flow: path → job (404) and the presence of the auth headers the job's `auth_kind`
//! needs (401), both before a byte of the body is read (so no `100 Continue` is sent to
//! a request that is refused anyway); then the body, charged to the body budget as it
//! arrives ([`BodyBudget`](super::BodyBudget): 503 with `Retry-After` when the client's
//! address or all bodies in flight use it up), the signature (401), replay checks, then
//! the trigger (412 paused, 429 busy). The replay checks, which key on what is signed
//! and spend every accepted signature in the one spend store, are in
//! [`super::webhook_replay`].
//!
//! Header values are read as raw bytes. No secret, expected signature or body is ever
//! logged or echoed.
//!
//! A delivery whose signature holds and that reaches the engine is recorded in the audit
//! log (`trigger`, by `webhook` with its delivery ID), whether the engine takes it or
//! refuses it (paused, busy). Deliveries refused before that (unknown path, bad
//! signature, replays) are counted in `svc_webhook_rejections_total` and not recorded:
//! anyone can send them, and a flood of forgeries must not push people's actions out of
//! the rotated audit files.

use std::borrow::Cow;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{ApiError, AppState, codehost, webhook_replay, wrapper};
use crate::access::auth::{self, AuthError};
use crate::config::{AuthKind, JobConfig, WebhookKey};
use crate::engine::{Accepted, EngineError, Kind, Trigger, TriggerSource};
use crate::store::delivery::DeliveryFacts;

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

/// The auth header a delivery for `job` lacks, if any: checked before the body is read.
fn missing_auth_header(job: &JobConfig, headers: &HeaderMap) -> Option<String> {
    let scheme = match job.auth_kind {
        AuthKind::HmacSha256 => auth::Scheme::HmacSha256(&job.header_sign),
        AuthKind::Gitlab => auth::Scheme::Gitlab,
        AuthKind::Gitea => auth::Scheme::Gitea,
        AuthKind::Bitbucket => auth::Scheme::Bitbucket,
        AuthKind::Standard => auth::Scheme::Standard,
        AuthKind::Sourcehut => auth::Scheme::Patchhost,
        AuthKind::Github => auth::Scheme::Codehost,
    };
    auth::missing_header(scheme, |name| header_bytes(headers, name)).map(str::to_string)
}

/// The keys a delivery for `job` may be signed with: the job's (decoded at load, the
/// new one first during a rotation), else the main secret.
fn job_secrets<'a>(state: &'a AppState, job: &'a JobConfig) -> Result<Vec<&'a [u8]>, ApiError> {
    Ok(match (job.secrets.as_slice(), job.auth_kind) {
        ([], AuthKind::Standard) => match &state.standard_key {
            Some(key) => vec![key.bytes()],
            None => {
                crate::metrics::webhook_rejected("other");
                return Err(ApiError::internal(
                    "webhook: the main secret is not a Standard Webhooks key",
                    &job.id,
                ));
            }
        },
        ([], _) => vec![state.secret.expose().as_bytes()],
        (keys, _) => keys.iter().map(WebhookKey::bytes).collect(),
    })
}

/// Checks a delivery's signature by its job's scheme, with each of `secrets`.
fn verify(
    job: &JobConfig,
    secrets: &[&[u8]],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), AuthError> {
    let text = |name: &str| header_text(headers, name);
    match job.auth_kind {
        AuthKind::HmacSha256 => auth::verify_hmac_sha256(
            secrets,
            body,
            &job.header_sign,
            text(&job.header_sign).as_deref(),
        ),
        AuthKind::Github => auth::verify_codehost(
            secrets,
            body,
            text(auth::CODEHOST_SHA256_HEADER).as_deref(),
            text(auth::CODEHOST_SHA1_HEADER).as_deref(),
        ),
        AuthKind::Gitlab => {
            auth::verify_gitlab(secrets, header_bytes(headers, auth::GITLAB_TOKEN_HEADER))
        }
        AuthKind::Gitea => auth::verify_gitea(
            secrets,
            body,
            text(auth::FORGEJO_SIGNATURE_HEADER).as_deref(),
            text(auth::GITEA_SIGNATURE_HEADER).as_deref(),
        ),
        AuthKind::Bitbucket => auth::verify_hmac_sha256(
            secrets,
            body,
            auth::BITBUCKET_SIGNATURE_HEADER,
            text(auth::BITBUCKET_SIGNATURE_HEADER).as_deref(),
        ),
        AuthKind::Standard => auth::verify_standard(
            secrets,
            body,
            |name| header_bytes(headers, name),
            chrono::Utc::now().timestamp(),
        ),
        AuthKind::Sourcehut => auth::verify_patchhost(
            &job.public_key,
            body,
            header_bytes(headers, auth::PATCHHOST_SIGNATURE_HEADER),
            header_bytes(headers, auth::PATCHHOST_NONCE_HEADER),
        ),
    }
}

/// Why a trigger that finds its job running with `on_busy = skip` starts nothing.
pub(super) const BUSY_SKIP: &str = "the job is running and on_busy = skip";

/// The answer to a delivery or trigger (`what`) that starts nothing without being an
/// error (the job's filters skip it, or `on_busy = skip` drops it): 200, with data that
/// says so and why.
pub(super) fn skipped_answer(id: &str, what: &str, reason: &str) -> Response {
    let data = serde_json::json!({ "skipped": true, "reason": reason, "id": id });
    wrapper(StatusCode::OK, &format!("{what} skipped: {reason}"), data)
}

/// Why a delivery that passed its checks starts nothing: `filter_event` and
/// `filter_ref` of its job, against what the delivery said of itself.
fn filtered_out(job: &JobConfig, facts: &DeliveryFacts) -> Option<String> {
    if !job.filter_event.is_empty() {
        let event = facts.event.as_deref().unwrap_or_default();
        if !job
            .filter_event
            .iter()
            .any(|e| e.eq_ignore_ascii_case(event))
        {
            return Some(if event.is_empty() {
                "the delivery names no event, and filter_event is set".into()
            } else {
                format!("event {event:?} is not in filter_event")
            });
        }
    }
    if !job.filter_ref.is_empty() {
        let Some(git_ref) = facts.git_ref.as_deref() else {
            return Some("the delivery names no ref, and filter_ref is set".into());
        };
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        let matched = job
            .filter_ref
            .iter()
            .any(|pattern| pattern.matches_with(git_ref, options));
        if !matched {
            return Some(format!("ref {git_ref:?} matches no filter_ref"));
        }
    }
    None
}

pub(super) async fn trigger(
    State(state): State<AppState>,
    Path(path): Path<String>,
    mut request: Request,
) -> Result<Response, ApiError> {
    let path = format!("/{}", path.trim_start_matches('/'));
    let unknown = || {
        crate::metrics::webhook_rejected("unknown_path");
        ApiError::unknown_path()
    };
    let job = state.engine.job_for_path(&path).ok_or_else(unknown)?;
    let id: &str = &job.id;
    let peer = super::access::peer_of(request.extensions());
    // The headers, taken without copying them: reading the body needs only the rest of
    // the request.
    let headers = std::mem::take(request.headers_mut());
    if let Some(missing) = missing_auth_header(&job, &headers) {
        return Err(refuse_signature(id, &AuthError::Missing(missing)));
    }
    // Charged as it arrives, to the client's address: see `BodyBudget`.
    let client = super::access::Client::from_peer(peer, &headers, &state);
    let mut charge = state.body_budget.open(client.address);
    let body = super::body_budget::read_charged(
        request.into_body(),
        &mut charge,
        super::WEBHOOK_BODY_LIMIT,
    )
    .await?;

    let secrets = job_secrets(&state, &job)?;
    verify(&job, &secrets, &headers, &body).map_err(|err| refuse_signature(id, &err))?;
    let keys = webhook_replay::keys(&job, &secrets, &headers, &body)?;

    // What the delivery says of itself; a large body is read off the async workers.
    let facts = if codehost::is_large(&body) {
        let (kind, headers, body) = (job.auth_kind, headers.clone(), body.clone());
        super::blocking(move || codehost::facts(kind, &headers, &body)).await?
    } else {
        codehost::facts(job.auth_kind, &headers, &body)
    };
    if let Some(reason) = filtered_out(&job, &facts) {
        // Not recorded as a delivery: it started nothing, so it may come again.
        webhook_replay::claim_skipped(&state, &keys).await?;
        crate::metrics::webhook_rejected("filtered");
        tracing::info!(job = %id, %reason, "webhook delivery skipped");
        return Ok(skipped_answer(id, "delivery", &reason));
    }
    let recorded = match webhook_replay::claim(&state, keys).await? {
        webhook_replay::Claimed::Fresh(recorded) => recorded,
        webhook_replay::Claimed::Duplicate => {
            let job = super::view::job_json(&state.engine, Kind::Job, id)
                .unwrap_or(serde_json::Value::Null);
            return Ok(wrapper(StatusCode::OK, DUPLICATE_DELIVERY, job));
        }
    };

    let actor = crate::access::audit::Actor::Webhook {
        delivery: facts.id.clone(),
    };
    let trigger = Trigger {
        source: TriggerSource::Webhook,
        body: Some(body),
        facts,
        cause: None,
        attempt: 1,
    };
    let answer = start(&state, id, trigger, recorded).await;
    let job = Some(super::access::job_ref(Kind::Job, id));
    super::access::record(
        &state,
        &client,
        actor,
        crate::access::audit::Action::Trigger,
        job,
        &answer,
    );
    answer
}

/// Hands a verified delivery to the engine; what a delivery it does not run recorded is
/// taken back, so that a retry can run.
async fn start(
    state: &AppState,
    id: &str,
    trigger: Trigger,
    recorded: webhook_replay::Recorded,
) -> Result<Response, ApiError> {
    match state.engine.trigger(Kind::Job, id, trigger).await {
        Ok(Accepted::Skipped) => {
            // It started nothing: not remembered, so it may come again.
            webhook_replay::release(state, id, recorded).await;
            Ok(skipped_answer(id, "delivery", BUSY_SKIP))
        }
        Ok(_) => Ok(super::job_answer(&state.engine, Kind::Job, id)),
        Err(err) => {
            crate::metrics::webhook_rejected(match err {
                EngineError::Paused => "paused",
                EngineError::Busy => "busy",
                _ => "other",
            });
            webhook_replay::release(state, id, recorded).await;
            Err(err.into())
        }
    }
}
