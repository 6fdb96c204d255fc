//! Signature checks for webhooks and signed API calls. Every comparison is constant-time
//! on decoded bytes, and no error ever carries the expected value.

use base64::Engine as _;
use ed25519_dalek::{Signature, VerifyingKey};
use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

/// Why a signature was refused. Messages are safe to send to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing signature header {0}")]
    Missing(String),
    #[error("signature in header {0} is not valid hex")]
    Malformed(String),
    #[error("signature in header {0} is not valid base64")]
    MalformedBase64(String),
    #[error("signature does not match")]
    Mismatch,
    /// The configured public key is unusable; a fault of the configuration, not of the
    /// client.
    #[error("the job's public key is not a valid Ed25519 key")]
    BadPublicKey,
    /// A signed timestamp too far from the server's clock (a replay, or a wrong clock).
    #[error("{0} is more than 5 minutes from the server's clock")]
    OutOfWindow(String),
    /// Both spellings of the Standard Webhooks headers, saying different things: which
    /// one was signed cannot be told.
    #[error("webhook-* and svix-* headers differ: send one set")]
    Ambiguous,
}

/// How far a signed timestamp may be from the server's clock: Standard Webhooks'
/// `webhook-timestamp`, and the `_svc_epoch` of signed control requests.
pub const TIMESTAMP_WINDOW_SECS: u64 = 5 * 60;

