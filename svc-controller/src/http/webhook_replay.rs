//! The replay checks of a webhook delivery whose signature held: what they key on, per
//! scheme, and the records they make.
//!
//! - Every signature accepted is spent in the one spend store ([`super::signed`]),
//!   keyed on the HMAC of what was signed under each of the job's keys, for the route
//!   `webhook:<job>`: no control request may use it again. (Another job's path may: a
//!   code host sends the same body to every hook of a repository; jobs that must not
//!   accept each other's deliveries have secrets of their own.) Code hosts and Standard Webhooks never send the same signed body as a new
//!   event, so on their route it is one-time too: a captured body sent again under a
//!   new or missing delivery ID is a 401. An `hmac-sha256` route accepts repeats (its
//!   clients send the same body on purpose) unless the job sets `one_time_deliveries`
//!   or the body carries `_svc_epoch` (a signed run-now, one-time like every control
//!   request, and only within the epoch window).
//! - The host's delivery ID (`X-GitHub-Delivery` and its kin; Standard Webhooks'
//!   `webhook-id`, which is signed) is remembered 24 hours: a repeat answers 200 without
//!   running, which a host's redelivery of a delivery that ran expects.
//! - sourcehut: the SHA-256 of what its signature covers (body then nonce, so that bytes
//!   shifted from one to the other are the same delivery), remembered 90 days; a repeat
//!   is a 401. Its Ed25519 signature is the host's and signs nothing else.
//!
//! What a delivery recorded is taken back when it starts nothing (paused, busy,
//! `on_busy = skip`), so that the host's redelivery runs.

use axum::http::HeaderMap;
use sha2::{Digest as _, Sha256};

use super::{ApiError, AppState, codehost, signed};
use crate::access::auth;
use crate::access::replay::{Claim, Ledger, MAX_VALUE_LEN, RouteClass, Seen};
use crate::config::{AuthKind, JobConfig};

/// Which per-job store a delivery's own key goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A host's delivery ID.
    Delivery,
    /// sourcehut's body and nonce.
    Nonce,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Delivery => "delivery ID",
            Kind::Nonce => "nonce",
        }
    }

    fn ledger(self) -> Ledger {
        match self {
            Kind::Delivery => Ledger::Deliveries,
            Kind::Nonce => Ledger::Nonces,
        }
    }
}

/// What the checks of one delivery key on.
#[derive(Debug)]
pub(super) struct Keys {
    /// The job's ID, the scope of its delivery IDs and nonces.
    job: String,
    /// The delivery's own key, if its scheme has one.
    own: Option<(Kind, Vec<u8>)>,
    /// The canonical spellings of its signature (one per key of the job).
    spend: Vec<Vec<u8>>,
    /// The spend store's route: `webhook:<job>`.
    route: String,
    /// A repeat of the signature on its own route is refused too.
    one_time: bool,
}

/// What a delivery recorded, to take back if it starts nothing.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    own: Option<(Kind, Vec<u8>)>,
    spend: Option<(Vec<Vec<u8>>, String)>,
}

/// The outcome of [`claim`].
#[derive(Debug)]
pub(super) enum Claimed {
    /// First seen: go on, and [`release`] this if the delivery starts nothing.
    Fresh(Recorded),
    /// A delivery ID seen before: answered 200 without running.
    Duplicate,
}

