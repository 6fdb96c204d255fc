//! Signature checks for webhooks and signed API calls. Every comparison is constant-time
//! on decoded bytes, and no error ever carries the expected value.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Why a signature was refused. Messages are safe to send to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing signature header {0}")]
    Missing(String),
    #[error("signature in header {0} is not valid hex")]
    Malformed(String),
    #[error("signature does not match")]
    Mismatch,
}

/// Hex HMAC-SHA-256 of `data` with `secret`.
pub fn hmac_sha256_hex(secret: &[u8], data: &[u8]) -> String {
    hex::encode(hmac_sha256(secret, data))
}

fn hmac_sha256(secret: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length, so this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return Vec::new();
    };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hmac_sha1(secret: &[u8], data: &[u8]) -> Vec<u8> {
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(secret) else {
        return Vec::new();
    };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Compares a hex signature (with an optional `prefix=` such as `sha256=`) to the
/// expected MAC bytes in constant time.
fn check_hex(header: &str, value: &str, prefix: &str, expected: &[u8]) -> Result<(), AuthError> {
    let value = value.trim();
    let value = value.strip_prefix(prefix).unwrap_or(value);
    let given = hex::decode(value).map_err(|_| AuthError::Malformed(header.to_string()))?;
    if expected.is_empty() || !bool::from(given.ct_eq(expected)) {
        return Err(AuthError::Mismatch);
    }
    Ok(())
}

/// `hmac-sha256`: hex HMAC-SHA-256 of the body, optionally prefixed `sha256=`.
pub fn verify_hmac_sha256(
    secret: &[u8],
    body: &[u8],
    header: &str,
    value: Option<&str>,
) -> Result<(), AuthError> {
    let value = value
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| AuthError::Missing(header.to_string()))?;
    check_hex(header, value, "sha256=", &hmac_sha256(secret, body))
}

/// `codehost` (GitHub style): `X-Hub-Signature-256: sha256=<hex>`, or when that header
/// is absent, the legacy `X-Hub-Signature: sha1=<hex>`.
pub fn verify_codehost(
    secret: &[u8],
    body: &[u8],
    sha256_value: Option<&str>,
    sha1_value: Option<&str>,
) -> Result<(), AuthError> {
    match (
        sha256_value.filter(|v| !v.trim().is_empty()),
        sha1_value.filter(|v| !v.trim().is_empty()),
    ) {
        (Some(value), _) => check_hex(
            "x-hub-signature-256",
            value,
            "sha256=",
            &hmac_sha256(secret, body),
        ),
        (None, Some(value)) => {
            check_hex("x-hub-signature", value, "sha1=", &hmac_sha1(secret, body))
        }
        (None, None) => Err(AuthError::Missing("x-hub-signature-256".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        verify_codehost(GITHUB_SECRET, GITHUB_BODY, Some(GITHUB_SIGNATURE), None).expect("valid");
        assert_eq!(
            verify_codehost(
                GITHUB_SECRET,
                b"Hello, World?",
                Some(GITHUB_SIGNATURE),
                None
            ),
            Err(AuthError::Mismatch)
        );
    }

    #[test]
    fn codehost_falls_back_to_sha1() {
        let sha1 = format!("sha1={}", hex::encode(hmac_sha1(b"s", b"body")));
        verify_codehost(b"s", b"body", None, Some(&sha1)).expect("valid sha1");
        assert_eq!(
            verify_codehost(b"s", b"body!", None, Some(&sha1)),
            Err(AuthError::Mismatch)
        );
        assert!(matches!(
            verify_codehost(b"s", b"body", None, None),
            Err(AuthError::Missing(_))
        ));
    }

    #[test]
    fn hmac_sha256_accepts_bare_and_prefixed_hex() {
        let sig = hmac_sha256_hex(b"k", b"{}");
        verify_hmac_sha256(b"k", b"{}", "x-svc-sign", Some(&sig)).expect("bare");
        verify_hmac_sha256(b"k", b"{}", "x-svc-sign", Some(&format!("sha256={sig}")))
            .expect("prefixed");
        verify_hmac_sha256(b"k", b"{}", "x-svc-sign", Some(&sig.to_uppercase()))
            .expect("upper hex");
        assert_eq!(
            verify_hmac_sha256(b"k", b"{} ", "x-svc-sign", Some(&sig)),
            Err(AuthError::Mismatch)
        );
        assert_eq!(
            verify_hmac_sha256(b"k", b"{}", "x-svc-sign", Some("zz")),
            Err(AuthError::Malformed("x-svc-sign".into()))
        );
        assert_eq!(
            verify_hmac_sha256(b"k", b"{}", "x-svc-sign", None),
            Err(AuthError::Missing("x-svc-sign".into()))
        );
        // A truncated signature is a mismatch, never a partial match.
        assert_eq!(
            verify_hmac_sha256(b"k", b"{}", "x-svc-sign", Some(&sig[..10])),
            Err(AuthError::Mismatch)
        );
    }

    #[test]
    fn errors_never_contain_the_expected_value() {
        let expected = hmac_sha256_hex(b"k", b"x");
        let err = verify_hmac_sha256(b"k", b"x", "h", Some("00")).expect_err("mismatch");
        assert!(!err.to_string().contains(&expected));
    }
}