/// Runs `check` with every secret (all of them, so that the time taken does not tell
/// which one matched): accepted when one is; else the first secret's refusal.
fn with_any_secret(
    secrets: &[&[u8]],
    mut check: impl FnMut(&[u8]) -> Result<(), AuthError>,
) -> Result<(), AuthError> {
    let mut accepted = false;
    let mut first_error = None;
    for secret in secrets {
        match check(secret) {
            Ok(()) => accepted = true,
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    match (accepted, first_error) {
        (true, _) => Ok(()),
        (false, Some(err)) => Err(err),
        (false, None) => Err(AuthError::Mismatch),
    }
}

/// Hex HMAC-SHA-256 of `data` with `secret`.
pub fn hmac_sha256_hex(secret: &[u8], data: &[u8]) -> String {
    hmac_sha256(secret, data)
        .map(hex::encode)
        .unwrap_or_default()
}

// Fixed-size results, on the stack: these run for every webhook, forged ones included.
fn hmac_sha256(secret: &[u8], data: &[u8]) -> Option<[u8; 32]> {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    mac.update(data);
    Some(mac.finalize().into_bytes().into())
}

fn hmac_sha1(secret: &[u8], data: &[u8]) -> Option<[u8; 20]> {
    let mut mac = Hmac::<Sha1>::new_from_slice(secret).ok()?;
    mac.update(data);
    Some(mac.finalize().into_bytes().into())
}

/// Longest MAC [`check_hex`] decodes on the stack (SHA-256's).
const MAX_STACK_MAC: usize = 32;

/// Compares a hex signature (with an optional `prefix=` such as `sha256=`) to the
/// expected MAC bytes in constant time. `None` (no MAC could be computed) never matches.
fn check_hex(
    header: &str,
    value: &str,
    prefix: &str,
    expected: Option<&[u8]>,
) -> Result<(), AuthError> {
    let value = value.trim();
    let value = value.strip_prefix(prefix).unwrap_or(value);
    let malformed = |_| AuthError::Malformed(header.to_string());
    let expected = expected.unwrap_or_default();
    // A value of the expected length (the usual case) is decoded onto the stack; any
    // other is decoded in full only to tell malformed hex (refused as such) from a
    // wrong length (a mismatch), as before.
    let mut stack = [0u8; MAX_STACK_MAC];
    let heap;
    let given: &[u8] = if !expected.is_empty()
        && expected.len() <= MAX_STACK_MAC
        && value.len() == 2 * expected.len()
    {
        let given = &mut stack[..expected.len()];
        hex::decode_to_slice(value, given).map_err(malformed)?;
        given
    } else {
        heap = hex::decode(value).map_err(malformed)?;
        &heap
    };
    if expected.is_empty() || !bool::from(given.ct_eq(expected)) {
        return Err(AuthError::Mismatch);
    }
    Ok(())
}

/// Header carrying the `codehost` HMAC-SHA-256 signature.
pub const CODEHOST_SHA256_HEADER: &str = "x-hub-signature-256";
/// Header carrying the legacy `codehost` HMAC-SHA-1 signature.
pub const CODEHOST_SHA1_HEADER: &str = "x-hub-signature";

/// True when a signature header counts as sent: present and not blank. The verify
/// functions below and [`missing_header`] judge by this one rule.
fn is_sent(value: Option<&[u8]>) -> bool {
    value.is_some_and(|v| !v.trim_ascii().is_empty())
}

/// The scheme of a webhook, as [`missing_header`] needs it.
#[derive(Debug, Clone, Copy)]
pub enum Scheme<'a> {
    /// `hmac-sha256`, signature in this header.
    HmacSha256(&'a str),
    /// GitHub (`codehost`).
    Codehost,
    Gitlab,
    Gitea,
    Bitbucket,
    Standard,
    /// sourcehut.
    Patchhost,
}

/// GitLab's header: the secret token itself.
pub const GITLAB_TOKEN_HEADER: &str = "x-gitlab-token";
/// Gitea's signature header: hex HMAC-SHA-256 of the body.
pub const GITEA_SIGNATURE_HEADER: &str = "x-gitea-signature";
/// Forgejo's signature header, the same as Gitea's.
pub const FORGEJO_SIGNATURE_HEADER: &str = "x-forgejo-signature";
/// Bitbucket's signature header: `sha256=<hex>`.
pub const BITBUCKET_SIGNATURE_HEADER: &str = "x-hub-signature";
/// Standard Webhooks' message ID, part of what is signed.
pub const STANDARD_ID_HEADER: &str = "webhook-id";
/// Standard Webhooks' timestamp (Unix seconds), part of what is signed.
pub const STANDARD_TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// Standard Webhooks' signatures: `v1,<base64>`, space-separated.
pub const STANDARD_SIGNATURE_HEADER: &str = "webhook-signature";

/// The names of one set of Standard Webhooks headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandardNames {
    /// The message ID, signed.
    pub id: &'static str,
    /// The timestamp (Unix seconds), signed.
    pub timestamp: &'static str,
    /// The signatures.
    pub signature: &'static str,
}

/// The specification's spelling: `webhook-id`, `webhook-timestamp`, `webhook-signature`.
pub const STANDARD_NAMES: StandardNames = StandardNames {
    id: STANDARD_ID_HEADER,
    timestamp: STANDARD_TIMESTAMP_HEADER,
    signature: STANDARD_SIGNATURE_HEADER,
};

/// Svix's spelling of the same headers, which Svix and the services built on it send
/// (and its own library accepts beside the other): the same values, signed the same way.
pub const SVIX_NAMES: StandardNames = StandardNames {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

/// The set of Standard Webhooks headers a delivery uses: `webhook-*`, or Svix's
/// `svix-*` when it sends none of the former. A delivery sending both sets is taken only
/// if they carry the same values ([`AuthError::Ambiguous`] otherwise), so that what is
/// checked is what any reader of either set would take.
pub fn standard_names<'v>(
    header: impl Fn(&str) -> Option<&'v [u8]>,
) -> Result<StandardNames, AuthError> {
    let parts = |names: StandardNames| [names.id, names.timestamp, names.signature];
    let sends = |names: StandardNames| parts(names).into_iter().any(|name| is_sent(header(name)));
    match (sends(STANDARD_NAMES), sends(SVIX_NAMES)) {
        (true, true) => {
            let same = parts(STANDARD_NAMES)
                .into_iter()
                .zip(parts(SVIX_NAMES))
                .all(|(ours, svix)| header(ours) == header(svix));
            if same {
                Ok(STANDARD_NAMES)
            } else {
                Err(AuthError::Ambiguous)
            }
        }
        (false, true) => Ok(SVIX_NAMES),
        _ => Ok(STANDARD_NAMES),
    }
}

/// The header a delivery lacks for `scheme`, if any, with `header` giving a header's
/// raw value: what the verify function would refuse as missing, known before the body
/// is read, so that a request refused anyway is refused before its body is received.
pub fn missing_header<'a, 'v>(
    scheme: Scheme<'a>,
    header: impl Fn(&str) -> Option<&'v [u8]>,
) -> Option<&'a str> {
    match scheme {
        Scheme::HmacSha256(name) => (!is_sent(header(name))).then_some(name),
        Scheme::Codehost => (!is_sent(header(CODEHOST_SHA256_HEADER))
            && !is_sent(header(CODEHOST_SHA1_HEADER)))
        .then_some(CODEHOST_SHA256_HEADER),
        Scheme::Gitlab => (!is_sent(header(GITLAB_TOKEN_HEADER))).then_some(GITLAB_TOKEN_HEADER),
        Scheme::Gitea => (!is_sent(header(FORGEJO_SIGNATURE_HEADER))
            && !is_sent(header(GITEA_SIGNATURE_HEADER)))
        .then_some(GITEA_SIGNATURE_HEADER),
        Scheme::Bitbucket => {
            (!is_sent(header(BITBUCKET_SIGNATURE_HEADER))).then_some(BITBUCKET_SIGNATURE_HEADER)
        }
        Scheme::Standard => {
            // Two sets that differ are refused by the check of the signature, whose
            // answer says why (this one can only name a missing header).
            let names = standard_names(&header).ok()?;
            [names.signature, names.id, names.timestamp]
                .into_iter()
                .find(|name| !is_sent(header(name)))
        }
        Scheme::Patchhost => {
            if !is_sent(header(PATCHHOST_SIGNATURE_HEADER)) {
                Some(PATCHHOST_SIGNATURE_HEADER)
            } else if header(PATCHHOST_NONCE_HEADER).is_none_or(<[u8]>::is_empty) {
                Some(PATCHHOST_NONCE_HEADER)
            } else {
                None
            }
        }
    }
}

