//! Signed control requests (pause, resume, cancel, run-now, reload; JobHttp pause and
//! resume): the `X-Svc-Sign` check with the main secret, the `_svc_epoch` window, and
//! the one spend store.
//!
//! Every signature the service accepts, on any route, is spent in one store (the
//! [`Replay`] ledger of signatures), keyed on its canonical spelling (the hex HMAC of
//! what was signed, so that upper case or a `sha256=` prefix is the same signature):
//! a control request that carries `_svc_epoch` is one-time, on every route, whatever
//! its action; a signature a webhook spent is refused here, and one spent here is
//! refused on the webhook route (a signed pause body is also a validly signed webhook
//! body for a job that has no secret of its own, and a code host's JSON can hold
//! `&id=X&_svc_epoch=...` in a commit message). Two requests with the same body in the
//! same second are therefore one request: a client that pauses and resumes a job within
//! a second adds a field of its own (`_svc_nonce=<random>`), which the signature covers
//! and the service ignores. JobHttp pause and resume without `_svc_epoch` (upstream
//! clients, while `require_epoch` is off) sign only `id=X`, the same bytes every time:
//! they may repeat on their own route, and nowhere else. The epoch bounds how long a
//! captured request could be tried at all; the store remembers far longer.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;

use super::query::{param, params};
use super::{ApiError, AppState};
use crate::access::auth;
use crate::access::replay::{Claim, Replay, RouteClass};

/// What a signed control request does; the replay store keys its signatures on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Pause,
    Resume,
    Cancel,
    HttpPause,
    HttpResume,
    /// `job_http/cancel`: end a JobHttp's call going on.
    HttpCancel,
    /// `job_exec/trigger`: run a Job now.
    Trigger,
    /// `job_http/trigger`: run a JobHttp now.
    HttpTrigger,
    /// `reload`: reload the configuration.
    Reload,
}

impl Action {
    /// The action's name in the service log.
    fn name(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Cancel => "cancel",
            Action::HttpPause => "job_http pause",
            Action::HttpResume => "job_http resume",
            Action::HttpCancel => "job_http cancel",
            Action::Trigger => "trigger",
            Action::HttpTrigger => "job_http trigger",
            Action::Reload => "reload",
        }
    }
}

/// The spend store's route of one-time control requests (every action: a signature is
/// one request, whatever it asks).
const CONTROL_ROUTE: &str = "control";
/// The route of JobHttp pause and resume without `_svc_epoch`, which may repeat.
const REPEATABLE_CONTROL_ROUTE: &str = "control-without-epoch";

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
    let key = key(state.secret.expose().as_bytes(), signed);
    match (param(&pairs, "_svc_epoch"), epoch) {
        (Some(value), _) => {
            check_epoch(parse_epoch(value)?)?;
            spend(&state.replay, action, key, CONTROL_ROUTE, false).await?;
        }
        (None, Epoch::Required) => return Err(missing_epoch()),
        (None, Epoch::Optional) if state.engine.main().require_epoch => {
            return Err(ApiError::unauthorized(
                "missing _svc_epoch (require_epoch is set)",
            ));
        }
        (None, Epoch::Optional) => {
            spend(&state.replay, action, key, REPEATABLE_CONTROL_ROUTE, true).await?;
        }
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

/// The answer to a signature the spend store refuses.
pub(super) fn replayed() -> ApiError {
    ApiError::unauthorized("replay: this signature was already used (a signed request is one-time)")
}

/// Spends the signature of an accepted control request (its [`key`]) on `route`: the
/// first use passes; a later one (on any node of a cluster) is a 401, unless `route`
/// accepts repeats and spent it itself.
async fn spend(
    replay: &Replay,
    action: Action,
    key: Vec<u8>,
    route: &str,
    repeatable: bool,
) -> Result<(), ApiError> {
    let claim = replay
        .claim_signature(vec![key], route, RouteClass::Control, repeatable)
        .await;
    match claim {
        Ok(Claim::New | Claim::Repeat) => Ok(()),
        Ok(Claim::Spent) => {
            tracing::info!(
                action = action.name(),
                "signed request refused: its signature was used before"
            );
            Err(replayed())
        }
        Err(fault) => Err(ApiError::replay(
            fault,
            "replay store: cannot record a signature",
        )),
    }
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
