//! Request signatures, computed the way clients of svc compute them.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::Sha256;

/// Hex-encoded HMAC-SHA-256 of `data` keyed with `secret` (the `x-svc-sign` value, and the
/// hex part of GitHub's `X-Hub-Signature-256`).
pub fn hmac_sha256_hex(secret: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_ref())
        .expect("HMAC accepts a key of any length");
    mac.update(data.as_ref());
    hex::encode(mac.finalize().into_bytes())
}

/// Hex-encoded HMAC-SHA-1 of `data` keyed with `secret` (the hex part of GitHub's legacy
/// `X-Hub-Signature`).
pub fn hmac_sha1_hex(secret: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> String {
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(secret.as_ref())
        .expect("HMAC accepts a key of any length");
    mac.update(data.as_ref());
    hex::encode(mac.finalize().into_bytes())
}

/// A Standard Webhooks v1 signature: `v1,` and the base64 of the HMAC-SHA-256 of
/// `{id}.{timestamp}.{body}` keyed with `key` (the raw key: the bytes a `whsec_` secret
/// decodes to).
pub fn standard_signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    use base64::Engine as _;
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts a key of any length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let encoded = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    format!("v1,{encoded}")
}

/// An `_svc_epoch` for a new signed control request, never returned before in this
/// process: the current time, or one second past the last value when that is later.
/// The service spends each control request's signature, and an upstream-style body
/// (`_svc_epoch` and `id`) signed twice with one epoch is the same signature: a client
/// that sends the same action twice within a second is refused the second time, as a
/// replay. Tests send many requests a second; each gets its own epoch (running ahead of
/// the clock by at most the number of requests sent in a burst, far inside the
/// five-minute window).
pub fn fresh_epoch() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = chrono::Utc::now().timestamp();
    let previous = LAST
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or(now);
    now.max(previous + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference vector of the Standard Webhooks specification.
    #[test]
    fn standard_webhooks_reference_signature() {
        use base64::Engine as _;
        let key = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .expect("base64");
        assert_eq!(
            standard_signature(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn documented_check_value() {
        assert_eq!(
            hmac_sha256_hex("It's a Secret to Everybody", "Hello, World!"),
            "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }

    #[test]
    fn sha1_known_value() {
        // RFC 2202 test case 2.
        assert_eq!(
            hmac_sha1_hex("Jefe", "what do ya want for nothing?"),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
    }
}
