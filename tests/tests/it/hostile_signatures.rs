//! No signing oracle (more hostile HTTP clients, see also `hostile_http_more.rs`): 401
//! answers never carry the expected signature, the secret or the body, and the time a
//! wrong signature takes does not depend on how many of its leading bytes are right.
//!
//! These tests measure time, so they run one at a time with those of
//! `hostile_http_more.rs`.

use std::time::{Duration, Instant};

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};
use svc_tests::{TestService, hmac_sha1_hex, hmac_sha256_hex, job_section};

use crate::hostile_http_more::{SERIAL, median};

/// Messages a 401 may carry.
const SAFE_401: &[&str] = &[
    "signature does not match",
    "missing signature header x-svc-sign",
    "signature in header x-svc-sign is not valid hex",
    "missing signature header x-hub-signature-256",
    "signature in header x-hub-signature-256 is not valid hex",
    "signature in header x-hub-signature is not valid hex",
    "missing signature header x-payload-signature",
    "missing signature header x-payload-nonce",
    "signature in header x-payload-signature is not valid base64",
    "missing or invalid _svc_epoch",
    "_svc_epoch is more than 5 minutes away from the server clock",
];

/// A webhook request: path, what is wrong with it, its headers.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, String)>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_answers_never_echo_expected_values() {
    let _serial = SERIAL.lock().await;
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let public = base64::engine::general_purpose::STANDARD.encode(key.verifying_key().as_bytes());
    let own_secret = "job-own-secret-value-0123456789";
    let svc = oracle_service(own_secret, &public).await;
    let main_secret = svc.secret();
    let body = br#"{"ref":"refs/heads/main","marker":"body-marker-4242"}"#;
    let good = GoodSignatures {
        own: hmac_sha256_hex(own_secret, body),
        main: hmac_sha256_hex(&main_secret, body),
        sha1: hmac_sha1_hex(own_secret, body),
        ed: {
            let mut nonce_signed = body.to_vec();
            nonce_signed.extend_from_slice(b"nonce-1");
            base64::engine::general_purpose::STANDARD.encode(key.sign(&nonce_signed).to_bytes())
        },
    };
    let mut forbidden: Vec<String> = vec![
        main_secret.clone(),
        own_secret.to_owned(),
        good.own.clone(),
        good.main.clone(),
        good.sha1.clone(),
        good.ed.clone(),
        "body-marker-4242".to_owned(),
    ];
    // Half of an expected value is an oracle too.
    for good in [&good.own, &good.main, &good.sha1] {
        forbidden.push(good[..16].to_owned());
        forbidden.push(good[good.len() - 16..].to_owned());
    }
    let mut checked = 0;
    for (path, what, headers) in webhook_cases(&good) {
        let header_refs: Vec<(&str, &str)> =
            headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let response = svc.trigger_unsigned(path, body, &header_refs).await;
        response.assert_status(401);
        check_401(
            &format!("{path} ({what})"),
            &response.raw,
            response.message(),
            &forbidden,
        );
        checked += 1;
    }
    checked += check_signed_api_calls(&svc, &forbidden).await;
    println!("{checked} 401 answers checked: none echoes a secret, signature or body");
}

/// A service with a job of each way to sign a webhook: its own HMAC secret (`hmac`), the
/// main secret (`main`), a code host's headers (`gh`) and a patch host's Ed25519 key
/// (`srht`, base64 `public`).
async fn oracle_service(own_secret: &str, public: &str) -> TestService {
    TestService::builder()
        .job_file(
            "jobs",
            [
                job_section(
                    "hmac",
                    &[
                        "path = /hmac",
                        "command = true",
                        &format!("secret = {own_secret}"),
                    ],
                ),
                job_section("main", &["path = /main", "command = true"]),
                job_section(
                    "gh",
                    &[
                        "path = /gh",
                        "auth_kind = codehost",
                        "command = true",
                        &format!("secret = {own_secret}"),
                    ],
                ),
                job_section(
                    "srht",
                    &[
                        "path = /srht",
                        "auth_kind = patchhost",
                        "command = true",
                        &format!("public_key = {public}"),
                    ],
                ),
            ]
            .join("\n"),
        )
        .start()
        .await
}

