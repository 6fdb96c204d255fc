//! Unit tests of `auth.rs`.

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
                    missing_header(Scheme::Standard, sent(STANDARD_NAMES, b, b, a)),
                    verify_standard(&[b"k"], b"{}", sent(STANDARD_NAMES, b, b, a), 0),
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
    verify_codehost(&[GITHUB_SECRET], GITHUB_BODY, Some(GITHUB_SIGNATURE), None).expect("valid");
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
    verify_hmac_sha256(&[b"k"], b"{}", "x-svc-sign", Some(&sig.to_uppercase())).expect("upper hex");
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
/// A delivery's Standard Webhooks headers spelt `names`: its ID, timestamp and
/// signatures; no other header.
fn sent<'v>(
    names: StandardNames,
    id: Option<&'v [u8]>,
    timestamp: Option<&'v [u8]>,
    signatures: Option<&'v [u8]>,
) -> impl Fn(&str) -> Option<&'v [u8]> {
    move |name| match name {
        _ if name == names.id => id,
        _ if name == names.timestamp => timestamp,
        _ if name == names.signature => signatures,
        _ => None,
    }
}

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
        let headers = sent(
            STANDARD_NAMES,
            Some(STANDARD_ID),
            Some(ts.as_bytes()),
            Some(signatures),
        );
        verify_standard(&[&key], body, headers, now)
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
            sent(
                STANDARD_NAMES,
                Some(b"msg_other"),
                Some(ts.as_bytes()),
                Some(STANDARD_SIGNATURE)
            ),
            STANDARD_TIMESTAMP
        ),
        Err(AuthError::Mismatch)
    );
    // The key is the decoded bytes: the secret's text is not.
    assert_eq!(
        verify_standard(
            &[STANDARD_SECRET],
            STANDARD_BODY,
            sent(
                STANDARD_NAMES,
                Some(STANDARD_ID),
                Some(ts.as_bytes()),
                Some(STANDARD_SIGNATURE)
            ),
            STANDARD_TIMESTAMP
        ),
        Err(AuthError::Mismatch)
    );
    // A secret without the prefix is used as raw bytes.
    let raw = standard_key(b"plain").expect("raw");
    assert_eq!(raw, b"plain");
    assert_eq!(standard_key(b"whsec_!!"), None);
}

/// Svix's spelling (`svix-id`, `svix-timestamp`, `svix-signature`) of Svix's published
/// vector is accepted as the other; both sets sent are taken when they agree and refused
/// when they differ; a set missing a part is refused naming the part in its spelling.
#[test]
fn svix_header_names_are_accepted_and_a_mixed_delivery_must_agree() {
    let ts = STANDARD_TIMESTAMP.to_string();
    let key = standard_key(STANDARD_SECRET).expect("base64 after whsec_");
    let (id, stamp, signature) = (
        Some(STANDARD_ID),
        Some(ts.as_bytes()),
        Some(STANDARD_SIGNATURE),
    );
    let svix = sent(SVIX_NAMES, id, stamp, signature);
    assert_eq!(standard_names(&svix), Ok(SVIX_NAMES));
    assert_eq!(missing_header(Scheme::Standard, &svix), None);
    verify_standard(&[&key], STANDARD_BODY, &svix, STANDARD_TIMESTAMP).expect("svix-*");

    let both = |other: Option<&'static [u8]>| {
        let ours = sent(STANDARD_NAMES, id, stamp, signature);
        let theirs = sent(SVIX_NAMES, id, stamp, other);
        move |name: &str| ours(name).or_else(|| theirs(name))
    };
    verify_standard(&[&key], STANDARD_BODY, both(signature), STANDARD_TIMESTAMP)
        .expect("both sets, the same values");
    let other: &'static [u8] = b"v1,bm90IGl0";
    assert_eq!(
        verify_standard(
            &[&key],
            STANDARD_BODY,
            both(Some(other)),
            STANDARD_TIMESTAMP
        ),
        Err(AuthError::Ambiguous)
    );

    let unsigned = sent(SVIX_NAMES, id, stamp, None);
    assert_eq!(
        missing_header(Scheme::Standard, &unsigned),
        Some("svix-signature")
    );
    assert_eq!(
        verify_standard(&[&key], STANDARD_BODY, &unsigned, STANDARD_TIMESTAMP),
        Err(AuthError::Missing("svix-signature".into()))
    );
    let late = sent(SVIX_NAMES, id, stamp, signature);
    assert_eq!(
        verify_standard(&[&key], STANDARD_BODY, late, STANDARD_TIMESTAMP + 301),
        Err(AuthError::OutOfWindow("svix-timestamp".into()))
    );
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
        verify_patchhost(&public, body, Some(signature.as_bytes()), Some(b"12345")).expect("valid");
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
