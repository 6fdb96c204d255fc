//! The signature checks of `svc_controller::auth` with arbitrary secrets, bodies and
//! header values.
//!
//! The input is split at its first three 0x00 bytes into secret, body, header value and a
//! second header value (the sha1 one for codehost, the nonce for patchhost). Checked: no
//! panic; a value is accepted only when it is the right signature (for hex schemes: the
//! decoded bytes equal the HMAC); an error's text never contains the expected hex; the
//! right signature, computed here, is always accepted.
#![no_main]

use hmac::{Hmac, Mac};
use libfuzzer_sys::fuzz_target;
use sha1::Sha1;
use sha2::Sha256;
use svc_controller::auth::{verify_codehost, verify_hmac_sha256, verify_patchhost};

fn hmac256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hmac1(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha1>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// The hex digits of `value` after an optional `prefix`, decoded, as the checks read it.
fn decoded(value: &str, prefix: &str) -> Option<Vec<u8>> {
    let value = value.trim();
    hex::decode(value.strip_prefix(prefix).unwrap_or(value)).ok()
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(4, |b| *b == 0);
    let secret = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default();
    let value_bytes = parts.next().unwrap_or_default();
    let second_bytes = parts.next().unwrap_or_default();
    let value = String::from_utf8_lossy(value_bytes);
    let second = String::from_utf8_lossy(second_bytes);
    let expected256 = hmac256(secret, body);
    let expected1 = hmac1(secret, body);
    let hex256 = hex::encode(&expected256);
    let hex1 = hex::encode(&expected1);

    // hmac-sha256.
    let result = verify_hmac_sha256(secret, body, "x-svc-sign", Some(&value));
    match &result {
        Ok(()) => assert_eq!(
            decoded(&value, "sha256=").as_deref(),
            Some(expected256.as_slice()),
            "accepted a wrong signature {value:?}"
        ),
        Err(err) => assert!(!err.to_string().contains(&hex256), "error echoes the MAC"),
    }
    verify_hmac_sha256(secret, body, "x-svc-sign", Some(&hex256)).expect("right signature");
    verify_hmac_sha256(
        secret,
        body,
        "x-svc-sign",
        Some(&format!("sha256={hex256}")),
    )
    .expect("right prefixed signature");

    // codehost: sha256 header wins; sha1 only when it is absent.
    let sha256 = (!value.trim().is_empty()).then_some(value.as_ref());
    let result = verify_codehost(secret, body, sha256, Some(&second));
    match &result {
        Ok(()) => {
            let right = match sha256 {
                Some(v) => decoded(v, "sha256=").as_deref() == Some(expected256.as_slice()),
                None => decoded(&second, "sha1=").as_deref() == Some(expected1.as_slice()),
            };
            assert!(right, "codehost accepted {value:?} / {second:?}");
        }
        Err(err) => {
            let text = err.to_string();
            assert!(
                !text.contains(&hex256) && !text.contains(&hex1),
                "error echoes the MAC"
            );
        }
    }
    verify_codehost(secret, body, None, Some(&format!("sha1={hex1}"))).expect("right sha1");

    // patchhost: the secret part is taken as the base64 public key. Nobody knows the
    // private key of an arbitrary key, so acceptance is not expected, only no panic.
    let key = String::from_utf8_lossy(secret);
    let _ = verify_patchhost(&key, body, Some(value_bytes), Some(second_bytes));
    let _ = verify_patchhost(
        "uX7KWyyDNMaBma4aVbJ/cbUQpdjqczuCyK/HxzV/u+4=",
        body,
        Some(value_bytes),
        Some(second_bytes),
    );
});