/// The right signatures of the test's body: with the job's own secret (SHA-256 and
/// SHA-1), with the main secret, and the Ed25519 one of the body and nonce `nonce-1`.
struct GoodSignatures {
    own: String,
    main: String,
    sha1: String,
    ed: String,
}

/// `good` with its first digit changed.
fn one_wrong_digit(good: &str) -> String {
    let mut chars: Vec<char> = good.chars().collect();
    chars[0] = if chars[0] == '0' { '1' } else { '0' };
    chars.into_iter().collect::<String>()
}

/// The refused webhook requests: one wrong byte, a truncated value, garbage, nothing,
/// the other algorithm's or secret's value.
fn webhook_cases(good: &GoodSignatures) -> Vec<Case<'static>> {
    let wrong = one_wrong_digit;
    vec![
        (
            "/hmac",
            "one wrong digit",
            vec![("x-svc-sign", wrong(&good.own))],
        ),
        (
            "/hmac",
            "truncated",
            vec![("x-svc-sign", good.own[..40].to_owned())],
        ),
        (
            "/hmac",
            "main secret's",
            vec![("x-svc-sign", good.main.clone())],
        ),
        ("/hmac", "not hex", vec![("x-svc-sign", "zz".repeat(32))]),
        ("/hmac", "missing", vec![]),
        (
            "/main",
            "one wrong digit",
            vec![("x-svc-sign", wrong(&good.main))],
        ),
        (
            "/main",
            "prefixed, wrong",
            vec![("x-svc-sign", format!("sha256={}", wrong(&good.main)))],
        ),
        (
            "/gh",
            "sha256 wrong",
            vec![(
                "x-hub-signature-256",
                format!("sha256={}", wrong(&good.own)),
            )],
        ),
        (
            "/gh",
            "sha1 wrong",
            vec![("x-hub-signature", format!("sha1={}", wrong(&good.sha1)))],
        ),
        ("/gh", "missing", vec![]),
        (
            "/srht",
            "signature of another nonce",
            vec![
                ("x-payload-signature", good.ed.clone()),
                ("x-payload-nonce", "nonce-2".into()),
            ],
        ),
        (
            "/srht",
            "not base64",
            vec![
                ("x-payload-signature", "!!!".into()),
                ("x-payload-nonce", "n".into()),
            ],
        ),
        (
            "/srht",
            "missing nonce",
            vec![("x-payload-signature", good.ed.clone())],
        ),
    ]
}

/// The signed API calls (pause, resume, cancel) with a wrong, a truncated and no
/// signature: 401 without the `forbidden` values nor the expected signature or half of
/// it. Answers how many were checked.
async fn check_signed_api_calls(svc: &TestService, forbidden: &[String]) -> usize {
    let mut checked = 0;
    let (form, signature) = svc.job_exec_form("main");
    for action in ["pause", "resume", "cancel"] {
        for sign in [
            one_wrong_digit(&signature),
            signature[..32].to_owned(),
            String::new(),
        ] {
            let response = svc
                .post(
                    &format!("/svc/api/job_exec/{action}"),
                    form.as_bytes(),
                    &[
                        ("content-type", "application/x-www-form-urlencoded"),
                        ("X-Svc-Sign", &sign),
                    ],
                )
                .await;
            response.assert_status(401);
            let mut forbidden = forbidden.to_vec();
            forbidden.push(signature.clone());
            forbidden.push(signature[..16].to_owned());
            check_401(
                &format!("{action} with {sign:?}"),
                &response.raw,
                response.message(),
                &forbidden,
            );
            checked += 1;
        }
    }
    checked
}

fn check_401(what: &str, raw: &str, message: &str, forbidden: &[String]) {
    assert!(
        SAFE_401.contains(&message),
        "{what}: unexpected 401 message {message:?} ({raw})"
    );
    for value in forbidden {
        assert!(
            !raw.to_ascii_lowercase()
                .contains(&value.to_ascii_lowercase()),
            "{what}: the 401 answer contains {value:?}: {raw}"
        );
    }
}