/// The keys of a delivery to `job` whose signature held with one of `secrets`: 401 for
/// an `_svc_epoch` outside its window, 400 for a delivery ID or nonce over
/// [`MAX_VALUE_LEN`].
pub(super) fn keys(
    job: &JobConfig,
    secrets: &[&[u8]],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Keys, ApiError> {
    let header = |name: &str| headers.get(name).map(|v| v.as_bytes());
    let mut one_time = true;
    let (own, signed_bytes) = match job.auth_kind {
        AuthKind::Sourcehut => {
            // Verified before: present and not empty.
            let nonce = header(auth::PATCHHOST_NONCE_HEADER).unwrap_or_default();
            let mut digest = Sha256::new();
            digest.update(body);
            digest.update(nonce);
            let value = hex::encode(digest.finalize()).into_bytes();
            (Some((Kind::Nonce, value)), None)
        }
        AuthKind::Standard => {
            // Verified before: one set of names, or both saying the same.
            let names = auth::standard_names(header).unwrap_or(auth::STANDARD_NAMES);
            let part = |name| header(name).unwrap_or_default();
            let id = part(names.id);
            let stamp = part(names.timestamp);
            let signed = [id, b".", stamp, b".", body].concat();
            let own = (!id.is_empty()).then(|| (Kind::Delivery, id.to_vec()));
            (own, Some(signed))
        }
        AuthKind::HmacSha256 => {
            let epoch = body_epoch(body);
            if let Some(epoch) = &epoch {
                signed::parse_epoch(epoch)
                    .and_then(signed::check_epoch)
                    .inspect_err(|_| crate::metrics::webhook_rejected("replay"))?;
            }
            one_time = job.one_time_deliveries || epoch.is_some();
            (None, Some(body.to_vec()))
        }
        kind => {
            let own = codehost::delivery_id(kind, headers).map(|id| (Kind::Delivery, id.to_vec()));
            (own, Some(body.to_vec()))
        }
    };
    if let Some((kind, value)) = &own
        && value.len() > MAX_VALUE_LEN
    {
        crate::metrics::webhook_rejected("other");
        return Err(ApiError::bad_request(format!(
            "{} longer than {MAX_VALUE_LEN} bytes",
            kind.label()
        )));
    }
    let spend = signed_bytes.map_or_else(Vec::new, |bytes| {
        secrets
            .iter()
            .map(|secret| signed::key(secret, &bytes))
            .collect()
    });
    Ok(Keys {
        job: job.id.clone(),
        own,
        spend,
        route: format!("webhook:{}", job.id),
        one_time,
    })
}

/// The `_svc_epoch` a signed run-now body carries: a top-level member of a JSON object
/// (number or string), or a form field. `None` for other bodies (code hosts' payloads).
fn body_epoch(body: &[u8]) -> Option<String> {
    const NAME: &[u8] = b"_svc_epoch";
    if !body.windows(NAME.len()).any(|window| window == NAME) {
        return None;
    }
    if let Ok(serde_json::Value::Object(object)) = serde_json::from_slice(body) {
        return match object.get("_svc_epoch")? {
            serde_json::Value::Number(number) => Some(number.to_string()),
            serde_json::Value::String(text) => Some(text.clone()),
            // Present but not an epoch: refused as invalid.
            _ => Some(String::new()),
        };
    }
    form_urlencoded::parse(body)
        .find(|(name, _)| name == "_svc_epoch")
        .map(|(_, value)| value.into_owned())
}

fn replay_error(fault: crate::access::replay::ReplayFault) -> ApiError {
    crate::metrics::webhook_rejected("other");
    ApiError::replay(fault, "replay store: cannot record a webhook")
}

fn refused_as_replay(job: &str, why: &str) -> ApiError {
    crate::metrics::webhook_rejected("replay");
    tracing::info!(job = %job, "webhook refused: {why}");
    signed::replayed()
}

/// Spends a delivery that its job's filters skip: it starts nothing, so it may come
/// again on its own route (and be skipped again), but its signature is spent for every
/// other route, like any signature accepted.
pub(super) async fn claim_skipped(state: &AppState, keys: &Keys) -> Result<(), ApiError> {
    if keys.spend.is_empty() {
        return Ok(());
    }
    match state
        .replay
        .claim_signature(keys.spend.clone(), &keys.route, RouteClass::Webhook, true)
        .await
        .map_err(replay_error)?
    {
        Claim::New | Claim::Repeat => Ok(()),
        Claim::Spent => Err(refused_as_replay(
            &keys.job,
            "its signature was used before",
        )),
    }
}

/// Records the delivery: its own key first (a known delivery ID is a duplicate), then
/// its signature in the spend store.
pub(super) async fn claim(state: &AppState, keys: Keys) -> Result<Claimed, ApiError> {
    let mut recorded = Recorded::default();
    if let Some((kind, value)) = keys.own {
        let seen = state
            .replay
            .check_and_record(kind.ledger(), &keys.job, &value)
            .await
            .map_err(replay_error)?;
        match (seen, kind) {
            (Seen::New, _) => recorded.own = Some((kind, value)),
            (Seen::Replay, Kind::Delivery) => {
                crate::metrics::webhook_rejected("replay");
                tracing::info!(job = %keys.job, "duplicate webhook delivery: not run again");
                return Ok(Claimed::Duplicate);
            }
            (Seen::Replay, Kind::Nonce) => {
                crate::metrics::webhook_rejected("replay");
                tracing::info!(job = %keys.job, "webhook refused: nonce already used");
                return Err(ApiError::unauthorized("nonce already used"));
            }
        }
    }
    if keys.spend.is_empty() {
        return Ok(Claimed::Fresh(recorded));
    }
    let claim = state
        .replay
        .claim_signature(
            keys.spend.clone(),
            &keys.route,
            RouteClass::Webhook,
            !keys.one_time,
        )
        .await;
    match claim {
        Ok(Claim::New) => recorded.spend = Some((keys.spend, keys.route)),
        Ok(Claim::Repeat) => {}
        Ok(Claim::Spent) => {
            release(state, &keys.job, recorded).await;
            return Err(refused_as_replay(
                &keys.job,
                "its signature was used before",
            ));
        }
        Err(fault) => {
            release(state, &keys.job, recorded).await;
            return Err(replay_error(fault));
        }
    }
    Ok(Claimed::Fresh(recorded))
}

/// Takes back what a delivery to `job` recorded: it started nothing, so that a retry
/// (the host's redelivery) can run.
pub(super) async fn release(state: &AppState, job: &str, recorded: Recorded) {
    if let Some((kind, value)) = recorded.own {
        state.replay.forget(kind.ledger(), job, &value).await;
    }
    if let Some((keys, route)) = recorded.spend {
        state.replay.release_signature(keys, &route).await;
    }
}
