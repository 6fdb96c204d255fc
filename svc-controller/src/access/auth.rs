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
        Scheme::Standard => [
            STANDARD_SIGNATURE_HEADER,
            STANDARD_ID_HEADER,
            STANDARD_TIMESTAMP_HEADER,
        ]
        .into_iter()
        .find(|name| !is_sent(header(name))),
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

/// `standard` (Standard Webhooks v1): `webhook-signature` holds one or more
/// space-separated `v1,<base64>` values, any of which may be the HMAC-SHA-256 of
/// `<webhook-id>.<webhook-timestamp>.<body>`; the timestamp must be within
/// [`TIMESTAMP_WINDOW_SECS`] of `now` (Unix seconds). Values of other versions are
/// ignored. `keys` are the secrets as [`standard_key`](crate::security::standard_secret::standard_key) decodes them, once, when the
/// configuration is loaded.
pub fn verify_standard(
    keys: &[&[u8]],
    body: &[u8],
    id: Option<&[u8]>,
    timestamp: Option<&[u8]>,
    signatures: Option<&[u8]>,
    now: i64,
) -> Result<(), AuthError> {
    let signatures = sent_value(signatures, STANDARD_SIGNATURE_HEADER)?;
    let id = sent_value(id, STANDARD_ID_HEADER)?;
    let timestamp = sent_value(timestamp, STANDARD_TIMESTAMP_HEADER)?;
    let seconds: i64 = std::str::from_utf8(timestamp)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| AuthError::Malformed(STANDARD_TIMESTAMP_HEADER.into()))?;
    if now.abs_diff(seconds) > TIMESTAMP_WINDOW_SECS {
        return Err(AuthError::OutOfWindow(STANDARD_TIMESTAMP_HEADER.into()));
    }
    let mut given = Vec::new();
    for value in signatures.split(|b| *b == b' ').filter(|v| !v.is_empty()) {
        let Some(encoded) = value.strip_prefix(b"v1,") else {
            continue;
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| AuthError::MalformedBase64(STANDARD_SIGNATURE_HEADER.into()))?;
        given.push(decoded);
    }
    if given.is_empty() {
        return Err(AuthError::Malformed(STANDARD_SIGNATURE_HEADER.into()));
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
mod tests {
    use super::*;
    use crate::security::standard_secret::standard_key;

    /// The early check and the verify functions agree on what is missing: for every
    /// mix of absent, empty, blank and given headers, a header the early check lets
    /// through is never refused as missing by the verify function, and the other way.
    #[test]
    fn the_early_check_agrees_with_the_verify_functions() {
        let values: [Option<&[u8]>; 4] = [None, Some(b""), Some(b"  "), Some(b"c2ln")];
        for a in values {
            for b in values {
                let lookup = |name: &str| match name {
                    "x-sign" | CODEHOST_SHA256_HEADER | PATCHHOST_SIGNATURE_HEADER => a,
                    _ => b,
                };
                let text = |v: Option<&[u8]>| v.map(|v| String::from_utf8_lossy(v).into_owned());
                let cases = [
                    (
                        missing_header(Scheme::HmacSha256("x-sign"), lookup),
                        verify_hmac_sha256(&[b"k"], b"{}", "x-sign", text(a).as_deref()),
                    ),
                    (
                        missing_header(Scheme::Codehost, lookup),
                        verify_codehost(&[b"k"], b"{}", text(a).as_deref(), text(b).as_deref()),
                    ),
                    (
                        missing_header(Scheme::Patchhost, lookup),
                        verify_patchhost("not a key", b"{}", a, b),
                    ),
                    (
                        missing_header(Scheme::Gitlab, |_| a),
                        verify_gitlab(&[b"k"], a),
                    ),
                    (
                        missing_header(Scheme::Gitea, |name| match name {
                            FORGEJO_SIGNATURE_HEADER => a,
                            _ => b,
                        }),
                        verify_gitea(&[b"k"], b"{}", text(a).as_deref(), text(b).as_deref()),
                    ),
                    (
                        missing_header(Scheme::Bitbucket, |_| a),
                        verify_hmac_sha256(
                            &[b"k"],
                            b"{}",
                            BITBUCKET_SIGNATURE_HEADER,
                            text(a).as_deref(),
                        ),
                    ),
                    (
                        missing_header(Scheme::Standard, |name| match name {
                            STANDARD_SIGNATURE_HEADER => a,
                            _ => b,
                        }),
                        verify_standard(&[b"k"], b"{}", b, b, a, 0),
                    ),
                ];
                for (index, (early, verified)) in cases.into_iter().enumerate() {
                    let refused_as_missing = matches!(&verified, Err(AuthError::Missing(_)));
                    assert_eq!(
                        early.is_some(),
                        refused_as_missing,
                        "scheme {index}, headers {a:?} {b:?}: early {early:?}, verify {verified:?}"
                    );
                    if let (Some(name), Err(AuthError::Missing(missing))) = (early, &verified) {
                        assert_eq!(name, missing, "scheme {index}");
                    }
                }
            }
        }
    }

    const GITHUB_SECRET: &[u8] = b"It's a Secret to Everybody";
    const GITHUB_BODY: &[u8] = b"Hello, World!";
    const GITHUB_SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn githubs_documented_check_value_is_accepted() {
        assert_eq!(
            format!("sha256={}", hmac_sha256_hex(GITHUB_SECRET, GITHUB_BODY)),
            GITHUB_SIGNATURE
        );
        verify_codehost(&[GITHUB_SECRET], GITHUB_BODY, Some(GITHUB_SIGNATURE), None)
            .expect("valid");
        assert_eq!(
            verify_codehost(
                &[GITHUB_SECRET],
                b"Hello, World?",
                Some(GITHUB_SIGNATURE),
                None
            ),
            Err(AuthError::Mismatch)
        );
    }

    #[test]
    fn codehost_falls_back_to_sha1() {
        let sha1 = format!(
            "sha1={}",
            hex::encode(hmac_sha1(b"s", b"body").expect("any key length"))
        );
        verify_codehost(&[b"s"], b"body", None, Some(&sha1)).expect("valid sha1");
        assert_eq!(
            verify_codehost(&[b"s"], b"body!", None, Some(&sha1)),
            Err(AuthError::Mismatch)
        );
        assert!(matches!(
            verify_codehost(&[b"s"], b"body", None, None),
            Err(AuthError::Missing(_))
        ));
    }

    #[test]
    fn hmac_sha256_accepts_bare_and_prefixed_hex() {
        let sig = hmac_sha256_hex(b"k", b"{}");
        verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", Some(&sig)).expect("bare");
        verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", Some(&format!("sha256={sig}")))
            .expect("prefixed");
        verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", Some(&sig.to_uppercase()))
            .expect("upper hex");
        assert_eq!(
            verify_hmac_sha256(&[b"k"], b"{} ", "x-svc-sign", Some(&sig)),
            Err(AuthError::Mismatch)
        );
        assert_eq!(
            verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", Some("zz")),
            Err(AuthError::Malformed("x-svc-sign".into()))
        );
        assert_eq!(
            verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", None),
            Err(AuthError::Missing("x-svc-sign".into()))
        );
        // A truncated signature is a mismatch, never a partial match.
        assert_eq!(
            verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", Some(&sig[..10])),
            Err(AuthError::Mismatch)
        );
    }

    /// Values of the MAC's length are decoded on the stack, others in full: both tell
    /// malformed hex from a mismatch the same way.
    #[test]
    fn malformed_and_mismatched_values_of_every_length() {
        let sig = hmac_sha256_hex(b"k", b"{}");
        let malformed = Err(AuthError::Malformed("x-svc-sign".into()));
        let check = |value: &str| verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", Some(value));
        // The expected length: one wrong digit, one non-hex character.
        let mut wrong = sig.clone().into_bytes();
        wrong[63] = if wrong[63] == b'0' { b'1' } else { b'0' };
        let wrong = String::from_utf8(wrong).expect("ascii");
        assert_eq!(check(&wrong), Err(AuthError::Mismatch));
        assert_eq!(check(&format!("{}g", &sig[..63])), malformed);
        assert_eq!(check(&"0".repeat(64)), Err(AuthError::Mismatch));
        // Other lengths: longer, odd, empty after the prefix.
        assert_eq!(check(&format!("{sig}00")), Err(AuthError::Mismatch));
        assert_eq!(check(&sig[..63]), malformed);
        assert_eq!(check(&format!("{sig}0")), malformed);
        assert_eq!(check("sha256="), Err(AuthError::Mismatch));
        // SHA-1 (codehost's legacy header) the same way.
        let sha1 = hex::encode(hmac_sha1(b"s", b"body").expect("any key length"));
        assert_eq!(
            verify_codehost(
                &[b"s"],
                b"body",
                None,
                Some(&format!("sha1={}x", &sha1[..39]))
            ),
            Err(AuthError::Malformed("x-hub-signature".into()))
        );
        assert_eq!(
            verify_codehost(
                &[b"s"],
                b"body",
                None,
                Some(&format!("sha1={}", "0".repeat(40)))
            ),
            Err(AuthError::Mismatch)
        );
    }

    /// RFC 4231, test case 2: the HMAC-SHA-256 vector used for the hosts that publish
    /// none of their own (Gitea, Forgejo and Bitbucket sign exactly this way).
    const RFC4231_KEY: &[u8] = b"Jefe";
    const RFC4231_DATA: &[u8] = b"what do ya want for nothing?";
    const RFC4231_MAC: &str = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";

    #[test]
    fn gitea_and_forgejo_sign_the_body_in_bare_hex() {
        let keys: &[&[u8]] = &[RFC4231_KEY];
        verify_gitea(keys, RFC4231_DATA, None, Some(RFC4231_MAC)).expect("gitea");
        verify_gitea(keys, RFC4231_DATA, Some(RFC4231_MAC), None).expect("forgejo");
        // Forgejo's header is the one checked when both are sent.
        assert_eq!(
            verify_gitea(keys, RFC4231_DATA, Some(&"0".repeat(64)), Some(RFC4231_MAC)),
            Err(AuthError::Mismatch)
        );
        assert_eq!(
            verify_gitea(keys, b"other", None, Some(RFC4231_MAC)),
            Err(AuthError::Mismatch)
        );
        assert_eq!(
            verify_gitea(keys, RFC4231_DATA, None, None),
            Err(AuthError::Missing(GITEA_SIGNATURE_HEADER.into()))
        );
    }

    #[test]
    fn bitbucket_signs_the_body_with_a_sha256_prefix() {
        let value = format!("sha256={RFC4231_MAC}");
        let check = |body: &[u8], value: &str| {
            verify_hmac_sha256(
                &[RFC4231_KEY],
                body,
                BITBUCKET_SIGNATURE_HEADER,
                Some(value),
            )
        };
        check(RFC4231_DATA, &value).expect("valid");
        assert_eq!(check(b"x", &value), Err(AuthError::Mismatch));
    }

    #[test]
    fn gitlab_sends_the_secret_itself() {
        verify_gitlab(&[b"s3cret"], Some(b"s3cret")).expect("equal");
        verify_gitlab(&[b"s3cret"], Some(b" s3cret ")).expect("blanks around");
        for wrong in [b"s3cre".as_slice(), b"s3cret!", b"S3CRET"] {
            assert_eq!(
                verify_gitlab(&[b"s3cret"], Some(wrong)),
                Err(AuthError::Mismatch)
            );
        }
        assert_eq!(
            verify_gitlab(&[b"s3cret"], Some(b"")),
            Err(AuthError::Missing(GITLAB_TOKEN_HEADER.into()))
        );
    }

    /// The reference vector of the Standard Webhooks specification.
    const STANDARD_SECRET: &[u8] = b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const STANDARD_ID: &[u8] = b"msg_p5jXN8AQM9LWM0D4loKWxJek";
    const STANDARD_TIMESTAMP: i64 = 1_614_265_330;
    const STANDARD_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const STANDARD_SIGNATURE: &[u8] = b"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn standard_webhooks_reference_signature_is_made_as_it_is_checked() {
        let key = standard_key(STANDARD_SECRET).expect("base64 after whsec_");
        let id = std::str::from_utf8(STANDARD_ID).expect("ASCII");
        let signature = standard_signature(&key, id, STANDARD_TIMESTAMP, STANDARD_BODY);
        assert_eq!(signature.as_bytes(), STANDARD_SIGNATURE);
    }

    #[test]
    fn standard_webhooks_reference_vector() {
        let ts = STANDARD_TIMESTAMP.to_string();
        let key = standard_key(STANDARD_SECRET).expect("base64 after whsec_");
        let check = |signatures: &[u8], body: &[u8], now: i64| {
            verify_standard(
                &[&key],
                body,
                Some(STANDARD_ID),
                Some(ts.as_bytes()),
                Some(signatures),
                now,
            )
        };
        check(STANDARD_SIGNATURE, STANDARD_BODY, STANDARD_TIMESTAMP).expect("the vector");
        // Several values: any v1 may match; other versions are ignored.
        let several = [b"v1a,AAAA v1,bm90IGl0 ".as_slice(), STANDARD_SIGNATURE].concat();
        check(&several, STANDARD_BODY, STANDARD_TIMESTAMP + 299).expect("one of several");
        assert_eq!(
            check(
                STANDARD_SIGNATURE,
                b"{\"test\": 2432232315}",
                STANDARD_TIMESTAMP
            ),
            Err(AuthError::Mismatch)
        );
        assert_eq!(
            check(STANDARD_SIGNATURE, STANDARD_BODY, STANDARD_TIMESTAMP + 301),
            Err(AuthError::OutOfWindow(STANDARD_TIMESTAMP_HEADER.into()))
        );
        assert_eq!(
            check(STANDARD_SIGNATURE, STANDARD_BODY, STANDARD_TIMESTAMP - 301),
            Err(AuthError::OutOfWindow(STANDARD_TIMESTAMP_HEADER.into()))
        );
        assert_eq!(
            check(b"v2,abc", STANDARD_BODY, STANDARD_TIMESTAMP),
            Err(AuthError::Malformed(STANDARD_SIGNATURE_HEADER.into()))
        );
        assert_eq!(
            check(b"v1,***", STANDARD_BODY, STANDARD_TIMESTAMP),
            Err(AuthError::MalformedBase64(STANDARD_SIGNATURE_HEADER.into()))
        );
        // The ID is signed: another one does not match.
        assert_eq!(
            verify_standard(
                &[&key],
                STANDARD_BODY,
                Some(b"msg_other"),
                Some(ts.as_bytes()),
                Some(STANDARD_SIGNATURE),
                STANDARD_TIMESTAMP
            ),
            Err(AuthError::Mismatch)
        );
        // The key is the decoded bytes: the secret's text is not.
        assert_eq!(
            verify_standard(
                &[STANDARD_SECRET],
                STANDARD_BODY,
                Some(STANDARD_ID),
                Some(ts.as_bytes()),
                Some(STANDARD_SIGNATURE),
                STANDARD_TIMESTAMP
            ),
            Err(AuthError::Mismatch)
        );
        // A secret without the prefix is used as raw bytes.
        let raw = standard_key(b"plain").expect("raw");
        assert_eq!(raw, b"plain");
        assert_eq!(standard_key(b"whsec_!!"), None);
    }

    /// During a rotation the job has two secrets; a delivery signed with either passes,
    /// with neither fails.
    #[test]
    fn a_rotation_accepts_either_secret() {
        let old = hmac_sha256_hex(b"old", b"{}");
        let new = hmac_sha256_hex(b"new", b"{}");
        let secrets: &[&[u8]] = &[b"new", b"old"];
        for sig in [&old, &new] {
            verify_hmac_sha256(secrets, b"{}", "x-svc-sign", Some(sig)).expect("either");
            verify_codehost(secrets, b"{}", Some(&format!("sha256={sig}")), None)
                .expect("either, GitHub");
        }
        let other = hmac_sha256_hex(b"other", b"{}");
        assert_eq!(
            verify_hmac_sha256(secrets, b"{}", "x-svc-sign", Some(&other)),
            Err(AuthError::Mismatch)
        );
        verify_gitlab(secrets, Some(b"old")).expect("either token");
        assert_eq!(
            verify_hmac_sha256(secrets, b"{}", "x-svc-sign", Some("zz")),
            Err(AuthError::Malformed("x-svc-sign".into())),
            "a malformed value is malformed whatever the secret"
        );
    }

    #[test]
    fn errors_never_contain_the_expected_value() {
        let expected = hmac_sha256_hex(b"k", b"x");
        let err = verify_hmac_sha256(&[b"k"], b"x", "h", Some("00")).expect_err("mismatch");
        assert!(!err.to_string().contains(&expected));
    }

    mod patchhost {
        use super::*;
        use ed25519_dalek::{Signer, SigningKey};

        fn b64(bytes: &[u8]) -> String {
            base64::engine::general_purpose::STANDARD.encode(bytes)
        }

        fn key() -> SigningKey {
            SigningKey::from_bytes(&[7u8; 32])
        }

        fn sign(key: &SigningKey, body: &[u8], nonce: &[u8]) -> String {
            let mut message = body.to_vec();
            message.extend_from_slice(nonce);
            b64(&key.sign(&message).to_bytes())
        }

        #[test]
        fn valid_signature_over_body_then_nonce_is_accepted() {
            let key = key();
            let public = b64(key.verifying_key().as_bytes());
            let body = b"{\"event\":\"patchset:received\"}";
            let signature = sign(&key, body, b"12345");
            verify_patchhost(&public, body, Some(signature.as_bytes()), Some(b"12345"))
                .expect("valid");
            // Surrounding whitespace of the header value is tolerated.
            let padded = format!(" {signature} ");
            verify_patchhost(&public, body, Some(padded.as_bytes()), Some(b"12345"))
                .expect("valid, padded");
            // Non-UTF-8 bytes in body and nonce are signed and checked as they are.
            let signature = sign(&key, b"\xff\xfe", b"n\x80");
            verify_patchhost(
                &public,
                b"\xff\xfe",
                Some(signature.as_bytes()),
                Some(b"n\x80"),
            )
            .expect("valid, raw bytes");
        }

        #[test]
        fn tampered_body_wrong_nonce_or_other_key_is_refused() {
            let key = key();
            let public = b64(key.verifying_key().as_bytes());
            let signature = sign(&key, b"body", b"nonce");
            let sig = Some(signature.as_bytes());
            assert_eq!(
                verify_patchhost(&public, b"bodY", sig, Some(b"nonce")),
                Err(AuthError::Mismatch)
            );
            assert_eq!(
                verify_patchhost(&public, b"body", sig, Some(b"nonce2")),
                Err(AuthError::Mismatch)
            );
            // Moving bytes between body and nonce keeps the concatenation: by design of
            // the scheme this still verifies.
            verify_patchhost(&public, b"bodyn", sig, Some(b"once")).expect("same message");
            let other = b64(SigningKey::from_bytes(&[8u8; 32])
                .verifying_key()
                .as_bytes());
            assert_eq!(
                verify_patchhost(&other, b"body", sig, Some(b"nonce")),
                Err(AuthError::Mismatch)
            );
            assert_eq!(
                verify_patchhost(
                    crate::config::DEFAULT_PATCHHOST_PUBLIC_KEY,
                    b"body",
                    sig,
                    Some(b"nonce")
                ),
                Err(AuthError::Mismatch)
            );
        }

        #[test]
        fn missing_or_malformed_headers_are_refused() {
            let key = key();
            let public = b64(key.verifying_key().as_bytes());
            let signature = sign(&key, b"body", b"nonce");
            assert_eq!(
                verify_patchhost(&public, b"body", None, Some(b"nonce")),
                Err(AuthError::Missing(PATCHHOST_SIGNATURE_HEADER.into()))
            );
            assert_eq!(
                verify_patchhost(&public, b"body", Some(b"  "), Some(b"nonce")),
                Err(AuthError::Missing(PATCHHOST_SIGNATURE_HEADER.into()))
            );
            assert_eq!(
                verify_patchhost(&public, b"body", Some(signature.as_bytes()), None),
                Err(AuthError::Missing(PATCHHOST_NONCE_HEADER.into()))
            );
            assert_eq!(
                verify_patchhost(&public, b"body", Some(signature.as_bytes()), Some(b"")),
                Err(AuthError::Missing(PATCHHOST_NONCE_HEADER.into()))
            );
            assert_eq!(
                verify_patchhost(&public, b"body", Some(b"not base64!"), Some(b"nonce")),
                Err(AuthError::MalformedBase64(
                    PATCHHOST_SIGNATURE_HEADER.into()
                ))
            );
            assert_eq!(
                verify_patchhost(&public, b"body", Some(b"\xff\x00"), Some(b"nonce")),
                Err(AuthError::MalformedBase64(
                    PATCHHOST_SIGNATURE_HEADER.into()
                ))
            );
            // Valid base64 of the wrong length.
            assert_eq!(
                verify_patchhost(&public, b"body", Some(b"AAAA"), Some(b"nonce")),
                Err(AuthError::Mismatch)
            );
            assert_eq!(
                verify_patchhost("AAAA", b"body", Some(signature.as_bytes()), Some(b"nonce")),
                Err(AuthError::BadPublicKey)
            );
        }

        /// RFC 8032, section 7.1, test 2 (message `0x72`): the vector the integration
        /// tests use with an empty body and the nonce `r`.
        #[test]
        fn rfc8032_test_vector_2() {
            let secret: [u8; 32] =
                hex::decode("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
                    .expect("hex")
                    .try_into()
                    .expect("32 bytes");
            let key = SigningKey::from_bytes(&secret);
            assert_eq!(
                hex::encode(key.verifying_key().as_bytes()),
                "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
            );
            let expected = "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da\
                            085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00";
            assert_eq!(hex::encode(key.sign(b"r").to_bytes()), expected);
            let signature = b64(&hex::decode(expected).expect("hex"));
            verify_patchhost(
                &b64(key.verifying_key().as_bytes()),
                b"",
                Some(signature.as_bytes()),
                Some(b"r"),
            )
            .expect("valid");
        }
    }
}
