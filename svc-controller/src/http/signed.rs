//! Signed control requests (pause, resume, cancel, run-now, reload; JobHttp pause and
//! resume):
//! the `X-Svc-Sign` check with the main secret, the `_svc_epoch` window, and one-time
//! use.
//!
//! A control request's signature is spent when it is accepted: it is recorded in the
//! replay store of signatures with its action (keyed on the HMAC-SHA-256 of what was
//! signed, so that a signature written in upper case or with a `sha256=` prefix is the
//! same one) and refused on every later use for that action, and on the webhook route
//! (a signed pause body is also a validly signed webhook body for a job that has no
//! secret of its own). The action is part of the key because upstream clients sign only
//! the form (`_svc_epoch` and `id`): a pause and a resume of one job sent within one
//! second carry the same signature, and both must pass. The epoch bounds how long a
//! captured request could be tried at all; the store remembers signatures far longer
//! than that window.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;

use super::query::{param, params};
use super::{ApiError, AppState};
use crate::auth;
use crate::replay::{Ledger, Replay, Seen};

/// What a signed control request does; the replay store keys its signatures on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Pause,
    Resume,
    Cancel,
    HttpPause,
    HttpResume,
    /// Run-now through the webhook route, with `_svc_epoch` in the body.
    RunNow,
    /// `job_exec/trigger`: run a Job now.
    Trigger,
    /// `job_http/trigger`: run a JobHttp now.
    HttpTrigger,
    /// `reload`: reload the configuration.
    Reload,
}

impl Action {
    const ALL: [Action; 9] = [
        Action::Pause,
        Action::Resume,
        Action::Cancel,
        Action::HttpPause,
        Action::HttpResume,
        Action::RunNow,
        Action::Trigger,
        Action::HttpTrigger,
        Action::Reload,
    ];

    /// The replay store's job field for this action's signatures.
    fn store_key(self) -> &'static str {
        match self {
            Action::Pause => "control:pause",
            Action::Resume => "control:resume",
            Action::Cancel => "control:cancel",
            Action::HttpPause => "control:job_http_pause",
            Action::HttpResume => "control:job_http_resume",
            Action::RunNow => "control:run",
            Action::Trigger => "control:trigger",
            Action::HttpTrigger => "control:job_http_trigger",
            Action::Reload => "control:reload",
        }
    }
}

/// Refuses an epoch more than [`auth::TIMESTAMP_WINDOW_SECS`] away from the server clock.
pub(super) fn check_epoch(epoch: u64) -> Result<(), ApiError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if now.abs_diff(epoch) > auth::TIMESTAMP_WINDOW_SECS {
        return Err(ApiError::unauthorized(
            "_svc_epoch is more than 5 minutes away from the server clock",
        ));
    }
    Ok(())
}

/// Parses an `_svc_epoch` value; a present but unreadable one is refused.
pub(super) fn parse_epoch(value: &str) -> Result<u64, ApiError> {
    value.trim().parse().map_err(|_| missing_epoch())
}

/// Whether a signed control request must carry `_svc_epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Epoch {
    /// Always: refused without one (the Job actions, run now of any job).
    Required,
    /// Only when `require_epoch` is set (JobHttp pause and resume). Upstream clients
    /// send none: such a request is always the same one, so it cannot be one-time
    /// without refusing every later one; it is accepted without being spent.
    Optional,
}

/// The check of a signed control request: `X-Svc-Sign` over `signed` (a form body, or
/// the raw query string) with the main secret, then its `_svc_epoch` within
/// [`auth::TIMESTAMP_WINDOW_SECS`] of the server clock, and its signature spent for `action`
/// (one-time). Returns the pairs of `signed`.
pub(super) async fn check(
    state: &AppState,
    action: Action,
    epoch: Epoch,
    headers: &HeaderMap,
    signed: &[u8],
) -> Result<Vec<(String, String)>, ApiError> {
    verify(state, headers, signed)?;
    let pairs = params(signed);
    match (param(&pairs, "_svc_epoch"), epoch) {
        (Some(value), _) => {
            check_epoch(parse_epoch(value)?)?;
            spend(
                &state.replay,
                action,
                key(state.secret.expose().as_bytes(), signed),
            )
            .await?;
        }
        (None, Epoch::Required) => return Err(missing_epoch()),
        (None, Epoch::Optional) if state.engine.main().require_epoch => {
            return Err(ApiError::unauthorized(
                "missing _svc_epoch (require_epoch is set)",
            ));
        }
        (None, Epoch::Optional) => {}
    }
    Ok(pairs)
}

fn missing_epoch() -> ApiError {
    ApiError::unauthorized("missing or invalid _svc_epoch")
}

/// Checks `X-Svc-Sign` over `signed` with the main secret.
fn verify(state: &AppState, headers: &HeaderMap, signed: &[u8]) -> Result<(), ApiError> {
    let signature = headers.get("x-svc-sign").and_then(|v| v.to_str().ok());
    auth::verify_hmac_sha256(
        &[state.secret.expose().as_bytes()],
        signed,
        "x-svc-sign",
        signature,
    )
    .map_err(|e| ApiError::unauthorized(e.to_string()))
}

/// What the store remembers of a signature: the hex HMAC-SHA-256 of `signed` with
/// `secret`, i.e. the signature in its one canonical spelling.
pub(super) fn key(secret: &[u8], signed: &[u8]) -> Vec<u8> {
    auth::hmac_sha256_hex(secret, signed).into_bytes()
}

/// Spends the signature of an accepted control request (its [`key`]) for `action`: the
/// first use passes, every later one is a 401 (on any node of a cluster).
pub(super) async fn spend(replay: &Replay, action: Action, key: Vec<u8>) -> Result<(), ApiError> {
    match replay
        .check_and_record(Ledger::Signatures, action.store_key(), &key)
        .await
    {
        Ok(Seen::New) => Ok(()),
        Ok(Seen::Replay) => {
            tracing::info!("signed request refused: its signature was used before");
            Err(ApiError::unauthorized("signature already used"))
        }
        Err(fault) => Err(ApiError::replay(
            fault,
            "replay store: cannot record a signature",
        )),
    }
}

/// Refuses a webhook whose signature (its [`key`]) was spent by a control request of
/// any action.
pub(super) async fn refuse_spent(replay: &Replay, key: Vec<u8>) -> Result<(), ApiError> {
    let scopes = Action::ALL.map(Action::store_key);
    let spent = replay
        .is_recorded_in_any(Ledger::Signatures, &scopes, &key)
        .await
        .map_err(|fault| ApiError::replay(fault, "replay store: cannot look up a signature"))?;
    if spent {
        tracing::info!("webhook refused: its signature was used by a control request");
        return Err(ApiError::unauthorized("signature already used"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `_svc_epoch` has the window of Standard Webhooks' timestamps: one constant.
    #[test]
    fn the_epoch_window_is_the_timestamp_window() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let window = auth::TIMESTAMP_WINDOW_SECS;
        assert_eq!(window, 300);
        for inside in [now, now - (window - 5), now + (window - 5)] {
            check_epoch(inside).expect("inside the window");
        }
        for outside in [now - (window + 5), now + (window + 5)] {
            let err = check_epoch(outside).expect_err("outside the window");
            assert_eq!(err.status, axum::http::StatusCode::UNAUTHORIZED);
        }
    }
}