/// `hmac-sha256`: hex HMAC-SHA-256 of the body, optionally prefixed `sha256=`. Also
/// Gitea's and Bitbucket's scheme, in their own headers.
pub fn verify_hmac_sha256(
    secrets: &[&[u8]],
    body: &[u8],
    header: &str,
    value: Option<&str>,
) -> Result<(), AuthError> {
    let value = value
        .filter(|v| is_sent(Some(v.as_bytes())))
        .ok_or_else(|| AuthError::Missing(header.to_string()))?;
    with_any_secret(secrets, |secret| {
        let expected = hmac_sha256(secret, body);
        check_hex(
            header,
            value,
            "sha256=",
            expected.as_ref().map(|mac| &mac[..]),
        )
    })
}

/// `gitea` (and Forgejo): `X-Forgejo-Signature`, else `X-Gitea-Signature`, the hex
/// HMAC-SHA-256 of the body. When both are sent, Forgejo's is the one checked.
pub fn verify_gitea(
    secrets: &[&[u8]],
    body: &[u8],
    forgejo_value: Option<&str>,
    gitea_value: Option<&str>,
) -> Result<(), AuthError> {
    match forgejo_value.filter(|v| is_sent(Some(v.as_bytes()))) {
        Some(value) => verify_hmac_sha256(secrets, body, FORGEJO_SIGNATURE_HEADER, Some(value)),
        None => verify_hmac_sha256(secrets, body, GITEA_SIGNATURE_HEADER, gitea_value),
    }
}

/// A header's value, trimmed, or [`AuthError::Missing`].
fn sent_value<'v>(value: Option<&'v [u8]>, name: &str) -> Result<&'v [u8], AuthError> {
    value
        .filter(|v| is_sent(Some(v)))
        .map(<[u8]>::trim_ascii)
        .ok_or_else(|| AuthError::Missing(name.to_string()))
}

/// `gitlab`: `X-Gitlab-Token` is the secret itself. Compared as SHA-256 digests, so the
/// comparison takes the same time whatever the lengths.
pub fn verify_gitlab(secrets: &[&[u8]], token: Option<&[u8]>) -> Result<(), AuthError> {
    let token = sent_value(token, GITLAB_TOKEN_HEADER)?;
    let given: [u8; 32] = Sha256::digest(token).into();
    with_any_secret(secrets, |secret| {
        let expected: [u8; 32] = Sha256::digest(secret).into();
        if bool::from(given.ct_eq(&expected)) {
            Ok(())
        } else {
            Err(AuthError::Mismatch)
        }
    })
}

/// The Standard Webhooks v1 MAC: HMAC-SHA-256 of `{id}.{timestamp}.{body}` keyed with
/// `key` (a secret's [`standard_key`](crate::security::standard_secret::standard_key)).
fn standard_mac(key: &[u8], id: &[u8], timestamp: &[u8], body: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts a key of any length");
    for part in [id, b".", timestamp, b".", body] {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The Standard Webhooks v1 signature of a message, as `webhook-signature` carries it:
/// `v1,` and the base64 of its [`standard_mac`] (what the notifications' webhooks send).
pub fn standard_signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let mac = standard_mac(key, id.as_bytes(), timestamp.as_bytes(), body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac)
    )
}

