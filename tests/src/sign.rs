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

/// An `_svc_epoch` for a new signed control request: the current time, stepped back by
/// one second more at each call (cycling within two minutes, well inside the five-minute
/// window). The service spends each control request's signature, and an upstream-style
/// body (`_svc_epoch` and `id`) signed twice in one second is the same signature: a
/// client that sends the same action twice within a second is refused the second time,
/// as a replay. Tests send many requests a second; each gets its own epoch.
pub fn fresh_epoch() -> i64 {
    static CALLS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let step = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 120;
    chrono::Utc::now().timestamp() - step
}

#[cfg(test)]
mod tests {
    use super::*;

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