/// Requests per kind of wrong signature.
const TIMING_SAMPLES: usize = 300;
/// Largest median difference accepted between the two kinds of a pair: 2 ms, or more
/// when a loaded machine makes answers slower and noisier (see [`timing_bound`]); a
/// comparison that leaks takes longer the more bytes are right, by far less than either.
const TIMING_BOUND: Duration = Duration::from_millis(2);

/// The bound for the median of the pairs' differences (`paired`, sorted, in ns): the
/// largest of [`TIMING_BOUND`], a twentieth of the slower median answer time, and four
/// standard errors of that median (the spread estimated from the differences'
/// interquartile range), so that on a loaded machine noise alone does not fail it while
/// a difference well above the noise still does.
fn timing_bound(paired: &[i128], slower_median: Duration) -> Duration {
    let quartile = |q: usize| paired[(paired.len() * q / 4).min(paired.len() - 1)] as f64;
    let sigma = (quartile(3) - quartile(1)) / 1.349;
    let standard_error = 1.2533 * sigma / (paired.len() as f64).sqrt();
    let noise = Duration::from_nanos((4.0 * standard_error).max(0.0) as u64);
    TIMING_BOUND.max(slower_median / 20).max(noise)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_signature_time_does_not_depend_on_the_matching_prefix() {
    let _serial = SERIAL.lock().await;
    let svc = TestService::builder()
        .job_file(
            "main",
            job_section("main", &["path = /main", "command = true"]),
        )
        .start()
        .await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("{}/svc/api/job_exec/pause", svc.base_url());
    let (form, good) = svc.job_exec_form("main");
    let mut bytes = hex::decode(&good).expect("hex signature");
    // 0 leading bytes right: the first byte differs. 31 right: only the last differs.
    bytes[0] ^= 0xff;
    let none_right = hex::encode(&bytes);
    bytes[0] ^= 0xff;
    bytes[31] ^= 0xff;
    let all_but_one = hex::encode(&bytes);
    let send = async |signature: &str| {
        let start = Instant::now();
        let response = client
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("X-Svc-Sign", signature)
            .body(form.clone())
            .send()
            .await
            .expect("pause answers");
        let status = response.status();
        let text = response.text().await.expect("body");
        let took = start.elapsed();
        assert_eq!(status, 401, "{text}");
        assert!(text.contains("signature does not match"), "{text}");
        took
    };
    for _ in 0..50 {
        send(&none_right).await;
        send(&all_but_one).await;
    }
    let mut zero = Vec::with_capacity(TIMING_SAMPLES);
    let mut thirty_one = Vec::with_capacity(TIMING_SAMPLES);
    for round in 0..TIMING_SAMPLES {
        // Interleaved, alternating which goes first.
        if round % 2 == 0 {
            zero.push(send(&none_right).await);
            thirty_one.push(send(&all_but_one).await);
        } else {
            thirty_one.push(send(&all_but_one).await);
            zero.push(send(&none_right).await);
        }
    }
    // Each pair was sent back to back, so the load of the moment weighs on both: the
    // median of the pairs' differences, not the difference of the medians.
    let mut paired: Vec<i128> = zero
        .iter()
        .zip(&thirty_one)
        .map(|(t0, t31)| t31.as_nanos() as i128 - t0.as_nanos() as i128)
        .collect();
    paired.sort_unstable();
    let difference = Duration::from_nanos(paired[paired.len() / 2].unsigned_abs() as u64);
    let (m0, m31) = (median(&mut zero), median(&mut thirty_one));
    let bound = timing_bound(&paired, m0.max(m31));
    println!(
        "wrong signatures, {TIMING_SAMPLES} requests each: median {m0:?} with 0 leading bytes \
         right, {m31:?} with 31; median difference of the pairs {difference:?} (bound \
         {bound:?})"
    );
    assert!(
        difference < bound,
        "median difference of the pairs {difference:?}: median with 0 right bytes {m0:?}, \
         with 31 {m31:?}"
    );
    // The right signature still works (the test measured the real check).
    let response = svc
        .post(
            "/svc/api/job_exec/pause",
            form.as_bytes(),
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("X-Svc-Sign", &good),
            ],
        )
        .await;
    response.assert_status(200);
}