/// `standard` (Standard Webhooks v1): `webhook-signature` (or Svix's `svix-signature`,
/// see [`standard_names`]) holds one or more space-separated `v1,<base64>` values, any
/// of which may be the HMAC-SHA-256 of `<id>.<timestamp>.<body>`; the timestamp must be
/// within [`TIMESTAMP_WINDOW_SECS`] of `now` (Unix seconds). Values of other versions are
/// ignored. `keys` are the secrets as
/// [`standard_key`](crate::security::standard_secret::standard_key) decodes them, once,
/// when the configuration is loaded.
pub fn verify_standard<'v>(
    keys: &[&[u8]],
    body: &[u8],
    header: impl Fn(&str) -> Option<&'v [u8]>,
    now: i64,
) -> Result<(), AuthError> {
    let names = standard_names(&header)?;
    let signatures = sent_value(header(names.signature), names.signature)?;
    let id = sent_value(header(names.id), names.id)?;
    let timestamp = sent_value(header(names.timestamp), names.timestamp)?;
    let seconds: i64 = std::str::from_utf8(timestamp)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| AuthError::Malformed(names.timestamp.into()))?;
    if now.abs_diff(seconds) > TIMESTAMP_WINDOW_SECS {
        return Err(AuthError::OutOfWindow(names.timestamp.into()));
    }
    let mut given = Vec::new();
    for value in signatures.split(|b| *b == b' ').filter(|v| !v.is_empty()) {
        let Some(encoded) = value.strip_prefix(b"v1,") else {
            continue;
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| AuthError::MalformedBase64(names.signature.into()))?;
        given.push(decoded);
    }
    if given.is_empty() {
        return Err(AuthError::Malformed(names.signature.into()));
    }
    with_any_secret(keys, |key| {
        let expected = standard_mac(key, id, timestamp, body);
        let mut matched = false;
        for candidate in &given {
            matched |= bool::from(candidate.as_slice().ct_eq(&expected[..]));
        }
        if matched {
            Ok(())
        } else {
            Err(AuthError::Mismatch)
        }
    })
}

/// `codehost` (GitHub style): `X-Hub-Signature-256: sha256=<hex>`, or when that header
/// is absent, the legacy `X-Hub-Signature: sha1=<hex>`.
pub fn verify_codehost(
    secrets: &[&[u8]],
    body: &[u8],
    sha256_value: Option<&str>,
    sha1_value: Option<&str>,
) -> Result<(), AuthError> {
    match (
        sha256_value.filter(|v| is_sent(Some(v.as_bytes()))),
        sha1_value.filter(|v| is_sent(Some(v.as_bytes()))),
    ) {
        (Some(value), _) => verify_hmac_sha256(secrets, body, CODEHOST_SHA256_HEADER, Some(value)),
        (None, Some(value)) => with_any_secret(secrets, |secret| {
            let expected = hmac_sha1(secret, body);
            check_hex(
                CODEHOST_SHA1_HEADER,
                value,
                "sha1=",
                expected.as_ref().map(|mac| &mac[..]),
            )
        }),
        (None, None) => Err(AuthError::Missing(CODEHOST_SHA256_HEADER.into())),
    }
}

/// Header carrying the `patchhost` signature.
pub const PATCHHOST_SIGNATURE_HEADER: &str = "x-payload-signature";
/// Header carrying the `patchhost` nonce.
pub const PATCHHOST_NONCE_HEADER: &str = "x-payload-nonce";

/// `patchhost` (sourcehut style): `signature` is the base64 Ed25519 signature of the raw
/// body immediately followed by the bytes of `nonce`, checked with `public_key_b64` (the
/// job's base64 public key) by the strict rules of [`VerifyingKey::verify_strict`].
/// Header values are taken as raw bytes; an empty header counts as missing.
pub fn verify_patchhost(
    public_key_b64: &str,
    body: &[u8],
    signature: Option<&[u8]>,
    nonce: Option<&[u8]>,
) -> Result<(), AuthError> {
    let signature = sent_value(signature, PATCHHOST_SIGNATURE_HEADER)?;
    let nonce = nonce
        .filter(|v| !v.is_empty())
        .ok_or_else(|| AuthError::Missing(PATCHHOST_NONCE_HEADER.into()))?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(public_key_b64.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes.as_slice()).ok())
        .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok())
        .ok_or(AuthError::BadPublicKey)?;
    let signature = base64::engine::general_purpose::STANDARD
        .decode(signature)
        .map_err(|_| AuthError::MalformedBase64(PATCHHOST_SIGNATURE_HEADER.into()))?;
    let signature = Signature::from_slice(&signature).map_err(|_| AuthError::Mismatch)?;
    let mut message = Vec::with_capacity(body.len() + nonce.len());
    message.extend_from_slice(body);
    message.extend_from_slice(nonce);
    key.verify_strict(&message, &signature)
        .map_err(|_| AuthError::Mismatch)
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
